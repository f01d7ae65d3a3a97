#include "formats/db/db.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>
#include <atomic>

#include "common/file.hpp"
#include "formats/db/internal.hpp"
#include "formats/db/lazy.hpp"
#include "formats/db/regions.hpp"

using namespace hpc;
using namespace hpc::db;
namespace fs = std::filesystem;

namespace {

const fs::path kConf = fs::path(HPC_SHARED_DIR) / "conformance";

std::vector<fs::path> conformance_dbs() {
  std::vector<fs::path> out;
  for (auto& e : fs::directory_iterator(kConf / "dbase"))
    if (e.is_directory()) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

fs::path temp_dir(const std::string& tag) {
  fs::path d = fs::temp_directory_path() / ("hpc-db-test-" + tag + "-" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Runs a command and returns (exit status, stdout).
std::pair<int, std::string> run(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {-1, ""};
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

std::string checker_env() { return "PYTHONPATH=" + kConf.string() + " /usr/bin/python3 "; }

// The reference checker's reading of a database, as canonical text.
std::pair<int, std::string> checker_text(const fs::path& db) {
  return run(checker_env() + std::string(HPC_DB_SOURCE_DIR) + "/canonical.py '" + db.string() + "' 2>&1");
}

bool checker_available() { return run(checker_env() + "-c 'import click, ruamel.yaml' 2>&1").first == 0; }

// A small database built by hand: 2 thread profiles and the summary, nested contexts of
// every lexical type, 2 metrics in 2 scopes each with summaries, and a trace.
Database hand_built() {
  Database db;
  Meta& m = db.meta;
  m.general = {"hand-built", "a database written by the unit test"};
  m.idNames = {"SUMMARY", "NODE", "RANK", "THREAD", "GPUDEVICE", "GPUCONTEXT", "GPUSTREAM", "CORE"};
  m.scopes = {{"point", 1, 255}, {"function", 3, 0}, {"execution", 2, 255}};
  for (uint16_t i = 0; i < 2; ++i) {
    Metric mt;
    mt.name = i == 0 ? "CPUTIME (sec)" : "page-faults";
    mt.scopeInsts = {{0, uint16_t(3 * i)}, {1, uint16_t(3 * i + 1)}, {2, uint16_t(3 * i + 2)}};
    mt.summaries = {{0, "$$", 0, uint16_t(3 * i)}, {2, "$$", 0, uint16_t(3 * i + 2)}, {2, "$$", 2, uint16_t(10 + i)}};
    m.metrics.push_back(mt);
  }
  m.modules = {{0, "/opt/app/bin/app"}, {0, "/lib/libm.so.6"}};
  m.files = {{0, "/src/app.c"}};
  Function fmain{"main", 0, 0x1000, 0, 10, 0};
  Function fkern{"kernel", 0, 0x1100, 0, 30, 0};
  Function fexp{"exp", 1, 0x2000, kNone, 0, 0};
  m.functions = {fmain, fkern, fexp};
  Context instr{6, 1, 3, 0, kNone, kNone, 0, 1, 0x2010, {}};
  Context call_exp{5, 1, 0, 0, 2, kNone, 0, kNone, 0, {instr}};
  Context line_in_loop{4, 0, 2, 1, kNone, 0, 33, kNone, 0, {call_exp}};
  Context loop{3, 0, 1, 1, kNone, 0, 32, 0, 0x1120, {line_in_loop}};
  Context kern{7, 2, 0, 0, 1, kNone, 0, kNone, 0, {loop}};
  Context line_main{8, 0, 2, 1, kNone, 0, 12, kNone, 0, {kern}};
  Context main_fn{2, 1, 0, 0, 0, kNone, 0, kNone, 0, {line_main}};
  m.entryPoints = {{1, 1, "main thread", {main_fn}}};

  auto row = [](std::initializer_list<std::tuple<uint32_t, uint16_t, double>> vals) {
    ProfileValues v;
    std::optional<uint32_t> cur;
    for (auto [c, mt, x] : vals) {
      if (cur && *cur != c) v.close(*cur);
      cur = c;
      v.push(mt, x);
    }
    if (cur) v.close(*cur);
    return v;
  };
  Profile summary;
  summary.flags = 1;
  summary.values = row({{0, 2, 3.0}, {4, 0, 3.0}, {6, 3, 7.0}, {6, 11, 5.0}});
  Profile t0;
  t0.idTuple = std::vector<Identifier>{{1, 1, 0, 0xabcdef}, {3, 0, 0, 0}};
  t0.values = row({{0, 2, 1.0}, {4, 0, 1.0}, {4, 1, 1.0}, {6, 3, 2.0}});
  Profile t1;
  t1.idTuple = std::vector<Identifier>{{1, 1, 0, 0xabcdef}, {3, 0, 1, 1}};
  t1.values = row({{0, 2, 2.0}, {4, 0, 2.0}, {6, 3, 5.0}});
  db.profiles = {summary, t0, t1};

  db.contexts.resize(9);
  auto col = [](std::initializer_list<std::tuple<uint16_t, uint32_t, double>> vals) {
    ContextValues v;
    std::optional<uint16_t> cur;
    for (auto [mt, p, x] : vals) {
      if (cur && *cur != mt) v.close(*cur);
      cur = mt;
      v.push(p, x);
    }
    if (cur) v.close(*cur);
    return v;
  };
  db.contexts[0] = col({{2, 1, 1.0}, {2, 2, 2.0}});
  db.contexts[4] = col({{0, 1, 1.0}, {0, 2, 2.0}, {1, 1, 1.0}});
  db.contexts[6] = col({{3, 1, 2.0}, {3, 2, 5.0}});
  TraceDb tr;
  tr.minTimestamp = 1000;
  tr.maxTimestamp = 4000;
  tr.traces = {{1, {{1000, 4}, {2000, 6}, {3000, 0}, {3500, 4}}}, {2, {{1500, 6}, {4000, 4}}}};
  db.trace = tr;
  return db;
}

}  // namespace

TEST(DbConformance, EveryReferenceDatabaseReadsAsTheCheckerReadsIt) {
  if (!checker_available()) GTEST_SKIP() << "reference checker's python modules missing";
  auto dbs = conformance_dbs();
  ASSERT_EQ(dbs.size(), 8u);
  for (const fs::path& d : dbs) {
    SCOPED_TRACE(d.string());
    auto db = read_database(d);
    ASSERT_TRUE(db.ok()) << db.status().message();
    auto [rc, want] = checker_text(d);
    ASSERT_EQ(rc, 0) << want;
    std::string ours = canonical_text(*db);
    EXPECT_GT(ours.size(), 1000u);
    EXPECT_EQ(ours, want);
  }
}

TEST(DbConformance, SmallDatabaseHasKnownContent) {
  auto db = read_database(kConf / "dbase/small.d");
  ASSERT_TRUE(db.ok()) << db.status().message();
  EXPECT_EQ(db->meta.general.title, "testmeas-small");
  ASSERT_EQ(db->meta.metrics.size(), 1u);
  EXPECT_EQ(db->meta.metrics[0].name, "CPUTIME (sec)");
  EXPECT_EQ(db->meta.scopes.size(), 4u);
  ASSERT_EQ(db->meta.functions.size(), 3u);
  ASSERT_EQ(db->profiles.size(), 2u);
  EXPECT_EQ(db->profiles[0].flags & 1, 1u);
  ASSERT_TRUE(db->profiles[1].idTuple.has_value());
  ASSERT_TRUE(db->trace.has_value());
  EXPECT_EQ(db->trace->traces.size(), 1u);
}

TEST(DbWriter, FlexFieldsTakeWholeWordsPastTheLastByteUsed) {
  // A context's flexible fields as the writer places them: the record grows by the words up
  // to the last byte taken (8-byte pointers first, the 4-byte line after them).
  detail::FlexAlloc none;
  EXPECT_EQ(none.words(), 0u);
  detail::FlexAlloc fn;
  EXPECT_EQ(fn.take(8), 0u);
  EXPECT_EQ(fn.words(), 1u);
  detail::FlexAlloc fileLine;
  EXPECT_EQ(fileLine.take(8), 0u);
  EXPECT_EQ(fileLine.take(8), 8u);
  EXPECT_EQ(fileLine.take(4), 16u);
  EXPECT_EQ(fileLine.words(), 3u);  // 20 bytes
  detail::FlexAlloc all;
  for (uint32_t size : {8u, 8u, 4u, 8u, 8u}) all.take(size);
  EXPECT_EQ(all.words(), 5u);  // 36 bytes: function, file, line, module, offset
}

TEST(DbWriter, HandBuiltModelIsReadByTheCheckerAndRoundTrips) {
  Database model = hand_built();
  fs::path dir = temp_dir("hand") / "hand.d";
  ASSERT_TRUE(write_database(model, dir).ok());
  auto back = read_database(dir);
  ASSERT_TRUE(back.ok()) << back.status().message();
  std::string want = canonical_text(model);
  EXPECT_EQ(canonical_text(*back), want);
  EXPECT_NE(want.find("cv 6 3 2 4014000000000000"), std::string::npos);  // 5.0 for profile 2
  if (checker_available()) {
    auto [rc, text] = checker_text(dir);
    ASSERT_EQ(rc, 0) << text;
    EXPECT_EQ(text, want);
    auto [prc, yaml] = run(checker_env() + "-m hpctesttool.formats.print '" + dir.string() + "' 2>&1");
    EXPECT_EQ(prc, 0) << yaml;
    EXPECT_NE(yaml.find("name: kernel"), std::string::npos);
  }
  fs::remove_all(dir.parent_path());
}

TEST(DbWriter, ReplacesOnlyNothingAnEmptyDirectoryOrADatabase) {
  const fs::path base = temp_dir("replace");
  const Database model = hand_built();
  auto put = [](const fs::path& f, const std::string& text) { std::ofstream(f) << text; };
  // Nothing there, an empty directory, a database (ours, then an older version's): written.
  fs::create_directories(base / "empty.d");
  fs::create_directories(base / "old.d");
  put(base / "old.d" / "experiment.xml", "<HPCToolkitExperiment/>");
  for (const char* name : {"new.d", "empty.d", "new.d", "old.d"}) {
    Status st = write_database(model, base / name);
    ASSERT_TRUE(st.ok()) << name << ": " << st.message();
    EXPECT_TRUE(fs::is_regular_file(base / name / "meta.db")) << name;
  }
  EXPECT_FALSE(fs::exists(base / "old.d" / "experiment.xml"));
  // A file, or a directory of other things: refused by name, and left as they were.
  put(base / "notes.txt", "mine");
  fs::create_directories(base / "work");
  put(base / "work" / "keep.c", "int main() {}");
  const std::pair<const char*, const char*> refused[] = {
      {"notes.txt", "notes.txt: exists and is not a directory"},
      {"work", "work: exists and is not a database (no meta.db or experiment.xml in it)"}};
  for (const auto& [name, why] : refused) {
    Status st = write_database(model, base / name);
    ASSERT_FALSE(st.ok()) << name;
    EXPECT_NE(st.message().find(why), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("left as it is"), std::string::npos) << st.message();
  }
  std::ifstream notes(base / "notes.txt"), keep(base / "work" / "keep.c");
  std::string a, b;
  std::getline(notes, a);
  std::getline(keep, b);
  EXPECT_EQ(a, "mine");
  EXPECT_EQ(b, "int main() {}");
  EXPECT_EQ(std::distance(fs::directory_iterator(base / "work"), fs::directory_iterator()), 1);
  fs::remove_all(base);
}

TEST(DbWriter, RewrittenReferenceDatabasesCompareEqual) {
  if (!checker_available()) GTEST_SKIP() << "reference checker's python modules missing";
  fs::path tmp = temp_dir("rewrite");
  for (const fs::path& d : conformance_dbs()) {
    SCOPED_TRACE(d.string());
    auto db = read_database(d);
    ASSERT_TRUE(db.ok()) << db.status().message();
    fs::path out = tmp / d.filename();
    ASSERT_TRUE(write_database(*db, out).ok());
    auto [rc, text] = run(checker_env() + "-m hpctesttool test db-compare '" + out.string() + "' '" +
                          d.string() + "' 2>&1");
    EXPECT_EQ(rc, 0) << text.substr(0, 3000);
  }
  fs::remove_all(tmp);
}

TEST(DbWriter, StreamingWritersMatchWholeFileWriters) {
  Database model = hand_built();
  fs::path dir = temp_dir("stream");
  {
    ProfileDbWriter pw;
    ASSERT_TRUE(pw.begin(dir / "profile.db", 3).ok());
    // Rows arrive out of order, as from several threads.
    for (uint32_t i : {2u, 0u, 1u})
      ASSERT_TRUE(pw.write(i, model.profiles[i].flags, model.profiles[i].idTuple, model.profiles[i].values).ok());
    ProfileValues part;
    ASSERT_TRUE(pw.read(1, 4, 6, part).ok());
    ASSERT_EQ(part.key, std::vector<uint32_t>{4});
    EXPECT_EQ(part.value, (std::vector<double>{1.0, 1.0}));
    ASSERT_TRUE(pw.finish().ok());
    CctDbWriter cw;
    ASSERT_TRUE(cw.begin(dir / "cct.db", 9).ok());
    for (uint32_t c : {0u, 4u, 6u}) ASSERT_TRUE(cw.write(c, model.contexts[c]).ok());
    EXPECT_FALSE(cw.write(5, model.contexts[5]).ok());  // not ascending
    ASSERT_TRUE(cw.finish().ok());
    TraceDbWriter tw;
    ASSERT_TRUE(tw.begin(dir / "trace.db", 2).ok());
    ASSERT_TRUE(tw.write(1, 2, model.trace->traces[1].line).ok());
    ASSERT_TRUE(tw.write(0, 1, model.trace->traces[0].line).ok());
    ASSERT_TRUE(tw.finish().ok());
    ASSERT_TRUE(write_meta(model.meta, dir / "meta.db").ok());
  }
  auto back = read_database(dir);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(canonical_text(*back), canonical_text(model));
  fs::remove_all(dir);
}

// meta.db written to a file goes out its Context section a chunk (1 MiB) at a time, laid out
// first: the same bytes as the whole file built in memory, for a tree wide and deep enough that
// its records and their children's arrays fall in different chunks.
TEST(DbWriter, MetaWrittenInChunksMatchesMetaInMemory) {
  Database model = hand_built();
  Meta& m = model.meta;
  // 60,000 contexts: a chain, each link with a few leaves of each kind of record.
  ContextList chain;
  for (uint32_t i = 0; i < 15000; ++i) {
    Context link{100 + 4 * i, 1, 0, 0, 0, 0, 0, kNone, 0, {}};
    link.children.push_back(Context{100 + 4 * i + 1, 2, 3, 0, kNone, 0, uint32_t(i), kNone, 0, {}});  // line
    link.children.push_back(Context{100 + 4 * i + 2, 2, 4, 0, kNone, kNone, 0, 0, 0x1000 + i, {}});   // instruction
    link.children.push_back(Context{100 + 4 * i + 3, 1, 0, 1, 1, 0, uint32_t(i), 1, 0x20 + i, {}});    // all fields
    if (!chain.empty()) link.children.push_back(std::move(chain.front()));
    chain.clear();
    chain.push_back(std::move(link));
  }
  m.entryPoints.push_back({99, 2, "application thread", std::move(chain)});
  m.entryPoints.push_back({98, 0, "unknown entry", {}});  // no children
  const std::vector<uint8_t> whole = write_meta(m);
  ASSERT_GT(whole.size(), size_t(3) << 20);
  fs::path dir = temp_dir("meta-chunks");
  ASSERT_TRUE(write_meta(m, dir / "meta.db").ok());
  std::ifstream f(dir / "meta.db", std::ios::binary);
  const std::vector<uint8_t> file((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(file == whole) << file.size() << " bytes against " << whole.size();
  auto back = read_meta(ByteView(file, "meta.db"));
  ASSERT_TRUE(back.ok()) << back.status().message();
  // The chain reads back whole: 15,000 links, each with its three leaves, innermost last.
  ASSERT_EQ(back->entryPoints.size(), 3u);
  ASSERT_EQ(back->entryPoints[1].children.size(), 1u);
  const Context* link = &back->entryPoints[1].children.front();
  uint32_t links = 0, lastId = 0;
  while (link) {
    ++links;
    lastId = link->ctxId;
    ASSERT_GE(link->children.size(), 3u);
    EXPECT_EQ(link->children[2].offset, 0x20 + (link->ctxId - 100) / 4);
    link = link->children.size() == 4 ? &link->children[3] : nullptr;
  }
  EXPECT_EQ(links, 15000u);
  EXPECT_EQ(lastId, 100u);
  fs::remove_all(dir);
}

// A row larger than the writer's pieces (4 MiB) is encoded and written a piece at a time; it
// reads back whole and in parts, whatever the alignment it lands on.
TEST(DbWriter, StreamingLargeRowReadsBack) {
  fs::path dir = temp_dir("large-row");
  ProfileValues small, large;
  small.key = {1};
  small.start = {0, 3};
  small.sub = {0, 1, 2};  // 30 bytes of values: the next block starts off a 4-byte boundary
  small.value = {1.5, 2.5, 3.5};
  large.start.clear();
  for (uint32_t c = 0; c < 400000; ++c) {
    large.key.push_back(2 * c + 1);
    large.start.push_back(large.value.size());
    for (uint16_t m = 0; m < 1 + c % 3; ++m) {
      large.sub.push_back(uint16_t(m * 3 + c % 2));
      large.value.push_back(double(c) + 0.25 * m);
    }
  }
  large.start.push_back(large.value.size());
  ASSERT_GT(large.value.size() * 10, size_t(4) << 20);
  ProfileDbWriter pw;
  ASSERT_TRUE(pw.begin(dir / "profile.db", 3).ok());
  ASSERT_TRUE(pw.write(1, 0, std::vector<Identifier>{}, small).ok());
  Status st = pw.write(0, 1, std::nullopt, large);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_TRUE(pw.write(2, 0, std::vector<Identifier>{}, small).ok());
  ProfileValues back;
  ASSERT_TRUE(pw.read(0, 0, UINT32_MAX, back).ok());
  EXPECT_EQ(back.key, large.key);
  EXPECT_EQ(back.start, large.start);
  EXPECT_EQ(back.sub, large.sub);
  EXPECT_EQ(back.value, large.value);
  ProfileValues part;
  ASSERT_TRUE(pw.read(0, 500001, 500007, part).ok());  // contexts 500001, 500003, 500005
  ASSERT_EQ(part.key, (std::vector<uint32_t>{500001, 500003, 500005}));
  const auto from = large.value.begin() + ptrdiff_t(large.start[250000]);
  const auto to = large.value.begin() + ptrdiff_t(large.start[250003]);
  EXPECT_EQ(part.value, std::vector<double>(from, to));
  EXPECT_EQ(part.value.size(), 2u + 3u + 1u);  // c % 3 = 1, 2, 0
  ASSERT_TRUE(pw.read(2, 0, UINT32_MAX, part).ok());
  EXPECT_EQ(part.value, small.value);
  ASSERT_TRUE(pw.finish().ok());
  // The viewer's reader: the summary row searched through its in-memory sample of the index
  // finds every value, and 0 for contexts it lacks (even ids, before the first, past the last,
  // at and around each block's first entry), as the whole row says.
  auto lazy = LazyProfileDb::open(dir / "profile.db");
  ASSERT_TRUE(lazy.ok()) << lazy.status().message();
  EXPECT_EQ(lazy->profiles()[0].sample.size(), (400000 + LazyProfileDb::kStride - 1) / LazyProfileDb::kStride);
  EXPECT_TRUE(lazy->profiles()[1].sample.empty());
  std::mt19937 rng(7);
  std::vector<uint32_t> ctxs{0, 1, 2, 3, 799999, 800000, 800001, 900000, UINT32_MAX};
  for (uint32_t b = 0; b < 400000; b += LazyProfileDb::kStride)
    for (int d = -2; d <= 2; ++d) ctxs.push_back(uint32_t(std::max<int64_t>(0, 2 * int64_t(b) + 1 + d)));
  for (int i = 0; i < 20000; ++i) ctxs.push_back(rng() % 800010);
  size_t found = 0;
  for (uint32_t ctx : ctxs)
    for (uint16_t m = 0; m < 7; ++m) {
      double want = 0;
      if (ctx % 2 == 1 && ctx / 2 < 400000) {
        const uint32_t c = ctx / 2;
        for (uint64_t k = large.start[c]; k < large.start[c + 1]; ++k)
          if (large.sub[k] == m) want = large.value[k], ++found;
      }
      ASSERT_EQ(lazy->value(0, ctx, m), want) << "ctx " << ctx << " metric " << m;
    }
  EXPECT_GT(found, 20000u);
  EXPECT_EQ(lazy->value(1, 1, 1), 2.5);
  fs::remove_all(dir);
}

// Rows written from four threads at once, of sizes that take each of the writer's paths
// (gathered with the rows before them in its buffer, written by themselves, written a piece
// at a time), with trace lines beside them: each reads back as it was written, and the rows
// of the header point where their bytes are.
TEST(DbWriter, RowsFromManyThreadsReadBackWhole) {
  fs::path dir = temp_dir("threads");
  constexpr uint32_t kRows = 240, kThreads = 4;
  auto rowOf = [](uint32_t i) {
    static constexpr uint32_t kContexts[] = {1, 12, 1000, 3000, 30000, 250000};
    ProfileValues r;
    r.start.clear();
    const uint32_t n = kContexts[i % 6] + i % 7;
    for (uint32_t c = 0; c < n; ++c) {
      r.key.push_back(3 * c + i % 3);
      r.start.push_back(r.value.size());
      for (uint16_t m = 0; m <= (c + i) % 2; ++m) {
        r.sub.push_back(uint16_t(4 * m + i % 4));
        r.value.push_back(double(i) * 1e6 + c + 0.5 * m);
      }
    }
    r.start.push_back(r.value.size());
    return r;
  };
  ProfileDbWriter pw;
  TraceDbWriter tw;
  ASSERT_TRUE(pw.begin(dir / "profile.db", kRows).ok());
  ASSERT_TRUE(tw.begin(dir / "trace.db", kRows).ok());
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (uint32_t t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (uint32_t i = t; i < kRows; i += kThreads) {
        if (!pw.write(i, 0, std::vector<Identifier>{}, rowOf(i)).ok()) ++failures;
        std::vector<TraceElem> line(1 + (i * 131) % 5000);
        for (size_t k = 0; k < line.size(); ++k) line[k] = {uint64_t(i) * 100000 + k, uint32_t(i + k)};
        if (!tw.write(i, i, line).ok()) ++failures;
      }
    });
  for (std::thread& th : threads) th.join();
  ASSERT_EQ(failures.load(), 0);
  for (uint32_t i = 0; i < kRows; ++i) {
    ProfileValues back;
    ASSERT_TRUE(pw.read(i, 0, UINT32_MAX, back).ok());
    const ProfileValues want = rowOf(i);
    ASSERT_EQ(back.key, want.key) << "row " << i;
    ASSERT_EQ(back.start, want.start) << "row " << i;
    ASSERT_EQ(back.sub, want.sub) << "row " << i;
    ASSERT_EQ(back.value, want.value) << "row " << i;
  }
  ASSERT_TRUE(pw.finish().ok());
  ASSERT_TRUE(tw.finish().ok());
  std::ifstream pf(dir / "profile.db", std::ios::binary);
  const std::vector<uint8_t> pbytes((std::istreambuf_iterator<char>(pf)), std::istreambuf_iterator<char>());
  auto profiles = read_profile_db(ByteView(pbytes, "profile.db"));
  ASSERT_TRUE(profiles.ok()) << profiles.status().message();
  ASSERT_EQ(profiles->size(), size_t(kRows));
  for (uint32_t i = 0; i < kRows; i += 5) {
    const ProfileValues want = rowOf(i);
    EXPECT_EQ((*profiles)[i].values.key, want.key) << "row " << i;
    EXPECT_EQ((*profiles)[i].values.value, want.value) << "row " << i;
  }
  std::ifstream f(dir / "trace.db", std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto traces = read_trace_db(ByteView(bytes, "trace.db"));
  ASSERT_TRUE(traces.ok()) << traces.status().message();
  ASSERT_EQ(traces->traces.size(), size_t(kRows));
  for (uint32_t i = 0; i < kRows; ++i) {
    const auto& line = traces->traces[i].line;
    ASSERT_EQ(line.size(), size_t(1 + (i * 131) % 5000)) << "line " << i;
    EXPECT_EQ(line.back().timestamp, uint64_t(i) * 100000 + line.size() - 1);
    EXPECT_EQ(line.back().ctxId, uint32_t(i + line.size() - 1));
  }
  fs::remove_all(dir);
}

// Truncations and bit flips of every file kind: each gives a clean error or a valid
// parse, never a crash, hang or runaway allocation.
TEST(DbCorruption, MutatedFilesFailCleanly) {
  std::mt19937_64 rng(20261122);
  size_t rejected = 0, parsed = 0;
  for (const char* dbname : {"small.d", "loops-cputime-t.d", "loops-cuda-nvidia-t.d"}) {
    for (const char* file : {"meta.db", "profile.db", "cct.db", "trace.db"}) {
      fs::path p = kConf / "dbase" / dbname / file;
      auto mf = MappedFile::open(p);
      ASSERT_TRUE(mf.ok()) << mf.status().message();
      std::vector<uint8_t> orig(mf->bytes().begin(), mf->bytes().end());
      for (int i = 0; i < 200; ++i) {
        std::vector<uint8_t> b = orig;
        switch (i % 4) {
        case 0: b.resize(rng() % b.size()); break;
        case 1: b[rng() % b.size()] ^= uint8_t(1u << (rng() % 8)); break;
        case 2:
          for (int k = 0; k < 8; ++k) b[rng() % b.size()] = uint8_t(rng());
          break;
        case 3: {  // a plausible-looking huge count or pointer
          size_t at = (rng() % (b.size() / 8)) * 8;
          uint64_t v = rng() % 2 ? ~0ull : (rng() % (1ull << 40));
          std::memcpy(b.data() + at, &v, std::min<size_t>(8, b.size() - at));
          break;
        }
        }
        ByteView v(b, p.string());
        Status st;
        std::string f = file;
        if (f == "meta.db") st = read_meta(v).status();
        else if (f == "profile.db") st = read_profile_db(v).status();
        else if (f == "cct.db") st = read_cct_db(v).status();
        else st = read_trace_db(v).status();
        if (st.ok()) {
          ++parsed;
        } else {
          ++rejected;
          EXPECT_NE(st.message().find(p.string()), std::string::npos) << st.message();
        }
      }
    }
  }
  EXPECT_GT(rejected, 1000u);
  std::printf("corruption: %zu rejected with an error, %zu still parsed\n", rejected, parsed);
}

TEST(DbErrors, TruncatedHeaderNamesFileOffsetAndField) {
  auto mf = MappedFile::open(kConf / "dbase/small.d/meta.db");
  ASSERT_TRUE(mf.ok());
  std::vector<uint8_t> b(mf->bytes().begin(), mf->bytes().begin() + 20);
  auto r = read_meta(ByteView(b, "cut/meta.db"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().rfind("cut/meta.db: offset 0x", 0), 0u) << r.status().message();
  std::vector<uint8_t> wrong(mf->bytes().begin(), mf->bytes().end());
  wrong[0] = 'X';
  auto r2 = read_meta(ByteView(wrong, "bad/meta.db"));
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("bad/meta.db"), std::string::npos);
}

namespace hpc::db {
namespace {

// A profile.db block read by context range with a cursor (hpcprof-mpi's transpose): fresh
// ranges from the middle of the row, as a rank reads its range once, and ranges one after
// the other, give what reading the whole index gives, for a small index and a large one (a
// search by single entries down to 512 of them, read at once).
TEST(DbRegions, CursorReadsOfRangesMatchWholeIndexReads) {
  for (uint32_t keys : {1000u, 10000u}) {
    ProfileValues row;
    for (uint32_t k = 0; k < keys; ++k) {
      for (uint16_t m = 0; m < 1 + k % 3; ++m) row.push(m, double(k) + 0.25 * m);
      row.close(3 * k + 1);  // contexts 1, 4, 7, ...
    }
    Region region;
    const BlockRef block = region.add(row);
    const std::span<const uint8_t> bytes = region.bytes();
    size_t reads = 0;
    ReadAt read = [&](uint64_t at, std::span<uint8_t> into) -> Status {
      ++reads;
      if (at + into.size() > bytes.size()) return Status::error("read beyond the region");
      std::memcpy(into.data(), bytes.data() + at, into.size());
      return Status();
    };
    const uint32_t end = 3 * keys + 1;
    for (auto [lo, hi] : std::vector<std::pair<uint32_t, uint32_t>>{
             {0, end}, {1, 2}, {2, 4}, {end / 3, end / 2}, {end / 2 + 1, end}, {end - 1, end + 5}, {end, end + 9}}) {
      ProfileValues whole, ranged;
      ASSERT_TRUE(read_profile_block(read, block, lo, hi, whole).ok());
      RowCursor cursor;
      reads = 0;
      ASSERT_TRUE(read_profile_block(read, block, lo, hi, ranged, cursor).ok());
      EXPECT_EQ(whole, ranged) << keys << " [" << lo << ", " << hi << ")";
      // A dozen or more reads a search by single entries took.
      if (lo != 0 && hi - lo < 1000) {
        EXPECT_LE(reads, 8u) << keys << " [" << lo << ", " << hi << ")";
      }
    }
    // Ascending ranges, one cursor: the same values, range by range.
    RowCursor cursor;
    ProfileValues all, part;
    for (uint32_t lo = 0; lo < end; lo += 997) {
      ASSERT_TRUE(read_profile_block(read, block, lo, lo + 997, part, cursor).ok());
      for (size_t j = 0; j < part.key.size(); ++j) {
        for (uint64_t v = part.start[j]; v < part.start[j + 1]; ++v) all.push(part.sub[v], part.value[v]);
        all.close(part.key[j]);
      }
    }
    EXPECT_EQ(all, row) << keys;
  }
}

}  // namespace
}  // namespace hpc::db
