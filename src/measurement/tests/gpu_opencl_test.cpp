// hpcrun -e gpu=opencl end to end on PoCL: the opencl_threads workload (2 threads, one queue
// each, a known number of kernels and copies of known sizes) bare and measured, then the
// profiles and GPU stream traces queried.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "formats/db/db.hpp"
#include "formats/hpcrun/hpcrun.hpp"
#include "symbolize.hpp"

namespace fs = std::filesystem;
namespace hr = hpc::hpcrun;
using hpc::measurement::test::Symbolizer;

namespace {

// Contexts of a database by id, with their parent and function name ("name [module]" cut
// to the name).
struct ContextIndex {
  std::map<uint32_t, std::pair<uint32_t, std::string>> ctx;
  explicit ContextIndex(const hpc::db::Database& d) {
    std::function<void(const hpc::db::Context&, uint32_t)> walk = [&](const hpc::db::Context& c, uint32_t parent) {
      std::string fn;
      if (c.function != hpc::db::kNone && d.meta.functions[c.function].name) {
        fn = *d.meta.functions[c.function].name;
        fn = fn.substr(0, fn.find(" ["));
      }
      ctx[c.ctxId] = {parent, fn};
      for (auto& k : c.children) walk(k, c.ctxId);
    };
    for (auto& e : d.meta.entryPoints)
      for (auto& c : e.children) walk(c, e.ctxId);
  }
  // Whether context `id` is `fn` or lies below a context of `fn`.
  bool inFunction(uint32_t id, const std::string& fn) const {
    for (auto it = ctx.find(id); it != ctx.end(); it = ctx.find(it->second.first))
      if (it->second.second == fn) return true;
    return false;
  }
};

const std::string kBin = HPC_BINARY_DIR "/bin/";
const std::string kWl = HPC_BINARY_DIR "/measurement-workloads/";
const std::string kConformance =
    HPC_SHARED_DIR "/conformance/meas/loops-cuda-nvidia-t.m/testmeas-loops-cuda-000000-000-590a0502-3293-0.hpcrun";

struct Outcome {
  int status = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Outcome run(const std::string& cmd, const fs::path& scratch) {
  fs::create_directories(scratch);
  Outcome r;
  int st = std::system((cmd + " >" + (scratch / "out").string() + " 2>" + (scratch / "err").string()).c_str());
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.out = slurp(scratch / "out");
  r.err = slurp(scratch / "err");
  return r;
}

uint64_t tag(const char (&s)[9]) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = v << 8 | uint8_t(s[i]);
  return v;
}

// One profile with its nodes by id, metric ids by name and a symbolizer for its modules.
struct View {
  hr::Profile p;
  std::map<uint32_t, const hr::CctNode*> byId;
  std::map<std::string, uint16_t> metric;
  std::map<uint16_t, std::string> lm;

