// The database adapter's handling of -R OLD=NEW for source files: meta.db names the file
// at its rewritten path, and the file is copied from there into the database's src/.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <oneapi/tbb/task_arena.h>

#include "analysis/expand.hpp"
#include "analysis/io.hpp"
#include "analysis/memory_sink.hpp"
#include "analysis/options.hpp"
#include "analysis/pipeline.hpp"
#include "common/file.hpp"
#include "formats/db/db.hpp"
#include "formats/hpcrun/hpcrun.hpp"
#include "formats/structfile/structfile.hpp"
#include "structure/emit.hpp"
#include "structure/structure.hpp"

namespace hpc::analysis {
namespace {

namespace fs = std::filesystem;

TEST(ReplacePath, FirstMatchingPrefix) {
  std::vector<PathReplacement> r{{"/a/", "/x/"}, {"/a/b/", "/y/"}};
  EXPECT_EQ(replacePath("/a/b/c.c", r), "/x/b/c.c");
  EXPECT_EQ(replacePath("/b/c.c", r), "/b/c.c");
}

TEST(ReplacePath, ArgumentSplitsAtTheFirstUnescapedEquals) {
  auto r = parseReplacement("/build/a=b/src=/home/me/src");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->from, "/build/a");
  EXPECT_EQ(r->to, "b/src=/home/me/src");
  r = parseReplacement("/build/a\\=b/src=/home/me/x\\=y");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->from, "/build/a=b/src");
  EXPECT_EQ(r->to, "/home/me/x=y");
  r = parseReplacement("/old=");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->to, "");
  for (const char* bad : {"/no/equals", "=/new", "/only\\=escaped"}) {
    auto b = parseReplacement(bad);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_NE(b.status().message().find(bad), std::string::npos) << b.status().message();
  }
}

