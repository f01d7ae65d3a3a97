// hpcreport's overview (overview.hpp) on a database written here: each context's own time
// goes to the kind of work its call path is in, the runtimes' idle threads are set apart,
// and the verdict follows the shares (and instructions per cycle where counted).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <tuple>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unistd.h>

#include "presentation/compare.hpp"
#include "presentation/experiment.hpp"
#include "presentation/overview.hpp"
#include "presentation/report.hpp"
#include "presentation/api_test_util.hpp"
#include "presentation/server/api.hpp"

namespace fs = std::filesystem;
using namespace hpc;
using namespace hpc::present;

namespace {

// Functions: index, name, module.
enum Fn : uint32_t {
  kMain, kCompute, kAllreduce, kPoll, kFwrite, kWrite, kNanosleep, kGompParallel, kOmpFn, kBarrier,
  kProgress, kEventLoop, kEpollWait, kGompThreadStart, kMemcpy, kSignalThread, kSigwait, kRwUnlock
};

struct Node {
  uint32_t ctx;
  int fn;        // -1: a line context
  std::vector<double> self;  // per metric
  std::vector<Node> kids;
};

// Metrics: CPUTIME, REALTIME, perf::cycles, perf::instructions.
constexpr size_t kMetrics = 4;

Node fn(uint32_t ctx, int f, std::vector<double> self, std::vector<Node> kids = {}) {
  self.resize(kMetrics);
  return {ctx, f, self, std::move(kids)};
}

// `permuted`: the same program in another database, as another build and run of it make: its
// executable named otherwise, modules and functions listed in reverse order, another file
// first, contexts numbered from 50 on, every value doubled.
fs::path write_db(bool counters, bool permuted = false) {
  using namespace hpc::db;
  Database db;
  Meta& m = db.meta;
  m.general = {"overview", "kinds of work"};
  m.idNames = {"SUMMARY", "NODE", "RANK", "THREAD", "GPUDEVICE", "GPUCONTEXT", "GPUSTREAM"};
  m.scopes = {{"point", 1, 255}, {"function", 3, 0}, {"execution", 2, 255}};
  const char* names[kMetrics] = {"CPUTIME (sec)", "REALTIME (sec)", "perf::cycles", "perf::instructions"};
  const size_t nMetrics = counters ? 4 : 2;
  for (size_t i = 0; i < nMetrics; ++i) {
    Metric mt;
    mt.name = names[i];
    const uint16_t b = uint16_t(3 * i);
    mt.scopeInsts = {{0, b}, {1, uint16_t(b + 1)}, {2, uint16_t(b + 2)}};
    mt.summaries = {{1, "$$", 0, uint16_t(b + 1)}, {2, "$$", 0, uint16_t(b + 2)}};
    m.metrics.push_back(mt);
  }
  m.modules = {{0, "/opt/app/bin/app"},
               {0, "/usr/lib/x86_64-linux-gnu/openmpi/lib/libmpi.so.40"},
               {0, "/lib/x86_64-linux-gnu/libc.so.6"},
               {0, "/lib/x86_64-linux-gnu/libgomp.so.1"},
               {0, "/usr/lib/x86_64-linux-gnu/openmpi/lib/libopen-pal.so.40"},
               {0, "/lib/x86_64-linux-gnu/libevent_core-2.1.so.7"}};
  m.files = {{0, "/src/main.c"}};
  const uint32_t nModules = uint32_t(m.modules.size());
  m.functions = {{"main", 0, 0x1000, 0, 1, 0},           {"compute", 0, 0x1100, 0, 10, 0},
                 {"PMPI_Allreduce", 1, 0x2000, kNone, 0, 0}, {"__poll", 2, 0x3000, kNone, 0, 0},
                 {"_IO_fwrite", 2, 0x3100, kNone, 0, 0},   {"write", 2, 0x3200, kNone, 0, 0},
                 {"clock_nanosleep@@GLIBC_2.17", 2, 0x3300, kNone, 0, 0},
                 {"GOMP_parallel", 3, 0x4000, kNone, 0, 0}, {"main._omp_fn.0", 0, 0x1200, 0, 20, 0},
                 {"gomp_team_barrier_wait_end", 3, 0x4100, kNone, 0, 0},
                 {"targ359d0 [libopen-pal.so.40]", 4, 0x5000, kNone, 0, 0},
                 {"event_base_loop", 5, 0x6000, kNone, 0, 0}, {"epoll_wait", 2, 0x3400, kNone, 0, 0},
                 {"targ1cc40", 3, 0x4200, kNone, 0, 0},      {"__memcpy_avx_unaligned", 2, 0x3500, kNone, 0, 0},
                 {"signal_thread", 0, 0x1300, 0, 30, 0},    {"sigwait", 2, 0x3600, kNone, 0, 0},
                 {"pthread_rwlock_unlock@@GLIBC_2.34", 2, 0x3700, kNone, 0, 0}};
  // The program's own functions named as hpcstruct names procedures: "main [app]".
  for (Function& f : m.functions)
    if (f.module == 0) *f.name += permuted ? " [app.O3]" : " [app]";
  const uint32_t nFunctions = uint32_t(m.functions.size());
  auto fnAt = [&](int f) { return permuted ? nFunctions - 1 - uint32_t(f) : uint32_t(f); };
  auto ctxAt = [&](uint32_t c) { return permuted && c != 0 ? c + 50 : c; };
  const double scale = permuted ? 2.0 : 1.0;
  if (permuted) {
    m.modules[0].path = "/opt/app2/bin/app.O3";
    std::reverse(m.modules.begin(), m.modules.end());
    std::reverse(m.functions.begin(), m.functions.end());
    for (Function& f : m.functions) {
      f.module = nModules - 1 - f.module;
      if (f.file != kNone) f.file += 1;
    }
    m.files.insert(m.files.begin(), {0, "/src/other.c"});
  }
  // Own values: CPUTIME, REALTIME, cycles, instructions.
  std::vector<std::pair<uint32_t, Node>> threads = {
      {1, fn(2, kMain, {}, {fn(3, -1, {}, {
                               fn(4, kCompute, {4.0, 4.0, 8e9, 4e9},
                                  {fn(16, kMemcpy, {0.25, 0.25}), fn(17, kRwUnlock, {0.25, 0.25})}),
                               fn(5, kAllreduce, {0.5, 0.5}, {fn(6, kPoll, {1.5, 12.0})}),
                               fn(7, kFwrite, {}, {fn(8, kWrite, {1.0, 1.0})}),
                               fn(9, kNanosleep, {0, 0.5}),
                               fn(10, kGompParallel, {}, {fn(11, kOmpFn, {1.0, 1.0}), fn(12, kBarrier, {0.5, 0.5})}),
                           })})},
      {2, fn(21, kProgress, {}, {fn(22, kEventLoop, {}, {fn(23, kEpollWait, {0, 30.0})})})},
      {2, fn(31, kGompThreadStart, {}, {fn(32, kOmpFn, {1.5, 1.5, 2e9, 1e9}), fn(33, kBarrier, {0.25, 0.25})})},
      {2, fn(36, kSignalThread, {0, 0.1}, {fn(37, kSigwait, {0, 8.0})})},
  };
  uint32_t entryIds[] = {1, 20, 30, 35};
  const char* entryNames[] = {"main thread", "application thread", "application thread", "application thread"};

  // Inclusive values per context and metric.
  std::map<uint32_t, std::vector<double>> inc;
  std::function<std::vector<double>(const Node&)> sum = [&](const Node& n) {
    std::vector<double> v = n.self;
    for (double& x : v) x *= scale;
    for (const Node& k : n.kids) {
      auto kv = sum(k);
      for (size_t i = 0; i < kMetrics; ++i) v[i] += kv[i];
    }
    inc[ctxAt(n.ctx)] = v;
    return v;
  };
  std::function<Context(const Node&)> ctx = [&](const Node& n) {
    Context c;
    c.ctxId = ctxAt(n.ctx);
    if (n.fn >= 0) c.relation = 1, c.lexicalType = 0, c.function = fnAt(n.fn);
    else c.relation = 0, c.lexicalType = 2, c.propagation = 1, c.file = permuted ? 1 : 0, c.line = 5;
    for (const Node& k : n.kids) c.children.push_back(ctx(k));
    return c;
  };
  std::vector<double> root(kMetrics, 0);
  for (size_t t = 0; t < threads.size(); ++t) {
    auto v = sum(threads[t].second);
    inc[ctxAt(entryIds[t])] = v;
    for (size_t i = 0; i < kMetrics; ++i) root[i] += v[i];
    EntryPoint ep{ctxAt(entryIds[t]), uint16_t(threads[t].first), entryNames[t], {}};
    ep.children.push_back(ctx(threads[t].second));
    m.entryPoints.push_back(std::move(ep));
  }
  inc[0] = root;
  Profile summary;
  summary.flags = 1;
  for (auto& [c, v] : inc) {
    for (size_t i = 0; i < nMetrics; ++i)
      if (v[i] != 0) summary.values.push(uint16_t(3 * i + 2), v[i]);
    summary.values.close(c);
  }
  db.profiles.push_back(std::move(summary));
  // Two ranks' main threads; cct.db has their CPUTIME at the root and at MPI_Allreduce:
  // rank 0 spends 0.2 s of 5 in MPI (4 %), rank 1 1.8 s of 5.75 (31 %).
  for (uint32_t rank : {0u, 1u}) {
    Profile thread;
    thread.idTuple = std::vector<Identifier>{{2, 0, rank, rank}, {3, 0, 0, 0}};
    db.profiles.push_back(std::move(thread));
  }
  db.contexts.resize(100);
  for (auto [c, r0, r1] : {std::tuple{0u, 5.0, 5.75}, std::tuple{5u, 0.2, 1.8}}) {
    db.contexts[ctxAt(c)].push(1, r0 * scale);
    db.contexts[ctxAt(c)].push(2, r1 * scale);
    db.contexts[ctxAt(c)].close(2);  // CPUTIME's execution scope
  }
  fs::path dir = fs::temp_directory_path() / ("pres-overview-" + std::to_string(::getpid())) /
                 (permuted ? "permuted.d" : counters ? "counters.d" : "plain.d");
  fs::create_directories(dir.parent_path());
  Status s = write_database(db, dir);
  EXPECT_TRUE(s.ok()) << s.message();
  return dir;
}

TEST(Overview, KindsOfWorkAndVerdict) {
  const fs::path plain = write_db(false), counted = write_db(true);
  auto e = Experiment::open(plain);
  ASSERT_TRUE(e.ok()) << e.status().message();
  const Experiment& x = **e;

  // CPUTIME: computation 4.0 + memcpy and a lock's release 0.25 each under compute + 1.0 +
  // 1.5 in the outlined region (on the main thread and a worker); MPI 0.5 + 1.5 in poll
  // under it; I/O 1.0 (write under fwrite); OpenMP runtime 0.5 + 0.25 at barriers.
  const Overview cpu = overview(x, 0);
  EXPECT_DOUBLE_EQ(cpu.total, 10.75);
  EXPECT_DOUBLE_EQ(cpu.kinds[size_t(WorkKind::Compute)].value, 7.0);
  EXPECT_DOUBLE_EQ(cpu.kinds[size_t(WorkKind::Mpi)].value, 2.0);
  EXPECT_DOUBLE_EQ(cpu.kinds[size_t(WorkKind::Io)].value, 1.0);
  EXPECT_DOUBLE_EQ(cpu.kinds[size_t(WorkKind::OpenMp)].value, 0.75);
  EXPECT_DOUBLE_EQ(cpu.kinds[size_t(WorkKind::Waiting)].value, 0);
  EXPECT_DOUBLE_EQ(cpu.kinds[size_t(WorkKind::Idle)].value, 0);
  using Where = std::vector<std::pair<std::string, double>>;
  EXPECT_EQ(cpu.kinds[size_t(WorkKind::Compute)].where,
            (Where{{"compute [app]", 4.0}, {"main._omp_fn.0 [app]", 2.5}, {"__memcpy_avx_unaligned", 0.25},
                   {"pthread_rwlock_unlock@@GLIBC_2.34", 0.25}}));
  EXPECT_EQ(cpu.kinds[size_t(WorkKind::Mpi)].where, (Where{{"PMPI_Allreduce", 2.0}}));
  EXPECT_EQ(cpu.kinds[size_t(WorkKind::Io)].where, (Where{{"_IO_fwrite", 1.0}}));
  // The OpenMP runtime's places: where each path entered it.
  EXPECT_EQ(cpu.kinds[size_t(WorkKind::OpenMp)].where, (Where{{"GOMP_parallel", 0.5}, {"targ1cc40", 0.25}}));
  EXPECT_EQ(cpu.verdict, "compute-bound");
  EXPECT_FALSE(cpu.ipc);
  // MPI's share by rank, 4 % and 31 %: apart by more than 20 points, so imbalance is named.
  ASSERT_TRUE(cpu.mpiSpread);
  EXPECT_EQ(cpu.mpiSpread->profiles, 2u);
  EXPECT_DOUBLE_EQ(cpu.mpiSpread->min, 0.2 / 5.0);
  EXPECT_DOUBLE_EQ(cpu.mpiSpread->max, 1.8 / 5.75);
  EXPECT_EQ(cpu.mpiSpread->minProfile, "RANK 0 THREAD 0");
  EXPECT_EQ(cpu.mpiSpread->maxProfile, "RANK 1 THREAD 0");
  EXPECT_NE(cpu.reason.find("MPI's share ranges from 4% (RANK 0 THREAD 0) to 31% (RANK 1 THREAD 0) across 2 "
                            "profiles: load imbalance"),
            std::string::npos)
      << cpu.reason;

  // REALTIME: the MPI library's progress thread waits 30 s in epoll_wait, and a thread of
  // the program's does nothing but wait 8 s in sigwait (0.1 s of its own: still 95 % and more
  // waiting): idle, left out of the verdict; of the other 21.85 s, 12.5 are in MPI (poll
  // under MPI_Allreduce): communication-bound. The nanosleep called from computation, on a
  // thread that computes, is waiting.
  const Overview real = overview(x, 1);
  EXPECT_DOUBLE_EQ(real.kinds[size_t(WorkKind::Idle)].value, 38.0);
  EXPECT_EQ(real.kinds[size_t(WorkKind::Idle)].where, (Where{{"epoll_wait", 30.0}, {"sigwait", 8.0}}));
  EXPECT_DOUBLE_EQ(real.kinds[size_t(WorkKind::Mpi)].value, 12.5);
  EXPECT_DOUBLE_EQ(real.kinds[size_t(WorkKind::Waiting)].value, 0.5);
  EXPECT_EQ(real.kinds[size_t(WorkKind::Waiting)].where, (Where{{"clock_nanosleep@@GLIBC_2.17", 0.5}}));
  EXPECT_EQ(real.verdict, "communication-bound");
  EXPECT_NE(real.reason.find("57% of the time in MPI, most in PMPI_Allreduce"), std::string::npos) << real.reason;

  // With cycles and instructions: 5e9 instructions in 1e10 cycles, computation first:
  // memory-bound.
  auto c = Experiment::open(counted);
  ASSERT_TRUE(c.ok());
  const Overview mem = overview(**c, 0);
  ASSERT_TRUE(mem.ipc);
  EXPECT_DOUBLE_EQ(*mem.ipc, 0.5);
  EXPECT_EQ(mem.verdict, "memory-bound");

  // hpcreport: the text and JSON of the overview view, and the summary's header.
  ReportOptions o;
  o.view = ReportView::Overview;
  o.metric = 1;
  std::ostringstream text;
  print_report(x, o, text);
  EXPECT_NE(text.str().find("MPI\n"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("idle threads (waits of MPI and GPU runtimes' threads, threads that only waited; not in the verdict)"),
            std::string::npos) << text.str();
  EXPECT_NE(text.str().find("# Verdict: communication-bound: 57% of the time in MPI"), std::string::npos) << text.str();
  o.format = ReportFormat::Json;
  std::ostringstream json;
  print_report(x, o, json);
  auto j = nlohmann::json::parse(json.str());
  EXPECT_EQ(j["verdict"], "communication-bound");
  EXPECT_FALSE(j.contains("mpi_share_by_profile")) << "REALTIME has no per-profile values here";
  o.metric = 0;
  std::ostringstream json0;
  print_report(x, o, json0);
  EXPECT_EQ(nlohmann::json::parse(json0.str())["mpi_share_by_profile"]["max_profile"], "RANK 1 THREAD 0");
  EXPECT_EQ(j["rows"][0]["section"], "overview");
  EXPECT_EQ(j["rows"][0]["id"], "compute");
  o = ReportOptions{};
  std::ostringstream summary;
  print_report(x, o, summary);
  EXPECT_NE(summary.str().find("# Verdict: compute-bound"), std::string::npos) << summary.str();
  EXPECT_NE(summary.str().find("Hottest call paths"), std::string::npos);
  fs::remove_all(plain.parent_path());
}

// hpcserver --compare across two databases of one program whose ids all differ (modules,
// files, functions and contexts numbered otherwise, every value doubled) and whose
// executables are named otherwise (two builds: matched as the program's): in each profile
// view, every row finds its baseline row by name, and its baseline values are what the
// baseline database alone shows there, half the row's own.
TEST(Compare, EveryViewMatchesRowsAcrossDatabasesByName) {
  const fs::path plain = write_db(false), permuted = write_db(false, true);
  auto a = Experiment::open(plain), b = Experiment::open(permuted);
  ASSERT_TRUE(a.ok() && b.ok());
  Api cmp(**b, a->get()), alone(**a);
  using nlohmann::json;
  const std::vector<std::pair<std::string, Params>> views{
      {"children", {{"ctx", "0"}, {"metric", "0,1"}}},
      {"children", {{"ctx", "0"}, {"metric", "0"}, {"filter", R"([{"pattern":"main","mode":"self"}])"}}},
      {"bottom-up", {{"metric", "0,1"}}},
      {"structure", {{"metric", "0,1"}}},
      {"structure", {{"metric", "0,1"}, {"depth", "3"}}},
      {"flat", {{"metric", "0,1"}, {"by", "function"}}},
      {"flat", {{"metric", "0,1"}, {"by", "module"}}}};
  for (const auto& [endpoint, q] : views) {
    auto there = api_rows_by_names(alone, endpoint, q, 8);
    std::map<std::vector<std::string>, nlohmann::json> rows;  // by the names the baseline's build has
    for (auto& [p, r] : api_rows_by_names(cmp, endpoint, q, 8)) {
      std::vector<std::string> named;
      for (std::string n : p) {
        for (const auto& [from, to] : {std::pair<std::string, std::string>{"/opt/app2/bin/app.O3", "/opt/app/bin/app"}, {"app.O3", "app"}})
          if (const size_t at = n.find(from); at != std::string::npos) n.replace(at, from.size(), to);
        named.push_back(n);
      }
      rows.emplace(named, r);
    }
    ASSERT_GT(rows.size(), 3u) << endpoint;
    EXPECT_EQ(rows.size(), there.size()) << endpoint;
    size_t nonzero = 0;
    for (const auto& [p, r] : rows) {
      if (r.is_null()) continue;
      auto it = there.find(p);
      ASSERT_NE(it, there.end()) << endpoint << " " << r.dump();
      EXPECT_EQ(r["base"]["inc"], it->second["inc"]) << endpoint << " " << r.dump();
      EXPECT_EQ(r["base"]["exc"], it->second["exc"]) << endpoint << " " << r.dump();
      for (size_t m = 0; m < r["inc"].size(); ++m) {
        EXPECT_DOUBLE_EQ(r["inc"][m].get<double>(), 2 * r["base"]["inc"][m].get<double>()) << endpoint << " " << r.dump();
        nonzero += r["base"]["inc"][m].get<double>() > 0;
      }
    }
    EXPECT_GT(nonzero, rows.size() / 2) << endpoint;
  }
  // hpcreport --compare: every function and calling context matched, this run's names shown.
  CompareOptions o;
  o.top = 1000;
  size_t functions = 0;
  for (const CompareRow& r : compare_rows(**a, **b, o)) {
    EXPECT_DOUBLE_EQ(r.bInc, 2 * r.aInc) << r.section << " " << r.name;
    EXPECT_DOUBLE_EQ(r.bExc, 2 * r.aExc) << r.section << " " << r.name;
    EXPECT_EQ(r.name.find("[app]"), std::string::npos) << r.name;
    functions += r.section == "flat-function";
  }
  EXPECT_EQ(functions, 12u);  // those with CPU time: 6 of the 18 have none
  fs::remove_all(plain.parent_path());
}

}  // namespace