  explicit View(hr::Profile prof) : p(std::move(prof)) {
    for (auto& n : p.nodes) byId[n.id] = &n;
    for (size_t i = 0; i < p.metrics.size(); ++i) metric[p.metrics[i].name] = uint16_t(i);
    for (auto& m : p.load_modules) lm[m.id] = m.name;
  }
  uint32_t index() const { return uint32_t(std::stoul(*p.header_value("thread-id"))); }
  double value(const hr::CctNode& n, const std::string& name) const {
    auto it = metric.find(name);
    if (it == metric.end()) return 0;
    for (auto& v : n.values)
      if (v.metric_id == it->second)
        return p.metrics[v.metric_id].flags.val_fmt == hr::kValFmtReal ? v.as_real() : double(v.bits);
    return 0;
  }
  // The function holding the launch: the placeholder's parent (a call site, ra - 1).
  std::string site(const hr::CctNode& n, Symbolizer& sym) const {
    const hr::CctNode* parent = byId.at(n.parent_id);
    return parent->lm_id ? sym.name(lm.at(parent->lm_id), parent->lm_ip) : "";
  }
  // True when the path from the root to n passes through the thread's fence (complete).
  bool underFence(const hr::CctNode& n) const {
    for (const hr::CctNode* c = &n; c->parent_id; c = byId.at(c->parent_id))
      if (c->lm_id == 0 && (c->lm_ip == tag("| Thread") || c->lm_ip == tag("| Main  "))) return true;
    return false;
  }
};

// Kernel intervals at enqueue_kernels per GPU stream trace of a measurement directory.
std::multiset<int> kernelsPerStream(const fs::path& meas) {
  Symbolizer sym;
  std::multiset<int> out;
  for (auto& e : fs::directory_iterator(meas)) {
    if (e.path().extension() != ".hpcrun") continue;
    auto p = hr::read_profile(e.path());
    if (!p.ok()) continue;
    View v(std::move(*p));
    if (v.index() < 500) continue;
    auto tr = hr::read_trace(fs::path(e.path()).replace_extension(".hpctrace"));
    if (!tr.ok()) continue;
    int kernels = 0;
    for (auto& r : tr->records) {
      const hr::CctNode* n = v.byId.at(r.cct_id);
      kernels += n->lm_id == 0 && n->lm_ip == tag("GPUTrace") && v.site(*n, sym) == "enqueue_kernels";
    }
    out.insert(kernels);
  }
  return out;
}

struct ThreadSummary {
  double kernels = 0, blocks = 0, blockThreads = 0, kernelTime = 0, h2d = 0, d2h = 0, d2d = 0, copies = 0, memset = 0, memsets = 0, syncs = 0;
};

class OpenCL : public ::testing::Test {
protected:
  void SetUp() override {
    exe_ = kWl + "opencl_threads-gcc";
    if (!fs::exists(exe_)) GTEST_SKIP() << "built without OpenCL";
    // One directory per test: ctest runs them in parallel.
    scratch_ = fs::temp_directory_path() /
               ("hpcrun-test-opencl-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(scratch_);
    bare_ = run(exe_, scratch_ / "bare");
    if (bare_.status == 3) GTEST_SKIP() << "no OpenCL device";
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(scratch_);
  }
  std::string exe_;
  fs::path scratch_;
  Outcome bare_;
};

TEST_F(OpenCL, KernelsAndCopiesAttributedPerThreadWithStreamTraces) {
  ASSERT_EQ(bare_.status, 0) << bare_.err;
  fs::path meas = scratch_ / "m";
  Outcome prof = run(kBin + "hpcrun -e CPUTIME -e gpu=opencl -t -o " + meas.string() + " " + exe_, scratch_ / "prof");
  EXPECT_EQ(prof.status, bare_.status) << prof.err;
  EXPECT_EQ(prof.out, bare_.out);

  auto ref = hr::read_profile(kConformance);
  ASSERT_TRUE(ref.ok()) << ref.status().message();

  Symbolizer sym;
  std::vector<ThreadSummary> threads;
  std::map<uint32_t, std::pair<int, int>> streams;  // index -> (kernel intervals, records)
  int threadProfiles = 0, streamProfiles = 0;
  for (auto& e : fs::directory_iterator(meas)) {
    if (e.path().extension() != ".hpcrun") continue;
    auto p = hr::read_profile(e.path());
    ASSERT_TRUE(p.ok()) << p.status().message();
    View v(std::move(*p));

    // The metric table: CPUTIME, then the reference's 63 GPU descriptors, formulas shifted by 1.
    ASSERT_EQ(v.p.metrics.size(), 1 + ref->metrics.size());
    EXPECT_EQ(v.p.metrics[0].name, "CPUTIME (sec)");
    for (size_t i = 0; i < ref->metrics.size(); ++i) {
      const hr::MetricDesc& ours = v.p.metrics[i + 1];
      const hr::MetricDesc& theirs = ref->metrics[i];
      EXPECT_EQ(ours.name, theirs.name);
      EXPECT_EQ(ours.description, theirs.description);
      EXPECT_EQ(ours.flags, theirs.flags) << theirs.name;
      EXPECT_EQ(ours.period, theirs.period);
      EXPECT_EQ(ours.format, theirs.format);
      std::string shifted = theirs.formula;
      for (size_t k = 0; (k = shifted.find('#', k)) != std::string::npos; ++k) {
        size_t end = shifted.find_first_not_of("0123456789", k + 1);
        int id = std::stoi(shifted.substr(k + 1, end - k - 1));
        shifted.replace(k + 1, end - k - 1, std::to_string(id + 1));
      }
      EXPECT_EQ(ours.formula, shifted) << theirs.name;
    }

    if (v.index() < 500) {
      ++threadProfiles;
      if (v.index() == 0) continue;
      ThreadSummary t;
      for (auto& n : v.p.nodes) {
        if (n.lm_id != 0) continue;
        if (n.lm_ip == tag("GPUKernl")) {
          EXPECT_EQ(v.site(n, sym), "enqueue_kernels");
          EXPECT_TRUE(v.underFence(n));
          t.kernels += v.value(n, "GKER:COUNT");
          t.blocks += v.value(n, "GKER:BLKS_ACUMU");
          t.blockThreads += v.value(n, "GKER:BLK_THR_ACUMU");
          t.kernelTime += v.value(n, "GKER (sec)");
          EXPECT_EQ(v.value(n, "GKER (sec)"), v.value(n, "GPUOP (sec)"));
        } else if (n.lm_ip == tag("GPUCopy ")) {
          double h2d = v.value(n, "GXCOPY:H2D (B)"), d2h = v.value(n, "GXCOPY:D2H (B)");
          double d2d = v.value(n, "GXCOPY:D2D (B)");
          EXPECT_EQ(v.site(n, sym), h2d > 0 ? "copy_in" : d2d > 0 ? "fill_and_copy" : "copy_out");
          t.h2d += h2d;
          t.d2h += d2h;
          t.d2d += d2d;
          t.copies += v.value(n, "GXCOPY:COUNT");
        } else if (n.lm_ip == tag("GPUMset ")) {
          EXPECT_EQ(v.site(n, sym), "fill_and_copy");
          t.memset += v.value(n, "GMSET:DEV (B)");
          t.memsets += v.value(n, "GMSET:COUNT");
        } else if (n.lm_ip == tag("GPUSync ")) {
          t.syncs += v.value(n, "GSYNC:COUNT");
        }
      }
      threads.push_back(t);
    } else {
      ++streamProfiles;
      std::vector<uint16_t> kinds;
      for (auto& id : v.p.id_tuple) kinds.push_back(id.kind());
      EXPECT_EQ(kinds, (std::vector<uint16_t>{hr::kIdNode, hr::kIdGpuDevice, hr::kIdGpuContext, hr::kIdGpuStream}));
      auto tr = hr::read_trace(fs::path(e.path()).replace_extension(".hpctrace"));
      ASSERT_TRUE(tr.ok()) << tr.status().message();
      int kernels = 0;
      bool alternates = true;
      for (size_t i = 0; i < tr->records.size(); ++i) {
        const hr::CctNode* n = v.byId.at(tr->records[i].cct_id);
        bool busy = n->lm_id == 0 && n->lm_ip == tag("GPUTrace");
        bool idle = n->lm_id == 0 && n->lm_ip == tag("NoActvty");
        alternates = alternates && (i % 2 == 0 ? busy : idle);
        if (busy && v.site(*n, sym) == "enqueue_kernels") ++kernels;
      }
      EXPECT_TRUE(alternates);
      streams[v.index()] = {kernels, int(tr->records.size())};
    }
  }
  // main + 2 workers; PoCL's own threads are not measured.
  EXPECT_EQ(threadProfiles, 3);
  ASSERT_EQ(threads.size(), 2u);
  // Per thread: (kernels, bytes written, read twice, copied on the device, filled), in either
  // thread order.
  std::set<std::tuple<double, double, double, double, double>> got,
      want = {{12, 16384, 2 * 4096, 4096, 1024}, {20, 8192, 2 * 16384, 512, 2048}};
  for (auto& t : threads) {
    got.insert({t.kernels, t.h2d, t.d2h, t.d2d, t.memset});
    EXPECT_GT(t.kernelTime, 0);
    // 4096 work-items, no local size: one work-group of 4096 per kernel (PoCL allows 4096).
    EXPECT_EQ(t.blocks, t.kernels);
    EXPECT_EQ(t.blockThreads, 4096 * t.kernels);
    EXPECT_EQ(t.copies, 4);
    EXPECT_EQ(t.memsets, 1);
    EXPECT_EQ(t.syncs, 4);  // 2 x clFinish, 2 x clWaitForEvents
  }
  EXPECT_EQ(got, want);
  // One stream per queue: kernel intervals per stream, 2 records per operation.
  EXPECT_EQ(streamProfiles, 2);
  std::multiset<int> kernelsPerStream;
  for (auto& [index, s] : streams) {
    kernelsPerStream.insert(s.first);
    EXPECT_EQ(s.second, 2 * (s.first + 5)) << index;  // + write, fill, copy, 2 reads
  }
  EXPECT_EQ(kernelsPerStream, (std::multiset<int>{12, 20}));

  // The reference's checker: a profile and a trace for every thread and stream, id tuples it reads.
  Outcome c = run("PYTHONPATH=" HPC_SHARED_DIR "/conformance /usr/bin/python3 -m hpctesttool test produces-profiles -T " +
                      meas.string() +
                      " '^NODE .* (THREAD [0-9a-f]+/[0-9a-f]+:logical|GPUDEVICE 0/0:logical GPUCONTEXT 1/1:logical "
                      "GPUSTREAM [01]/[01]:logical)$' 'THREAD 0/0' 'THREAD 2/2' 'GPUSTREAM 0/0' 'GPUSTREAM 1/1'",
                  scratch_ / "check");
  EXPECT_EQ(c.status, 0) << c.out << c.err;
}

// hpcstruct + hpcprof over the measurement: the GPU metrics reach the database at the launch
// sites, on <gpu kernel> contexts below enqueue_kernels, and the stream traces become trace
// lines that point into enqueue_kernels.
TEST_F(OpenCL, HpcprofDatabaseHasGpuMetricsAtLaunchSitesAndStreamTraces) {
  ASSERT_EQ(bare_.status, 0) << bare_.err;
  fs::path meas = scratch_ / "m", db = scratch_ / "db";
  // GPU events only: no CPU samples in PoCL's compiler, so hpcstruct has only the app to analyse.
  ASSERT_EQ(run(kBin + "hpcrun -e gpu=opencl -t -o " + meas.string() + " " + exe_, scratch_ / "prof").status, 0);
  Outcome st = run(kBin + "hpcstruct " + meas.string(), scratch_ / "struct");
  ASSERT_EQ(st.status, 0) << st.err;
  Outcome pr = run(kBin + "hpcprof -o " + db.string() + " " + meas.string(), scratch_ / "hpcprof");
  ASSERT_EQ(pr.status, 0) << pr.err;
  auto d = hpc::db::read_database(db);
  ASSERT_TRUE(d.ok()) << d.status().message();

  const ContextIndex index(*d);
  const auto& ctx = index.ctx;
  auto inFunction = [&](uint32_t id, const std::string& fn) { return index.inFunction(id, fn); };

  // GKER:COUNT at the execution (inclusive) scope of the enqueue_kernels contexts, per profile.
  uint16_t count = UINT16_MAX;
  for (auto& m : d->meta.metrics)
    if (m.name == "GKER:COUNT")
      for (auto& si : m.scopeInsts)
        if (d->meta.scopes[si.scope].name == "execution") count = si.propMetricId;
  ASSERT_NE(count, UINT16_MAX);
  // Per thread from cct.db, the summary (profile 0, only in profile.db) from profile.db.
  std::map<uint32_t, double> kernelsByProfile;
  double summary = 0;
  const hpc::db::ProfileValues& sv = d->profiles.at(0).values;
  for (auto& [id, info] : ctx) {
    if (info.second != "enqueue_kernels" || inFunction(info.first, "enqueue_kernels")) continue;
    const hpc::db::ContextValues& cv = d->contexts.at(id);
    for (size_t k = 0; k < cv.key.size(); ++k)
      if (cv.key[k] == count)
        for (uint64_t j = cv.start[k]; j < cv.start[k + 1]; ++j) kernelsByProfile[cv.sub[j]] += cv.value[j];
    for (size_t k = 0; k < sv.key.size(); ++k)
      if (sv.key[k] == id)
        for (uint64_t j = sv.start[k]; j < sv.start[k + 1]; ++j)
          if (sv.sub[j] == count) summary += sv.value[j];
  }
  EXPECT_EQ(summary, 32);
  std::multiset<double> perThread;
  for (auto& [prof, v] : kernelsByProfile)
    if (prof != 0) perThread.insert(v);
  EXPECT_EQ(perThread, (std::multiset<double>{12, 20}));

  // The same counts sit exclusively on the <gpu kernel> placeholder contexts under it.
  uint16_t countExcl = UINT16_MAX;
  for (auto& m : d->meta.metrics)
    if (m.name == "GKER:COUNT")
      for (auto& si : m.scopeInsts)
        if (d->meta.scopes[si.scope].name == "point") countExcl = si.propMetricId;
  ASSERT_NE(countExcl, UINT16_MAX);
  std::map<uint32_t, double> onPlaceholders;
  for (auto& [id, info] : ctx) {
    if (info.second != "<gpu kernel>" || !inFunction(id, "enqueue_kernels")) continue;
    const hpc::db::ContextValues& cv = d->contexts.at(id);
    for (size_t k = 0; k < cv.key.size(); ++k)
      if (cv.key[k] == countExcl)
        for (uint64_t j = cv.start[k]; j < cv.start[k + 1]; ++j) onPlaceholders[cv.sub[j]] += cv.value[j];
  }
  std::multiset<double> perThreadPlaceholder;
  for (auto& [prof, v] : onPlaceholders)
    if (prof != 0) perThreadPlaceholder.insert(v);
  EXPECT_EQ(perThreadPlaceholder, (std::multiset<double>{12, 20}));

  // Two GPU stream trace lines, 12 and 20 kernel intervals at enqueue_kernels, idle between.
  ASSERT_TRUE(d->trace.has_value());
  std::multiset<int> kernelsPerStream;
  for (auto& t : d->trace->traces) {
    const auto& ids = d->profiles.at(t.profIndex).idTuple;
    bool stream = ids && std::any_of(ids->begin(), ids->end(), [](auto& i) { return i.kind == hr::kIdGpuStream; });
    if (!stream) continue;
    int kernels = 0;
    for (size_t i = 0; i < t.line.size(); ++i) {
      if (i % 2 == 1) EXPECT_EQ(t.line[i].ctxId, 0u);
      else if (inFunction(t.line[i].ctxId, "enqueue_kernels")) ++kernels;
    }
    kernelsPerStream.insert(kernels);
  }
  EXPECT_EQ(kernelsPerStream, (std::multiset<int>{12, 20}));
}

// One tracing thread per stream: the same traces as with one thread for both.
// hpcrun -tt (the reference's --ttrace): each GPU operation's launch is a record of the
// launching thread's own trace too, at its <gpu kernel> (<gpu copy>, ...) context; with -t
// and no CPU event the application threads' traces have no record at all.
TEST_F(OpenCL, LaunchesAreRecordsOfTheLaunchingThreadsTraceWithTT) {
  ASSERT_EQ(bare_.status, 0) << bare_.err;
  for (const std::string opt : {"-t", "-tt"}) {
    fs::path meas = scratch_ / ("m" + opt);
    Outcome prof = run(kBin + "hpcrun -e gpu=opencl " + opt + " -o " + meas.string() + " " + exe_, scratch_ / "prof");
    ASSERT_EQ(prof.status, 0) << prof.err;
    EXPECT_EQ(prof.out, bare_.out);
    double kernels = 0, kernelRecords = 0, records = 0;
    for (auto& e : fs::directory_iterator(meas)) {
      if (e.path().extension() != ".hpcrun") continue;
      auto p = hr::read_profile(e.path());
      ASSERT_TRUE(p.ok());
      View v(std::move(*p));
      if (v.index() >= 500) continue;  // the GPU streams' own
      for (auto& n : v.p.nodes)
        if (n.lm_id == 0 && n.lm_ip == tag("GPUKernl")) kernels += v.value(n, "GKER:COUNT");
      auto tr = hr::read_trace(fs::path(e.path()).replace_extension(".hpctrace"));
      ASSERT_TRUE(tr.ok()) << e.path();
      for (auto& r : tr->records) {
        ++records;
        const hr::CctNode* n = v.byId.at(r.cct_id);
        kernelRecords += n->lm_id == 0 && n->lm_ip == tag("GPUKernl");
      }
    }
    ASSERT_GT(kernels, 0) << opt;
    if (opt == "-t") {
      EXPECT_EQ(records, 0) << "no CPU event: no record in the application threads' traces";
    } else {
      EXPECT_EQ(kernelRecords, kernels) << "a record per kernel launched";
    }
  }
}

TEST_F(OpenCL, OneStreamPerTracingThread) {
  fs::path meas = scratch_ / "t1";
  Outcome prof = run(kBin + "hpcrun -e gpu=opencl -t --streams-per-tracing-thread 1 -o " + meas.string() + " " + exe_,
                     scratch_ / "prof");
  EXPECT_EQ(prof.status, 0) << prof.err;
  EXPECT_EQ(prof.out, bare_.out);
  EXPECT_EQ(kernelsPerStream(meas), (std::multiset<int>{12, 20}));
  std::string log;
  for (auto& e : fs::directory_iterator(meas))
    if (e.path().extension() == ".log") log = slurp(e.path());
  // 2 x (1 write + kernels + fill + copy + 2 reads), every one attributed.
  EXPECT_NE(log.find("GPU: operations: 42 (attributed: 42), streams: 2, tracing threads: 2, records allocated: "), std::string::npos)
      << log;
}

TEST_F(OpenCL, GpuAloneWithoutTraceSamplesNothingAndWritesNoStreams) {
  fs::path meas = scratch_ / "g";
  Outcome prof = run(kBin + "hpcrun -e gpu=opencl -o " + meas.string() + " " + exe_ + " 0.5", scratch_ / "prof");
  Outcome bare = run(exe_ + " 0.5", scratch_ / "bare05");
  EXPECT_EQ(prof.status, 0) << prof.err;
  EXPECT_EQ(prof.out, bare.out);
  int profiles = 0;
  double kernels = 0;
  for (auto& e : fs::directory_iterator(meas)) {
    EXPECT_NE(e.path().extension(), ".hpctrace");
    if (e.path().extension() != ".hpcrun") continue;
    ++profiles;
    auto p = hr::read_profile(e.path());
    ASSERT_TRUE(p.ok());
    View v(std::move(*p));
    EXPECT_LT(v.index(), 500u);
    EXPECT_EQ(v.p.metrics.size(), 63u);
    for (auto& n : v.p.nodes) kernels += v.value(n, "GKER:COUNT");
  }
  EXPECT_EQ(profiles, 3);
  EXPECT_EQ(kernels, 32);
}

// Launch parameters, map/unmap, rect copies, allocations and syncs of opencl_params (one
// thread, one queue, known sizes): bare and measured print the same; hpcrun -> hpcstruct ->
// hpcprof puts exactly the known values on the placeholders below each launching function.
TEST(OpenCLParams, LaunchParametersCopiesAndAllocationsReachTheDatabase) {
  std::string exe = kWl + "opencl_params-gcc";
  if (!fs::exists(exe)) GTEST_SKIP() << "built without OpenCL";
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-opencl-params";
  fs::remove_all(scratch);
  Outcome bare = run(exe, scratch / "bare");
  if (bare.status == 3) GTEST_SKIP() << "no OpenCL device";
  ASSERT_EQ(bare.status, 0) << bare.err;
  fs::path meas = scratch / "m", db = scratch / "db";
  Outcome prof = run(kBin + "hpcrun -e gpu=opencl -t -o " + meas.string() + " " + exe, scratch / "prof");
  ASSERT_EQ(prof.status, 0) << prof.err;
  EXPECT_EQ(prof.out, bare.out);
  ASSERT_EQ(run(kBin + "hpcstruct " + meas.string(), scratch / "struct").status, 0);
  Outcome pr = run(kBin + "hpcprof -o " + db.string() + " " + meas.string(), scratch / "hpcprof");
  ASSERT_EQ(pr.status, 0) << pr.err;
  auto d = hpc::db::read_database(db);
  ASSERT_TRUE(d.ok()) << d.status().message();

  // What OpenCL reports for each kernel, as the workload printed it.
  std::map<std::string, std::pair<double, double>> kernelMem;  // name -> (static local, private)
  double workGroup = 0;
  {
    std::istringstream in(bare.out);
    std::string word, name;
    double local, priv, wg;
    while (in >> word) {
      if (word != "kernel") continue;
      std::string l, p, w;
      in >> name >> l >> local >> p >> priv >> w >> wg;
      kernelMem[name] = {local, priv};
      workGroup = wg;
    }
  }
  ASSERT_EQ(kernelMem.size(), 4u) << bare.out;
  EXPECT_EQ(kernelMem["scale"].first, 256);  // __local float st[64]
  ASSERT_GE(workGroup, 512);

  const ContextIndex index(*d);
  const auto& ctx = index.ctx;
  auto inFunction = [&](uint32_t id, const std::string& fn) { return index.inFunction(id, fn); };
  auto pointMetric = [&](const std::string& name) {
    for (auto& m : d->meta.metrics)
      if (m.name == name)
        for (auto& si : m.scopeInsts)
          if (d->meta.scopes[si.scope].name == "point") return si.propMetricId;
    return uint16_t(UINT16_MAX);
  };
  // The exclusive value of a metric summed over the thread profiles, on the placeholder
  // contexts of one kind below a function.
  auto at = [&](const std::string& fn, const std::string& placeholder, const std::string& metric) {
    uint16_t id = pointMetric(metric);
    EXPECT_NE(id, UINT16_MAX) << metric;
    double sum = 0;
    for (auto& [c, info] : ctx) {
      if (info.second != placeholder || !inFunction(c, fn)) continue;
      const hpc::db::ContextValues& cv = d->contexts.at(c);
      for (size_t k = 0; k < cv.key.size(); ++k)
        if (cv.key[k] == id)
          for (uint64_t j = cv.start[k]; j < cv.start[k + 1]; ++j)
            if (cv.sub[j] != 0) sum += cv.value[j];
    }
    return sum;
  };

  struct Launch {
    const char* fn;
    const char* kernel;
    double count, blocks, threads, dynamic;
  };
  // blocks = work-groups, threads = work-items per group, both summed over the launches.
  // No local size: the largest divisor within the kernel's work-group limit (256; 64 x 8).
  const Launch launches[] = {
      {"launch_scale", "scale", 5, 3 * 16 + 2 * 8, 3 * 64 + 2 * 128, 3 * 256 + 2 * 512},
      {"launch_bump", "bump", 2, 2 * 1, 2 * 256, 0},
      {"launch_2d", "halve", 1, 8 * 2, 8 * 4, 0},
      {"launch_2d_auto", "halve", 1, 1, 64 * 8, 0},
      {"launch_pair", "pair", 1, 4, 1, 8},  // the NULL __global argument is not local memory
  };
  for (const Launch& l : launches) {
    SCOPED_TRACE(l.fn);
    auto [stmem, priv] = kernelMem[l.kernel];
    EXPECT_EQ(at(l.fn, "<gpu kernel>", "GKER:COUNT"), l.count);
    EXPECT_EQ(at(l.fn, "<gpu kernel>", "GKER:BLKS_ACUMU"), l.blocks);
    EXPECT_EQ(at(l.fn, "<gpu kernel>", "GKER:BLK_THR_ACUMU"), l.threads);
    EXPECT_EQ(at(l.fn, "<gpu kernel>", "GKER:DYMEM_ACUMU (B)"), l.dynamic);
    EXPECT_EQ(at(l.fn, "<gpu kernel>", "GKER:STMEM_ACUMU (B)"), l.count * stmem);
    EXPECT_EQ(at(l.fn, "<gpu kernel>", "GKER:BLK_SM_ACUMU"), l.count * stmem + l.dynamic);
    EXPECT_EQ(at(l.fn, "<gpu kernel>", "GKER:LMEM_ACUMU (B)"), l.count * priv);
    EXPECT_EQ(at(l.fn, "<gpu kernel>", "GKER:THR_REG_ACUMU"), 0);  // not reported by OpenCL
    EXPECT_GT(at(l.fn, "<gpu kernel>", "GKER (sec)"), 0);
    EXPECT_EQ(at(l.fn, "<gpu sync>", "GSYNC:COUNT"), 1);
  }
  EXPECT_GT(at("launch_2d_auto", "<gpu sync>", "GSYNC:EVT (sec)"), 0);
  EXPECT_GT(at("launch_scale", "<gpu sync>", "GSYNC:STR (sec)"), 0);

  // Rect copies: the region's bytes.
  EXPECT_EQ(at("rect_copies", "<gpu copy>", "GXCOPY:H2D (B)"), 32 * 4);
  EXPECT_EQ(at("rect_copies", "<gpu copy>", "GXCOPY:D2H (B)"), 24 * 3);
  EXPECT_EQ(at("rect_copies", "<gpu copy>", "GXCOPY:D2D (B)"), 16 * 2);
  EXPECT_EQ(at("rect_copies", "<gpu copy>", "GXCOPY:COUNT"), 3);
  // Maps bring the region to the host unless mapped to be overwritten; unmaps of regions
  // mapped for writing send it back.
  EXPECT_EQ(at("map_unmap", "<gpu copy>", "GXCOPY:D2H (B)"), 512 + 0 + 128);
  EXPECT_EQ(at("map_unmap", "<gpu copy>", "GXCOPY:H2D (B)"), 0 + 256 + 128);
  EXPECT_EQ(at("map_unmap", "<gpu copy>", "GXCOPY:COUNT"), 6);
  EXPECT_EQ(at("map_unmap", "<gpu sync>", "GSYNC:COUNT"), 1);
  // The viewer divides the accumulators by the launch count (metrics/default.yaml as the
  // reference writes it); the accumulators themselves are inputs, not columns.
  std::string yaml = slurp(db / "metrics" / "default.yaml");
  EXPECT_NE(yaml.find("  - name: GKER:BLK_THR\n    description: \"GPU kernel: thread count\""), std::string::npos);
  EXPECT_NE(yaml.find("custom: {/: [*GKERx3a_BLK_THR_ACUMU-sum-x5b_0x0x5d_-lex_aware, "
                      "*GKERx3a_COUNT-sum-x5b_0x0x5d_-lex_aware]}"),
            std::string::npos);
  EXPECT_NE(yaml.find("custom: {/: [*GKERx3a_DYMEM_ACUMUx20_x28_Bx29_-sum-x5b_0x0x5d_-lex_aware, "
                      "*GKERx3a_COUNT-sum-x5b_0x0x5d_-lex_aware]}"),
            std::string::npos);
  EXPECT_EQ(yaml.find("- name: GKER:BLK_THR_ACUMU"), std::string::npos);
  // Allocations and frees by kind of memory; the retained buffer is freed once.
  for (const char* fn : {"alloc_buffers", "release_buffers"}) {
    SCOPED_TRACE(fn);
    EXPECT_EQ(at(fn, "<gpu alloc>", "GMEM:DEV (B)"), 4096);
    EXPECT_EQ(at(fn, "<gpu alloc>", "GMEM:PIN (B)"), 1024);
    EXPECT_EQ(at(fn, "<gpu alloc>", "GMEM:PAG (B)"), 2048);
    EXPECT_EQ(at(fn, "<gpu alloc>", "GMEM:COUNT"), 3);
  }
  if (!::testing::Test::HasFailure()) fs::remove_all(scratch);
}

// Records are recycled by the thread that made them: 1000 kernels in batches of 100, each
// batch finished and followed by a pause long enough for its records to come back, take
// at most two batches' worth of records from the arena; every other launch reuses one.
TEST(OpenCLRecords, LaunchingThreadReusesItsRecords) {
  std::string exe = kWl + "opencl_small_kernels-gcc";
  if (!fs::exists(exe)) GTEST_SKIP() << "built without OpenCL";
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-opencl-records";
  fs::remove_all(scratch);
  Outcome bare = run(exe + " 1000 100 50", scratch / "bare");
  if (bare.status == 3) GTEST_SKIP() << "no OpenCL device";
  ASSERT_EQ(bare.status, 0) << bare.err;
  fs::path meas = scratch / "m";
  Outcome prof = run(kBin + "hpcrun -e gpu=opencl -o " + meas.string() + " " + exe + " 1000 100 50", scratch / "prof");
  ASSERT_EQ(prof.status, 0) << prof.err;
  EXPECT_EQ(prof.out.substr(prof.out.find("checksum")), bare.out.substr(bare.out.find("checksum")));
  std::string log;
  for (auto& e : fs::directory_iterator(meas))
    if (e.path().extension() == ".log") log = slurp(e.path());
  // 1000 kernels and the final read.
  const std::string head = "GPU: operations: 1001 (attributed: 1001), streams: 1, tracing threads: 0, records allocated: ";
  size_t at = log.find(head);
  ASSERT_NE(at, std::string::npos) << log;
  long allocated = std::stol(log.substr(at + head.size()));
  EXPECT_GE(allocated, 1);
  EXPECT_LE(allocated, 200) << "reused: " << 1001 - allocated;
  fs::remove_all(scratch);
}

TEST(OpenCLLauncher, RejectsUnknownGpuEvents) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-opencl-launcher";
  for (const char* ev : {"gpu=cuda", "gpu=", "gpu=openclx"}) {
    Outcome r = run(kBin + "hpcrun -e '" + ev + "' /bin/echo started", scratch);
    EXPECT_EQ(r.status, 2) << ev;
    EXPECT_EQ(r.out, "") << ev;
  }
  Outcome h = run(kBin + "hpcrun -h", scratch);
  EXPECT_NE(h.out.find("gpu=opencl"), std::string::npos);
  EXPECT_NE(h.out.find("--streams-per-tracing-thread"), std::string::npos);
  fs::remove_all(scratch);
}

}  // namespace