TEST(DefaultDatabase, NamedAsTheReferenceNamesIt) {
  fs::path tmp = fs::temp_directory_path() / ("hpc-default-db-" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  for (const char* d : {"hpctoolkit-my-app-measurements", "hpctoolkit-my-app-measurements-1234", "runs",
                        "hpctoolkit-x-measurements-12a", "hpctoolkit-my-app-measurements-77.pbs01"})
    fs::create_directories(tmp / d);
  const fs::path profile = "my-app-000000-001-7f000101-4242-0.hpcrun";
  EXPECT_EQ(defaultDatabase({tmp / "hpctoolkit-my-app-measurements"}, profile),
            tmp / "hpctoolkit-my-app-database");
  EXPECT_EQ(defaultDatabase({tmp / "hpctoolkit-my-app-measurements/"}, profile),
            tmp / "hpctoolkit-my-app-database");
  EXPECT_EQ(defaultDatabase({tmp / "hpctoolkit-my-app-measurements-1234"}, profile),
            tmp / "hpctoolkit-my-app-database-1234");
  // A PBS job id (hpcrun appends the batch system's, as the reference's does).
  EXPECT_EQ(defaultDatabase({tmp / "hpctoolkit-my-app-measurements-77.pbs01"}, profile),
            tmp / "hpctoolkit-my-app-database-77.pbs01");
  EXPECT_EQ(defaultDatabase({tmp / "hpctoolkit-x-measurements-12a"}, profile),
            tmp / "hpctoolkit-x-measurements-12a-database");
  EXPECT_EQ(defaultDatabase({tmp / "runs"}, profile), tmp / "runs-database");
  // Several inputs, or a profile: the program's name, dashes and all.
  EXPECT_EQ(defaultDatabase({tmp / "runs", tmp / "hpctoolkit-my-app-measurements"}, profile),
            "hpctoolkit-my-app-database");
  EXPECT_EQ(defaultDatabase({tmp / "runs" / profile}, profile), "hpctoolkit-my-app-database");
  EXPECT_EQ(defaultDatabase({}, "short-1.hpcrun"), "hpctoolkit-short-database");

  // An existing default is never replaced: the first free -N beside it.
  const fs::path db = tmp / "hpctoolkit-my-app-database";
  EXPECT_EQ(unusedPath(db), db);
  fs::create_directories(db);
  fs::create_directories(tmp / "hpctoolkit-my-app-database-2");
  std::ofstream(tmp / "hpctoolkit-my-app-database-3") << "a file\n";
  EXPECT_EQ(unusedPath(db), tmp / "hpctoolkit-my-app-database-4");
  fs::remove_all(tmp);
}

TEST(WriteMeta, SourcesFollowReplacePath) {
  fs::path tmp = fs::temp_directory_path() / ("hpc-io-test-" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp / "now" / "src");
  std::ofstream(tmp / "now" / "src" / "small.c") << "int main() {}\n";

  Names names;
  names.file("/measured/src/small.c");
  names.file("/elsewhere/gone.c");
  names.finalize();
  Cct cct;
  cct.finalize();
  MetricTable metrics({"CPUTIME (sec)"}, false);
  std::vector<PathReplacement> replace{{"/measured/", (tmp / "now").string() + "/"}};
  MetaInput meta{"t", &cct, &names, &metrics, 0, &replace};
  fs::create_directories(tmp / "db");
  ASSERT_TRUE(writeMeta(tmp / "db", meta).ok());

  const std::string moved = (tmp / "now" / "src" / "small.c").string();
  EXPECT_TRUE(fs::is_regular_file(tmp / "db" / "src" / fs::path(moved).relative_path()));
  auto file = MappedFile::open(tmp / "db" / "meta.db");
  ASSERT_TRUE(file.ok());
  auto m = db::read_meta(file->view());
  ASSERT_TRUE(m.ok()) << m.status().message();
  std::vector<std::string> paths;
  for (const db::File& f : m->files) paths.push_back(f.path);
  EXPECT_NE(std::find(paths.begin(), paths.end(), moved), paths.end());
  EXPECT_NE(std::find(paths.begin(), paths.end(), "/elsewhere/gone.c"), paths.end());
  fs::remove_all(tmp);
}

// Deep recursion in an application makes call chains of hundreds of thousands of contexts:
// building, listing, writing, reading, printing and freeing such a tree must not recurse
// (each of these overflowed an 8 MiB stack before). Every fourth context is hidden (an
// instruction below a line), so meta.db lists its child in its place.
TEST(WriteMeta, DeepChainWithoutRecursion) {
  fs::path tmp = fs::temp_directory_path() / ("hpc-io-deep-" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp / "db");
  constexpr uint32_t kDepth = 600000;
  uint32_t listed = 0;
  {
    Names names;
    const File* file = names.file("/deep/rec.c");
    const Module* module = names.module("/deep/rec");
    Cct cct;
    ContextKey entry;
    entry.kind = NodeKind::Entry;
    entry.entry = EntryKind::MainThread;
    Context* at = cct.root()->child(entry);
    for (uint32_t i = 0; i < kDepth; ++i) {
      ContextKey k;
      if (i % 4 == 3) {
        k.type = LexType::Instruction;
        k.module = module;
        k.offset = i;
        k.hidden = true;
      } else {
        k.type = LexType::Line;
        k.file = file;
        k.line = i + 1;
        ++listed;
      }
      at = at->child(k);
    }
    cct.finalize();
    names.finalize();
    ASSERT_EQ(cct.size(), kDepth + 2);
    MetricTable metrics({"CPUTIME (sec)"}, false);
    MetaInput meta{"deep", &cct, &names, &metrics, 0, nullptr};
    ASSERT_TRUE(writeMeta(tmp / "db", meta).ok());
  }  // the tree is freed here
  auto file = MappedFile::open(tmp / "db" / "meta.db");
  ASSERT_TRUE(file.ok());
  {
    auto m = db::read_meta(file->view());
    ASSERT_TRUE(m.ok()) << m.status().message();
    ASSERT_EQ(m->entryPoints.size(), 1u);
    uint32_t depth = 0, lastLine = 0;
    const db::ContextList* level = &m->entryPoints[0].children;
    while (!level->empty()) {
      ASSERT_EQ(level->size(), 1u) << "at depth " << depth;
      const db::Context& c = level->front();
      ASSERT_NE(c.file, db::kNone);
      EXPECT_GT(c.line, lastLine);  // the lines in order, hidden instructions left out
      lastLine = c.line;
      ++depth;
      level = &c.children;
    }
    EXPECT_EQ(depth, listed);
    std::ostringstream text;
    ASSERT_TRUE(db::dump(tmp / "db" / "meta.db", text).ok());
    EXPECT_NE(text.str().find("|line " + std::to_string(lastLine) + "|"), std::string::npos);
  }  // the read tree is freed here
  fs::remove_all(tmp);
}


// While the first profile is unified alone, another thread reads the next ones ahead and
// keeps those whose nodes are the first one's; then every thread compares its profiles with
// the first one's buffers, shared, and takes their contexts where the nodes are the same.
// Here the first profile's unification waits 300 ms (its structure's first answer), so that
// profiles 1-5 (the first one's nodes, values of their own) are read meanwhile; profile 3
// lists them in another binary (the same node bytes: kept, but read again in turn and
// unified apart), profile 6 has one node more (the reading ahead stops there, and the reading
// thread unifies it at once, without waiting for the first) and profile 8 is cut short
// (skipped, warned about). The database is the
// one thread's at two and three threads, and profiles read ahead are not all read again.
class SlowStructure final : public StructureSource {
public:
  bool lookup(const std::string&, uint64_t, std::vector<ScopeStep>& out) const override {
    if (!answered_.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      answered_.store(true);
    }
    out.clear();
    return false;  // instructions stay instructions
  }
  bool answered() const { return answered_.load(); }
  void reset() { answered_.store(false); }

private:
  mutable std::atomic<bool> answered_{false};
};

class CountedProfile final : public ProfileSource {
public:
  CountedProfile(std::unique_ptr<ProfileSource> in, const SlowStructure& s) : in_(std::move(in)), s_(s) {}
  const std::string& path() const override { return in_->path(); }
  Expected<ProfileTree> readTree() override { return in_->readTree(); }
  Expected<ProfileValues> readValues() override { return in_->readValues(); }
  Status read(ProfileData& out) override {
    ++reads;
    if (!s_.answered()) ++early;
    return in_->read(out);
  }
  int reads = 0, early = 0;

private:
  std::unique_ptr<ProfileSource> in_;
  const SlowStructure& s_;
};

TEST(Pipeline, ProfilesReadAheadWhileTheFirstIsUnified) {
  fs::path tmp = fs::temp_directory_path() / ("hpc-read-ahead-" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  std::vector<fs::path> files;
  for (uint32_t p = 0; p < 10; ++p) {
    hpcrun::Profile prof;
    prof.header = {{"program-name", "ahead"}};
    prof.load_modules.push_back({1, p == 3 ? "/bin/other" : "/bin/ahead", 1});
    hpcrun::MetricDesc md;
    md.name = md.description = "CPUTIME (sec)";
    md.flags.val_fmt = hpcrun::kValFmtReal;
    prof.metrics = {md};
    prof.id_kinds = {{hpcrun::kIdThread, "THREAD"}};
    prof.id_tuple = {{hpcrun::kIdThread, p, p}};
    prof.nodes.push_back({1, 0, 0, 0, 1, {}});
    for (uint32_t i = 2; i <= 300 + (p == 6 ? 1 : 0); ++i) {
      hpcrun::CctNode n{i, i < 5 ? i - 1 : 2 + i % 7, 1, 0x1000 + 4 * uint64_t(i % 97) + 512 * (i / 97), 1, {}};
      if ((i + p) % 9 == 0) n.values.push_back({0, std::bit_cast<uint64_t>(0.25 * (i % 5 + 1) + p)});
      prof.nodes.push_back(n);
    }
    files.push_back(tmp / ("ahead-000000-" + std::to_string(100 + p) + "-0-0-0.hpcrun"));
    ASSERT_TRUE(hpcrun::write_profile(prof, files.back()).ok());
  }
  fs::resize_file(files[8], fs::file_size(files[8]) / 2);

  SlowStructure structure;
  auto run = [&](unsigned threads, MemorySink& sink, std::vector<int>& reads, std::vector<int>& early) {
    structure.reset();
    std::vector<std::unique_ptr<ProfileSource>> in;
    std::vector<CountedProfile*> counted;
    for (const fs::path& f : files) {
      auto c = std::make_unique<CountedProfile>(openHpcrunProfile(f, {}), structure);
      counted.push_back(c.get());
      in.push_back(std::move(c));
    }
    PipelineOptions opt;
    opt.threads = threads;
    opt.scratchDir = tmp;
    auto r = runPipeline(in, &structure, sink, opt);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->skipped, 1u);
    for (CountedProfile* c : counted) {
      reads.push_back(c->reads);
      early.push_back(c->early);
    }
  };
  MemorySink one, two, three;
  std::vector<int> reads1, early1, reads2, early2, reads3, early3;
  run(1, one, reads1, early1);
  run(2, two, reads2, early2);
  run(3, three, reads3, early3);
  ASSERT_EQ(one.rows.size(), 10u);  // the summary and 9 profiles
  for (const MemorySink* other : {&two, &three}) {
    ASSERT_EQ(one.rows.size(), other->rows.size());
    for (size_t p = 0; p < one.rows.size(); ++p) {
      EXPECT_EQ(one.rows[p].ctx, other->rows[p].ctx) << p;
      EXPECT_EQ(one.rows[p].metric, other->rows[p].metric) << p;
      EXPECT_EQ(one.rows[p].value, other->rows[p].value) << p;
    }
    ASSERT_EQ(one.columns.size(), other->columns.size());
    for (size_t i = 0; i < one.columns.size(); ++i) {
      EXPECT_EQ(one.columns[i].ctx, other->columns[i].ctx);
      EXPECT_EQ(one.columns[i].profile, other->columns[i].profile);
      EXPECT_EQ(one.columns[i].value, other->columns[i].value);
    }
  }
  EXPECT_GT(one.rows[6].size(), 0u);
  // Profile 3's contexts are its own binary's: none of its row's is profile 1's.
  ASSERT_GT(one.rows[4].size(), 0u);
  for (uint32_t c : one.rows[4].ctx)
    if (c != 0) {
      EXPECT_TRUE(std::find(one.rows[2].ctx.begin(), one.rows[2].ctx.end(), c) == one.rows[2].ctx.end() || c < 3)
          << c;
    }
  // One thread reads each profile once, in turn; with two, profiles 1-6 were read while the
  // first was unified, 3 (another binary) again after, 6 (nodes of its own) again at once,
  // to be unified while the first one still was, and of the others not all again.
  for (int r : reads1) EXPECT_EQ(r, 1);
  for (int p = 1; p <= 5; ++p) EXPECT_EQ(early2[p], 1) << p;
  EXPECT_EQ(early2[6], 2);
  EXPECT_EQ(reads2[3], 2);
  EXPECT_EQ(reads2[6], 2);
  int again = 0;
  for (int p : {1, 2, 4, 5}) again += reads2[p] - 1;
  EXPECT_LT(again, 4);
  EXPECT_EQ(reads2[7], 1);
  EXPECT_EQ(reads2[8], 1);
  fs::remove_all(tmp);
}


// Two answers for one address alike in all but the inline sites' numbers.
void expectSameSteps(const std::vector<ScopeStep>& a, const std::vector<ScopeStep>& b, uint64_t at) {
  ASSERT_EQ(a.size(), b.size()) << "at 0x" << std::hex << at;
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(int(a[k].kind), int(b[k].kind)) << "at 0x" << std::hex << at;
    EXPECT_EQ(a[k].name, b[k].name);
    EXPECT_EQ(a[k].file, b[k].file);
    EXPECT_EQ(a[k].line, b[k].line);
    EXPECT_EQ(a[k].offset, b[k].offset);
  }
}

// hpcprof without structure files analyses only the procedures its instructions fall in, one
// at a time: every address must come out as a structure file of the whole binary from
// hpcstruct's code gives it (inline sites numbered apart, but one to one).
TEST(MeasuredBinaries, EachProcedureAsTheWholeBinarysStructureFileHasIt) {
  const fs::path libs = fs::path(HPC_BINARY_DIR) / "src/structure/testlibs";
  std::vector<std::pair<fs::path, uint64_t>> binaries;  // binary, step between addresses
  for (const char* name : {"libinline_loops.so", "libnest3.so", "libswitch_loop.so", "libstripped_s.so",
                           "libcalled_only.so"})
    binaries.emplace_back(libs / name, 1);
  // Ours, built -O2 -g: C++ inlined at many sites in many procedures.
  binaries.emplace_back(fs::path(HPC_BINARY_DIR) / "lib/libhpcrun.so", 3);
  if (fs::exists("/lib/x86_64-linux-gnu/libc.so.6")) binaries.emplace_back("/lib/x86_64-linux-gnu/libc.so.6", 13);
  for (const auto& [binary, step] : binaries) {
    SCOPED_TRACE(binary.string());
    ASSERT_TRUE(fs::exists(binary));
    auto whole = structure::analyze_binary(binary.string(), structure::Options{});
    ASSERT_TRUE(whole.ok()) << whole.status().message();
    const fs::path file = fs::temp_directory_path() / ("hpc-whole-" + std::to_string(::getpid()) + ".hpcstruct");
    ASSERT_TRUE(structure::write_structure_file(*whole, file.string()).ok());
    auto fromFile = loadStructure({file}, 1);
    fs::remove(file);
    ASSERT_TRUE(fromFile.ok()) << fromFile.status().message();
    auto lazy = withMeasuredBinaries(nullptr, {});
    uint64_t end = 0;
    for (const auto& p : whole->procedures) end = std::max(end, p.entry + 1);
    end += 1 << 16;  // past the last entry: its code
    // Another, its procedures analysed ahead on two threads (as for hpcprof's first
    // profile): the same answers.
    auto ahead = withMeasuredBinaries(nullptr, {});
    {
      std::vector<uint64_t> offsets;
      for (uint64_t at = 0; at < end; at += step) offsets.push_back(at);
      std::reverse(offsets.begin(), offsets.end());
      tbb::task_arena(2).execute([&] { ahead->prepare(binary.string(), offsets); });
    }
    std::vector<ScopeStep> c;
    std::map<uint64_t, uint64_t> siteTo, siteFrom;
    size_t found = 0, inlined = 0, loops = 0;
    std::vector<ScopeStep> a, b;
    for (uint64_t at = 0; at < end; at += step) {
      a.clear();
      b.clear();
      const bool inFile = (*fromFile)->lookup(binary.string(), at, a);
      const bool inLazy = lazy->lookup(binary.string(), at, b);
      ASSERT_EQ(inFile, inLazy) << "at 0x" << std::hex << at;
      c.clear();
      ASSERT_EQ(ahead->lookup(binary.string(), at, c), inLazy) << "at 0x" << std::hex << at;
      ASSERT_EQ(c.size(), b.size());
      for (size_t k = 0; k < c.size(); ++k) {
        EXPECT_EQ(c[k].name, b[k].name);
        EXPECT_EQ(c[k].site, b[k].site);
        EXPECT_EQ(c[k].line, b[k].line);
      }
      if (!inFile) continue;
      ++found;
      ASSERT_NO_FATAL_FAILURE(expectSameSteps(a, b, at));
      for (size_t k = 0; k < a.size(); ++k) {
        if (a[k].kind == ScopeStep::Kind::Inline) {
          ++inlined;
          EXPECT_EQ(siteTo.emplace(a[k].site, b[k].site).first->second, b[k].site) << "at 0x" << std::hex << at;
          EXPECT_EQ(siteFrom.emplace(b[k].site, a[k].site).first->second, a[k].site) << "at 0x" << std::hex << at;
        }
        if (a[k].kind == ScopeStep::Kind::Loop) ++loops;
      }
    }
    EXPECT_GT(found, 100u);
    if (binary.filename() == "libinline_loops.so") {
      EXPECT_GT(inlined, 0u);
      EXPECT_GT(loops, 0u);
    }
    if (binary.filename() == "libhpcrun.so") {
      EXPECT_GT(siteTo.size(), 100u);  // sites told apart
    }
  }
}

// With threads, the first profile's measured binaries are opened ahead, in parallel: only
// those its instructions fall in, not every one its load map lists (a program maps many it is
// never sampled in, and each opened is a pass over all its procedures).
TEST(MeasuredBinaries, TheFirstProfileOpensOnlyTheBinariesItsInstructionsFallIn) {
  const fs::path libs = fs::path(HPC_BINARY_DIR) / "src/structure/testlibs";
  auto structure = withMeasuredBinaries(nullptr, {});
  Cct cct;
  Names names;
  Expander expander(cct, names, structure.get());
  ProfileTree tree;
  tree.loadMap = {{1, (libs / "libnest3.so").string()},
                  {2, (libs / "libswitch_loop.so").string()},
                  {3, (libs / "libcalled_only.so").string()},
                  {4, (libs / "libinline_loops.so").string()}};
  TreeNode root;
  root.id = 1;
  root.placeholder = Placeholder::MainThread;
  tree.nodes.push_back(root);
  for (uint16_t module : {1, 4, 1}) {
    TreeNode n;
    n.id = uint32_t(tree.nodes.size() + 1);
    n.parent = 1;
    n.module = module;
    n.offset = 0x1000 + n.id;
    tree.nodes.push_back(n);
  }
  const BinaryAnalysis before = binaryAnalysis();
  tbb::task_arena(2).execute([&] { expander.prepareStructure(tree); });
  const BinaryAnalysis after = binaryAnalysis();
  EXPECT_EQ(after.binaries - before.binaries, 2u);  // libnest3 and libinline_loops
  // The ones left out are opened when an instruction of theirs is first looked up.
  std::vector<ScopeStep> steps;
  structure->lookup((libs / "libswitch_loop.so").string(), 0x1000, steps);
  EXPECT_EQ(binaryAnalysis().binaries - before.binaries, 3u);
}

// GPU calling contexts reconstructed on a real cubin: the kit's recursion-sm_75 binary,
// which hpcprof reads itself (its call sites from the SASS). kernmain() calls heart(), which
// calls top1() and top2(); those reach common1() and common2(), which call top1() and top2()
// again (one recursive component), and top2() calls the division slow path. Samples are made
// up, so every share is known. The call sites come from `structure`, for the module measured
// at `cubinPath`.
void expectRecursionPaths(const StructureSource& structure, const std::string& cubinPath) {
  fs::path tmp = fs::temp_directory_path() / ("hpc-gpu-calls-" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  hpcrun::Profile prof;
  prof.header = {{"program-name", "recursion"}};
  prof.load_modules = {{1, "/nonexistent/recursion", 1}, {2, cubinPath, 1}};
  hpcrun::MetricDesc md;
  md.name = "GINS";
  md.description = "GPU instruction execution count";
  md.flags.val_fmt = hpcrun::kValFmtInt;
  prof.metrics = {md};
  prof.id_kinds = {{hpcrun::kIdThread, "THREAD"}};
  prof.id_tuple = {{hpcrun::kIdThread, 0, 0}};
  prof.nodes = {{1, 0, 0, hpcrun::placeholder_tag("^Primary"), 1, {}},
                {2, 1, 0, hpcrun::placeholder_tag("| Main  "), 1, {}},
                {3, 2, 1, 0x1234, 1, {}},
                {4, 3, 0, hpcrun::placeholder_tag("GPUKernl"), 1, {}}};
  const std::pair<uint64_t, uint64_t> samples[] = {
      {0x15530, 2},   // kernmain() calls heart()
      {0x14c30, 10},  // heart(), line 43
      {0x15040, 3},   // heart() calls top1(): 3 of the 4 calls into the component
      {0x150a0, 1},   // heart() calls top2()
      {0x13360, 40},  // top1(), line 31
      {0x14920, 80},  // common2(), line 21
      {0x14840, 1},   // common2() calls top1()
      {0x148d0, 1},   // common2() calls top2()
      {0x11590, 16},  // the slow path, called by top2() alone (its call unsampled: weighs one)
  };
  uint32_t id = 10;
  for (const auto& [pc, gins] : samples) prof.nodes.push_back({id++, 4, 2, pc, 0, {{0, gins}}});
  ASSERT_TRUE(hpcrun::write_profile(prof, tmp / "recursion-000000-000-0-0-0.hpcrun").ok());

  std::vector<std::unique_ptr<ProfileSource>> in;
  in.push_back(openHpcrunProfile(tmp / "recursion-000000-000-0-0-0.hpcrun", {}));
  MemorySink sink;
  PipelineOptions opt;
  opt.scratchDir = tmp;
  auto r = runPipeline(in, &structure, sink, opt);
  ASSERT_TRUE(r.ok()) << r.status().message();
  fs::remove_all(tmp);

  // Each context by its path of function names (call relations) and instruction offsets.
  auto name = [](const Context* c) -> std::string {
    const ContextKey& k = c->key();
    if (k.type == LexType::Function) {
      std::string n = k.function ? k.function->name : "?";
      auto colons = n.find("main::");
      return colons == std::string::npos ? n : n.substr(colons + 6);
    }
    if (k.type == LexType::Instruction) {
      char b[32];
      std::snprintf(b, sizeof b, "%#lx", static_cast<unsigned long>(k.offset));
      return b;
    }
    return "";
  };
  std::map<std::string, double> point;  // "fn/0xsite/fn/.../0xpc" -> GINS there
  std::function<void(const Context*, std::string)> walk = [&](const Context* c, std::string path) {
    const std::string n = name(c);
    if (!n.empty()) path += "/" + n;
    const double v = sink.value(1, c->id(), propId(0, kPoint));
    if (v != 0 && c->key().type == LexType::Instruction) point[path] += v;
    for (const Context* k : c->children()) walk(k, path);
  };
  const Context* op = nullptr;
  std::function<void(const Context*)> find = [&](const Context* c) {
    if (c->key().function && c->key().function->name == "<gpu kernel>") op = c;
    for (const Context* k : c->children()) find(k);
  };
  find(sink.meta.cct->root());
  ASSERT_TRUE(op);
  walk(op, "");
  const std::string heart = "/<gpu kernel>/kernmain()/0x15530/heart()";
  const std::string viaTop1 = heart + "/0x15040", viaTop2 = heart + "/0x150a0";
  const std::string slow = "/__cuda_sm20_div_f64_slowpath_v2/0x11590";
  const std::map<std::string, double> expected = {
      {"/<gpu kernel>/kernmain()/0x15530", 2},
      {heart + "/0x14c30", 10},
      {heart + "/0x15040", 3},
      {heart + "/0x150a0", 1},
      // The component's functions below each call into it, at 3/4 and 1/4.
      {viaTop1 + "/top1(double volatile*, int)/0x13360", 30},
      {viaTop2 + "/top1(double volatile*, int)/0x13360", 10},
      {viaTop1 + "/common2(double volatile*, int)/0x14920", 60},
      {viaTop2 + "/common2(double volatile*, int)/0x14920", 20},
      {viaTop1 + "/common2(double volatile*, int)/0x14840", 0.75},
      {viaTop2 + "/common2(double volatile*, int)/0x14840", 0.25},
      {viaTop1 + "/common2(double volatile*, int)/0x148d0", 0.75},
      {viaTop2 + "/common2(double volatile*, int)/0x148d0", 0.25},
      // The slow path below top2()'s call of it, on each path into the component.
      {viaTop1 + "/top2(double volatile*, int)/0x13d00" + slow, 12},
      {viaTop2 + "/top2(double volatile*, int)/0x13d00" + slow, 4},
  };
  EXPECT_EQ(point, expected);
  EXPECT_EQ(sink.value(1, op->id(), propId(0, kExecution)), 2 + 10 + 3 + 1 + 40 + 80 + 1 + 1 + 16);
}

// hpcprof reads a GPU binary's call graph from its calls alone (ProcedureAnalyzer::
// call_sites), not by analysing every procedure: the same call sites as the C elements of
// the procedures analysed whole, on each of the kit's CUDA binaries with device calls.
TEST(GpuCallPaths, CallSitesReadAloneAsTheAnalysedProceduresHaveThem) {
  size_t binaries = 0, total = 0;
  for (const char* name : {"recursion-sm_75-nvcc112-0", "recursion-sm_75-nvcc112-r", "recursion-sm_75-nvcc112-dr"}) {
    const fs::path cubin = fs::path(HPC_CONFORMANCE_DIR) / "struct/bin" / name;
    if (!fs::exists(cubin)) continue;
    SCOPED_TRACE(name);
    structure::Options options;
    options.gpucfg = true;
    options.nvdisasm = false;
    auto binary = structure::ProcedureAnalyzer::open(cubin.string(), options);
    ASSERT_TRUE(binary.ok()) << binary.status().message();
    std::vector<CallSite> whole, alone;
    for (size_t i = 0; i < (*binary)->size(); ++i) {
      appendCallSites(structure::procedure_model((*binary)->shell(), (*binary)->analyze(i)), whole);
      for (const structure::CallSite& c : (*binary)->call_sites(i)) alone.push_back({c.addr, (*binary)->begin(i), c.target});
    }
    auto bySite = [](const CallSite& a, const CallSite& b) { return a.site < b.site; };
    std::sort(whole.begin(), whole.end(), bySite);
    std::sort(alone.begin(), alone.end(), bySite);
    EXPECT_EQ(alone, whole);
    EXPECT_GE(whole.size(), 9u);  // kernmain -> heart, heart -> top1, top2, ... (the kit's struct file)
    ++binaries;
    total += whole.size();
    // And through the source hpcprof uses.
    auto source = withMeasuredBinaries(nullptr, {});
    std::vector<CallSite> viaSource;
    source->callSites(fs::absolute(cubin).string(), viaSource);
    std::sort(viaSource.begin(), viaSource.end(), bySite);
    EXPECT_EQ(viaSource, whole);
  }
  if (binaries == 0) GTEST_SKIP() << "the kit's CUDA binaries are not here";
}

TEST(GpuCallPaths, RecursionCubinSamplesApportionedOverTheirCallPaths) {
  const fs::path cubin = fs::path(HPC_CONFORMANCE_DIR) / "struct/bin/recursion-sm_75-nvcc112-0";
  if (!fs::exists(cubin)) GTEST_SKIP() << cubin << " not here";
  {
    SCOPED_TRACE("hpcprof's own reading of the cubin");
    auto binary = withMeasuredBinaries(nullptr, {});
    expectRecursionPaths(*binary, fs::absolute(cubin).string());
  }
  {
    SCOPED_TRACE("the reference's structure file of it (hpcstruct --gpucfg=yes)");
    auto file = loadStructure(
        {fs::path(HPC_CONFORMANCE_DIR) / "struct/expected/recursion-sm_75-nvcc112-0+gpucfg.hpcstruct"}, 1);
    ASSERT_TRUE(file.ok()) << file.status().message();
    expectRecursionPaths(**file, "/builds/hpctoolkit/hpctoolkit/builddir/../tests/data/bin/recursion-sm_75-nvcc112-0");
  }
}

// Structure files are read lazily: checked and indexed whole, each procedure (with those
// whose address ranges overlap it) parsed when first looked up. Every answer must be the one
// an AddressIndex over the whole load module gives, on the reference's own files (the
// conformance kit's, CPU and GPU) and on made-up ones with the cases laziness could get
// wrong.
void expectLazyAsWhole(const fs::path& file, size_t step) {
  SCOPED_TRACE(file.string());
  auto whole = structfile::load(file);
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  auto lazy = loadStructure({file}, 1);
  ASSERT_TRUE(lazy.ok()) << lazy.status().message();
  std::set<std::string> seen;
  size_t compared = 0, found = 0;
  std::vector<ScopeStep> a, b;
  for (const structfile::Scope& lm : whole->children) {
    if (!lm.name || !seen.insert(*lm.name).second) continue;  // the first of a name answers
    structfile::AddressIndex index(lm);
    // Every range's ends, the addresses just outside, and a sample inside.
    std::vector<uint64_t> at;
    std::vector<const structfile::Scope*> todo{&lm};
    while (!todo.empty()) {
      const structfile::Scope* sc = todo.back();
      todo.pop_back();
      for (const auto& c : sc->children) todo.push_back(&c);
      if (sc->vranges)
        for (const auto& r : *sc->vranges) {
          for (uint64_t x : {r.begin - 1, r.begin, r.end - 1, r.end}) at.push_back(x);
          for (uint64_t x = r.begin; x < r.end; x += step) at.push_back(x);
        }
    }
    std::sort(at.begin(), at.end());
    at.erase(std::unique(at.begin(), at.end()), at.end());
    for (uint64_t x : at) {
      a.clear();
      b.clear();
      const bool inWhole = structureSteps(index, x, a);
      const bool inLazy = (*lazy)->lookup(*lm.name, x, b);
      ++compared;
      ASSERT_EQ(inWhole, inLazy) << *lm.name << " at 0x" << std::hex << x;
      if (!inWhole) continue;
      ++found;
      ASSERT_NO_FATAL_FAILURE(expectSameSteps(a, b, x));
      for (size_t k = 0; k < a.size(); ++k) EXPECT_EQ(a[k].site, b[k].site);
    }
  }
  EXPECT_GT(found, 0u) << compared << " addresses compared";
}

TEST(StructureFiles, ReadLazilyAsTheWholeFileAnswers) {
  size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(HPC_SHARED_DIR) / "conformance"))
    if (e.path().extension() == ".hpcstruct") {
      expectLazyAsWhole(e.path(), 5);
      ++files;
    }
  EXPECT_GT(files, 20u);
}

TEST(StructureFiles, LazyUnitsThatOverlapAreReadTogether) {
  const fs::path dir = fs::temp_directory_path() / ("hpc-lazy-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  // P "outer" in a.c has a deep statement over [0x20, 0x30) and a cold part at 0x900; P
  // "inner" in b.c (another F, later) a shallow one over [0x28, 0x40), and a statement of
  // its own at 0x905 (the cold part's); P "alone" at 0x100 is under the LM itself; an S
  // sits directly in an F; names use an entity of the DTD.
  const std::string text = R"(<?xml version="1.0"?>
<!DOCTYPE HPCToolkitStructure [
<!ENTITY nm "out">
<!ELEMENT HPCToolkitStructure (LM)*>
]>
<HPCToolkitStructure i="0" version="4.9" n="">
<LM i="2" n="/bin/lazy" has-calls="0" v="{}">
<F i="3" n="a.c">
<P i="4" n="&nm;er" l="1" v="{[0x10-0x11)}">
<L i="5" l="2" f="a.c" v="{[0x20-0x21)}">
<A i="6" l="3" f="a.c" v="{}">
<A i="7" n="helper" l="9" f="h.h" v="{}">
<S i="8" l="10" v="{[0x20-0x30)}"/>
</A>
</A>
</L>
<S i="9" l="4" v="{[0x10-0x20) [0x900-0x910)}"/>
</P>
<S i="10" l="99" v="{[0x500-0x510)}"/>
</F>
<F i="11" n="b.c">
<P i="12" n="inner" l="20" v="{[0x28-0x29)}">
<S i="13" l="21" v="{[0x28-0x40)}"/>
<S i="14" l="22" v="{[0x905-0x906)}"/>
</P>
</F>
<P i="15" n="alone" l="30" v="{[0x100-0x101)}">
<S i="16" l="31" v="{[0x100-0x120)}"/>
</P>
</LM>
</HPCToolkitStructure>
)";
  const fs::path file = dir / "lazy.hpcstruct";
  std::ofstream(file) << text;
  expectLazyAsWhole(file, 1);
  auto lazy = loadStructure({file}, 1);
  ASSERT_TRUE(lazy.ok()) << lazy.status().message();
  std::vector<ScopeStep> out;
  ASSERT_TRUE((*lazy)->lookup("/bin/lazy", 0x2c, out));  // the deeper statement wins
  EXPECT_EQ(out.back().line, 10u);
  ASSERT_TRUE((*lazy)->lookup("/bin/lazy", 0x905, out));  // the later statement of equal depth
  EXPECT_EQ(out.front().name, "inner");
  ASSERT_TRUE((*lazy)->lookup("/bin/lazy", 0x10, out));
  EXPECT_EQ(out.front().name, "outer");  // the entity expanded
  // A damaged file is refused whole, up front, as before.
  std::string bad = text;
  bad.replace(bad.find("<S i=\"16\""), 2, "<Q");
  std::ofstream(dir / "bad.hpcstruct") << bad;
  auto refused = loadStructure({dir / "bad.hpcstruct"}, 1);
  EXPECT_FALSE(refused.ok());
  if (!refused.ok()) {
    EXPECT_NE(refused.status().message().find("bad.hpcstruct"), std::string::npos);
  }
  fs::remove_all(dir);
}


// A trace file is read twice, a chunk of records at a time: pass 1 lists the nodes its records
// name and counts them (a long one only counted), pass 2 gets every record, in order, across
// the chunks' edges; in every version and record size of the format, and cut short (its
// whole records).
TEST(HpcrunTraces, ReadInChunksWholeAndInOrder) {
  fs::path dir = fs::temp_directory_path() / ("hpc-trace-chunks-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  hpcrun::Profile prof;
  prof.header = {{"program-name", "chunks"}};
  prof.load_modules.push_back({1, "/bin/chunks", 1});
  hpcrun::MetricDesc md;
  md.name = md.description = "CPUTIME (sec)";
  md.flags.val_fmt = hpcrun::kValFmtReal;
  prof.metrics = {md};
  prof.id_kinds = {{hpcrun::kIdThread, "THREAD"}};
  prof.id_tuple = {{hpcrun::kIdThread, 0, 0}};
  prof.nodes.push_back({1, 0, 0, 0, 1, {}});
  // 20,000 nodes: a trace of more than 160,000 records is not read in pass 1.
  for (uint32_t i = 2; i <= 20000; ++i) prof.nodes.push_back({i, 1, 1, 0x1000 + 4 * uint64_t(i), 1, {}});
  ASSERT_TRUE(hpcrun::write_profile(prof, dir / "c.hpcrun").ok());
  struct Case {
    const char* version;
    uint64_t flags;
    uint64_t records;
    int cut;  // bytes cut off the end
  };
  for (const Case& c : {Case{"01.01", 0, 100003, 0}, Case{"01.01", hpcrun::kTraceDataCentric, 70001, 0},
                        Case{"01.00", 0, 32768, 0}, Case{"01.01", 0, 65537, 5}, Case{"01.01", 0, 0, 0},
                        Case{"01.01", 0, 200003, 7}}) {
    SCOPED_TRACE(std::string(c.version) + " flags " + std::to_string(c.flags) + " records " + std::to_string(c.records));
    hpcrun::Trace t;
    t.version = c.version;
    t.flags = c.flags;
    for (uint64_t k = 0; k < c.records; ++k)  // runs of k % 7 + 1 records a node, nodes 2-50 and 1000
      t.records.push_back({1000 + 3 * k, k % 5000 == 4999 ? 1000u : uint32_t(2 + (k / (k % 7 + 1)) % 49),
                           c.flags ? uint32_t(k) : 0});
    ASSERT_TRUE(hpcrun::write_trace(t, dir / "c.hpctrace").ok());
    if (c.cut) fs::resize_file(dir / "c.hpctrace", fs::file_size(dir / "c.hpctrace") - uint64_t(c.cut));
    const uint64_t whole = c.cut ? c.records - 1 : c.records;
    std::unique_ptr<ProfileSource> src = openHpcrunProfile(dir / "c.hpcrun", dir / "c.hpctrace");
    ProfileData data;
    ASSERT_TRUE(src->read(data).ok());
    EXPECT_TRUE(data.tree.hasTrace);
    EXPECT_EQ(data.traceStatus.ok(), c.cut == 0) << data.traceStatus.message();
    EXPECT_EQ(data.traceRecords, whole);
    std::set<uint32_t> named;
    for (uint64_t k = 0; k < whole; ++k) named.insert(t.records[k].cct_id);
    // A long trace (more than 8 records a node) is not read now: every node may be named.
    const bool all = whole > 8 * 20000;
    EXPECT_EQ(data.traceAllNodes, all);
    std::vector<uint32_t> listed = data.traceNodes;
    std::sort(listed.begin(), listed.end());
    EXPECT_EQ(listed, all ? std::vector<uint32_t>() : std::vector<uint32_t>(named.begin(), named.end()));
    std::vector<TraceRecord> got;
    size_t chunks = 0;
    ASSERT_TRUE(src->readTrace([&](std::span<const TraceRecord> chunk) -> Expected<bool> {
                     ++chunks;
                     got.insert(got.end(), chunk.begin(), chunk.end());
                     return true;
                   }).ok());
    ASSERT_EQ(got.size(), whole);
    for (uint64_t k = 0; k < whole; ++k) {
      ASSERT_EQ(got[k].time, t.records[k].time) << k;
      ASSERT_EQ(got[k].node, t.records[k].cct_id) << k;
    }
    EXPECT_EQ(chunks, (whole + 32767) / 32768);
    // Enough after the first chunk: no more are read.
    chunks = 0;
    ASSERT_TRUE(src->readTrace([&](std::span<const TraceRecord>) -> Expected<bool> {
                     ++chunks;
                     return false;
                   }).ok());
    EXPECT_EQ(chunks, whole ? 1u : 0u);
  }
  // Gone by pass 2: an error naming the file.
  fs::remove(dir / "c.hpctrace");
  std::unique_ptr<ProfileSource> src = openHpcrunProfile(dir / "c.hpcrun", dir / "c.hpctrace");
  Status st = src->readTrace([](std::span<const TraceRecord>) -> Expected<bool> { return true; });
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("c.hpctrace"), std::string::npos) << st.message();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hpc::analysis
