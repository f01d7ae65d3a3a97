// Runs the workloads bare and under hpcrun, then checks what the measurement says:
// same output and exit status, one profile per thread, sample counts near
// CPU time x rate, complete call paths, and the known-answer split.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "formats/hpcrun/hpcrun.hpp"
#include "symbolize.hpp"

namespace fs = std::filesystem;
using hpc::measurement::test::Symbolizer;

namespace {

const std::string kBin = HPC_BINARY_DIR "/bin/hpcrun";
const std::string kWl = HPC_BINARY_DIR "/measurement-workloads/";

struct Outcome {
  int status = -1;
  std::string out, err;
  double cpu = 0;
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

double childCpu() {
  rusage ru{};
  getrusage(RUSAGE_CHILDREN, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1e-6 * double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

Outcome run(const std::string& cmd, const fs::path& scratch) {
  fs::create_directories(scratch);
  Outcome r;
  double before = childCpu();
  int st = std::system((cmd + " >" + (scratch / "out").string() + " 2>" + (scratch / "err").string()).c_str());
  r.cpu = childCpu() - before;
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.out = slurp(scratch / "out");
  r.err = slurp(scratch / "err");
  return r;
}

struct Analysis {
  int profiles = 0, traces = 0;
  uint64_t recorded = 0, errant = 0;
  double total = 0, complete = 0;
  double others = 0;  // metric 0 of threads other than the main one
  std::map<std::string, double> byLeaf;  // metric 0 by leaf function
  std::map<std::string, double> incomplete;  // metric 0 by incomplete path, leaf first
  double inRuntime = 0;  // metric 0 at a leaf in the runtime's own code
  int runtimeFrames = 0;  // nodes of the runtime's own code anywhere in a path
};

// A thread's outermost frame in libc or the loader means the unwind ran past the start
// routine to clone(): the runtime's trampoline was not found.
bool isStartup(const std::string& module, const std::string& fn) {
  return module.find("libc.so") != std::string::npos || module.find("ld-linux") != std::string::npos ||
         fn == "_start";
}

Analysis analyze(const fs::path& dir) {
  Analysis a;
  Symbolizer sym;
  for (auto& e : fs::directory_iterator(dir)) {
    auto ext = e.path().extension();
    if (ext == ".log") {
      std::string log = slurp(e.path());
      auto pos = log.find("recorded: ");
      if (pos != std::string::npos) a.recorded += std::stoull(log.substr(pos + 10));
      pos = log.find("errant: ");
      if (pos != std::string::npos) a.errant += std::stoull(log.substr(pos + 8));
    }
    if (ext == ".hpctrace") ++a.traces;
    if (ext != ".hpcrun") continue;
    ++a.profiles;
    auto p = hpc::hpcrun::read_profile(e.path());
    EXPECT_TRUE(p.ok()) << p.status().message();
    if (!p.ok()) continue;
    std::map<uint32_t, const hpc::hpcrun::CctNode*> byId;
    for (auto& n : p->nodes) byId[n.id] = &n;
    std::map<uint16_t, std::string> lm;
    for (auto& m : p->load_modules) lm[m.id] = m.name;
    const std::string* tid = p->header_value("thread-id");
    bool mainThread = tid && *tid == "0";
    for (auto& n : p->nodes)
      if (n.lm_id && fs::path(lm[n.lm_id]).filename() == "libhpcrun.so") ++a.runtimeFrames;
    for (auto& n : p->nodes) {
      double v = 0;
      for (auto& mv : n.values)
        if (mv.metric_id == 0) v += p->metrics[0].flags.val_fmt == 2 ? mv.as_real() : double(mv.bits);
      if (v == 0) continue;
      a.total += v;
      if (!mainThread) a.others += v;
      a.byLeaf[n.lm_id ? sym.name(lm[n.lm_id], n.lm_ip) : ""] += v;
      if (n.lm_id && fs::path(lm[n.lm_id]).filename() == "libhpcrun.so") a.inRuntime += v;
      // Walk to the child of the root: the fence (complete) or the partial root.
      const hpc::hpcrun::CctNode* outer = &n;
      const hpc::hpcrun::CctNode* cur = &n;
      while (cur->parent_id && byId[cur->parent_id]->parent_id) {
        outer = cur;
        cur = byId[cur->parent_id];
      }
      bool ok = false;
      if (cur->lm_ip != 0x5e5061727469616cull /* ^Partial */ && outer != cur) {
        uint64_t off = outer == &n ? outer->lm_ip : outer->lm_ip - 1;
        const std::string& fn = sym.name(lm[outer->lm_id], off);
        ok = mainThread ? fn == "main" : !isStartup(lm[outer->lm_id], fn);
      }
      if (ok) {
        a.complete += v;
        continue;
      }
      std::string path;
      for (const hpc::hpcrun::CctNode* f = &n; f && f->parent_id; f = byId[f->parent_id]) {
        uint64_t off = f == &n ? f->lm_ip : f->lm_ip - 1;
        std::string fn = f->lm_id ? sym.name(lm[f->lm_id], off) : "";
        if (fn.empty()) {
          std::ostringstream os;
          os << fs::path(f->lm_id ? lm[f->lm_id] : "?").filename().string() << "+0x" << std::hex << off;
          fn = os.str();
        }
        path += (path.empty() ? "" : " < ") + fn;
      }
      a.incomplete[path] += v;
    }
  }
  return a;
}

struct Case {
  std::string workload, args;
  int minProfiles;
  int status;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.workload; }

// The workload's command line, built by compiler cc.
std::string workloadCommand(const Case& c, const std::string& cc) {
  std::string cmd = kWl + c.workload + "-" + cc + " " + c.args;
  if (c.workload == "dlopen") cmd += " " + kWl + "libplugin-" + cc + ".so";
  return cmd;
}

class Workload : public ::testing::TestWithParam<std::tuple<Case, std::string>> {};

TEST_P(Workload, SameBehaviourAndCompletePaths) {
  auto [c, cc] = GetParam();
  const std::string cmd = workloadCommand(c, cc);
  fs::path scratch = fs::temp_directory_path() / ("hpcrun-test-" + c.workload + "-" + cc);
  fs::remove_all(scratch);
  fs::path meas = scratch / "m";
  Outcome bare = run(cmd, scratch / "bare");
  Outcome prof = run(kBin + " -o " + meas.string() + " -e CPUTIME@5000 " + cmd, scratch / "prof");
  EXPECT_EQ(bare.status, c.status);
  EXPECT_EQ(prof.status, bare.status);
  EXPECT_EQ(prof.out, bare.out);

  Analysis a = analyze(meas);
  EXPECT_GE(a.profiles, c.minProfiles);
  EXPECT_EQ(a.traces, 0);
  // The application's own CPU time (the bare run's): the runtime's per-thread set-up and
  // profile writing run with sampling suspended.
  double expected = bare.cpu * 200.0;
  EXPECT_NEAR(double(a.recorded + a.errant), expected, 0.25 * expected)
      << "cpu " << prof.cpu << " (bare " << bare.cpu << ")";
  ASSERT_GT(a.total, 0);
  std::string paths;
  for (auto& [path, v] : a.incomplete) paths += "\n  " + std::to_string(v) + "  " + path;
  EXPECT_GE(a.complete / a.total, 0.99) << "complete " << a.complete << " of " << a.total << paths;
  // A sample in the runtime's own code (a wrapper, the end of main) is blocked: no frame of
  // libhpcrun.so is a leaf (`threads`, 504 threads, had some).
  EXPECT_EQ(a.inRuntime, 0);
  // Nor anywhere in a path: a wrapper's frame (pthread_create's, between the application's
  // call and glibc's) is left out, so paths read as they would unmeasured.
  EXPECT_EQ(a.runtimeFrames, 0);
  fs::remove_all(scratch);
}

// Each run long enough (over 100 samples at 200 Hz) that one stray incomplete path does not
// by itself fall below 99 %: `signals` at 1 had 67 samples, and one CI run had one of them
// incomplete (not seen again in 680 runs here; the failure message now lists such paths).
const Case kCases[] = {
    {"recursion", "1", 1, 0}, {"cxx", "1", 1, 0},       {"longjmp", "1", 1, 0},
    {"threads", "1", 505, 0}, {"omp", "1", 3, 0},       {"forkexec", "1", 3, 0},
    {"dlopen", "1", 1, 0},    {"signals", "3", 1, 0},   {"thread_exit", "1", 2, 5},
    {"nocfi", "1", 1, 0},     {"crash", "1", 2, 128 + 11},  {"small_stack", "1", 2, 0},
    {"quick_exit", "1", 2, 5}, {"exit_group", "1", 2, 9},  {"small_altstack", "1", 2, 128 + 6},
};

INSTANTIATE_TEST_SUITE_P(All, Workload,
                         ::testing::Combine(::testing::ValuesIn(kCases), ::testing::Values("gcc", "clang")),
                         [](const auto& info) {
                           return std::get<0>(info.param).workload + "_" + std::get<1>(info.param);
                         });

// The unwind cache (unwind_cache.hpp) checked against libunwind: with HPCRUN_UNWIND_CACHE=verify
// every thread uses it from its first sample, each unwind that stepped frames by recipe is
// repeated by libunwind alone, and each CCT path that reused nodes is checked frame by frame;
// the log counts those that disagree. At 4 kHz, so that samples land
// in signal handlers, exception unwinding, longjmp, frames without CFI, dlopen'ed code and
// threads that come and go, and the app must behave as bare.
class UnwindCacheCheck : public ::testing::TestWithParam<std::tuple<Case, std::string>> {};

// The counter after `label` in the measurement's log lines, summed over processes.
uint64_t logCount(const fs::path& dir, const std::string& label) {
  uint64_t n = 0;
  for (auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".log") continue;
    std::string log = slurp(e.path());
    for (size_t at = log.find(label); at != std::string::npos; at = log.find(label, at + 1))
      n += std::stoull(log.substr(at + label.size()));
  }
  return n;
}

TEST_P(UnwindCacheCheck, AgreesWithLibunwind) {
  auto [c, cc] = GetParam();
  const std::string cmd = workloadCommand(c, cc);
  fs::path scratch = fs::temp_directory_path() / ("hpcrun-test-unwind-cache-" + c.workload + "-" + cc);
  fs::remove_all(scratch);
  Outcome bare = run(cmd, scratch / "bare");
  Outcome prof =
      run("HPCRUN_UNWIND_CACHE=verify " + kBin + " -o " + (scratch / "m").string() + " -e REALTIME@250 " + cmd,
          scratch / "prof");
  EXPECT_EQ(prof.status, c.status) << prof.err;
  EXPECT_EQ(prof.out, bare.out);
  EXPECT_EQ(logCount(scratch / "m", "disagreeing: "), 0u);
  const uint64_t verified = logCount(scratch / "m", "checks: ");
  const uint64_t byRecipe = logCount(scratch / "m", "frames stepped by recipe: ");
  const uint64_t reused = logCount(scratch / "m", "CCT nodes reused: ");
  // A walk by recipes that faults is no disagreement but a failed unwind: few of those.
  EXPECT_LE(logCount(scratch / "m", "errant: "), logCount(scratch / "m", "recorded: ") / 100 + 2);
  if (c.workload.rfind("recursion", 0) == 0 && cc == "gcc") {  // clang makes the deep recursion a loop
    EXPECT_GT(verified, 500u);
    EXPECT_GT(byRecipe, 500u * 1000u);  // most samples lie 6,000 frames deep
    EXPECT_GT(reused, 500u * 1000u);
  }
  if (c.workload == "callheavy") {
    EXPECT_GT(verified, 100u);
  }
  fs::remove_all(scratch);
}

const Case kCacheCases[] = {
    {"recursion", "0.5", 1, 0}, {"recursion_fp", "0.5", 1, 0}, {"recursion_mixed", "2", 1, 0},
    {"cxx", "0.5", 1, 0},       {"longjmp", "0.5", 1, 0},
    {"threads", "0.5", 505, 0},
    {"signals", "0.5", 1, 0},   {"nocfi", "0.5", 1, 0},   {"dlopen", "0.5", 1, 0},   {"callheavy", "0.2", 1, 0},
    {"thread_exit", "0.5", 2, 5},
};

INSTANTIATE_TEST_SUITE_P(Verify, UnwindCacheCheck,
                         ::testing::Combine(::testing::ValuesIn(kCacheCases), ::testing::Values("gcc", "clang")),
                         [](const auto& info) {
                           return std::get<0>(info.param).workload + "_" + std::get<1>(info.param);
                         });

// A perf event's overflow signal that finds the real-time signal queue full comes as a plain
// SIGIO, whose default action ends the process. With the queue limited to 2 signals, 10 kHz
// samples of a deep recursion (slow, the unwind cache off) overflow it often: the app must
// still finish as bare, and the log count the lost signals.
TEST(Signals, QueueOverflowDoesNotEndTheApp) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-sigio";
  fs::remove_all(scratch);
  const std::string exe = kWl + "recursion-gcc 0.3";
  Outcome bare = run(exe, scratch / "bare");
  Outcome prof = run("bash -c 'ulimit -i 2; HPCRUN_UNWIND_CACHE=0 exec " + kBin + " -o " + (scratch / "m").string() +
                         " -e perf::cpu-clock@f10000 " + exe + "'",
                     scratch / "prof");
  EXPECT_EQ(prof.status, 0) << prof.err;
  EXPECT_EQ(prof.out, bare.out);
  EXPECT_GT(logCount(scratch / "m", "overflow signals lost (queue full): "), 0u);
  fs::remove_all(scratch);
}

// The runtime's handlers run on an alternate signal stack of its own where the thread has
// none (small_stack, in the workloads above, was killed by the first sample before); the
// application still sees none until it sets its own, sees its own then, and catches a
// stack overflow on it, sampled at 4 kHz all the way down; a handler of its own that did not
// ask for an alternate stack runs on the thread's, as unmeasured.
TEST(Signals, TheApplicationsAlternateStackIsItsOwn) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-altstack";
  fs::remove_all(scratch);
  for (const char* cc : {"gcc", "clang"}) {
    const std::string exe = kWl + "altstack-" + cc;
    if (!fs::exists(exe)) continue;
    Outcome bare = run("bash -c 'ulimit -s 1024; exec " + exe + "'", scratch / "bare");
    EXPECT_EQ(bare.status, 0) << bare.err;
    EXPECT_EQ(bare.out,
              "main: none\nthread: none\nfpe handler: on the thread's stack\nmain after setting its own: set, its own\n"
              "overflow caught on its own stack\n");
    const fs::path meas = scratch / (std::string("m-") + cc);
    Outcome prof = run("bash -c 'ulimit -s 1024; exec " + kBin + " -e REALTIME@250 -o " + meas.string() + " " + exe + "'",
                       scratch / "prof");
    EXPECT_EQ(prof.status, bare.status) << cc << ": " << prof.err;
    EXPECT_EQ(prof.out, bare.out) << cc;
    EXPECT_GT(logCount(meas, "recorded: "), 10u) << cc;
  }
  fs::remove_all(scratch);
}

// The application's own use of every real-time signal number, the runtime's sampling signal
// among them: each raised and queued to itself reaches its handler, with its value, under
// timer and perf sampling (before: the sampling signal's number was swallowed).
TEST(Signals, TheSamplingSignalSentByTheApplicationReachesIt) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-rtsig";
  fs::remove_all(scratch);
  const std::string exe = kWl + "rtsig-gcc";
  Outcome bare = run(exe, scratch / "bare");
  EXPECT_EQ(bare.status, 0);
  EXPECT_EQ(bare.out, "real-time signals delivered as sent: all 0\n");
  int n = 0;
  for (const char* ev : {"CPUTIME@1000", "perf::task-clock@f4000"}) {
    const fs::path meas = scratch / ("m" + std::to_string(n++));
    Outcome prof = run(kBin + " -e " + ev + " -o " + meas.string() + " " + exe, scratch / "prof");
    EXPECT_EQ(prof.status, 0) << ev << ": " << prof.err;
    EXPECT_EQ(prof.out, bare.out) << ev;
    EXPECT_GT(logCount(meas, "recorded: "), 5u) << ev;
  }
  fs::remove_all(scratch);
}

// A thread's trace (an .hpctrace file beside its profile): each record's time and leaf
// function, in the file's order, and the thread's end (trace-max-time).
struct TraceLeaves {
  bool ok = false;
  std::vector<std::pair<uint64_t, std::string>> records;
  uint64_t end = 0;
};
TraceLeaves traceLeaves(const fs::path& trace, Symbolizer& sym) {
  TraceLeaves out;
  fs::path profile = trace;
  auto p = hpc::hpcrun::read_profile(profile.replace_extension(".hpcrun"));
  auto tr = hpc::hpcrun::read_trace(trace);
  if (!p.ok() || !tr.ok()) return out;
  const std::string* end = p->header_value("trace-max-time");
  if (!end) return out;
  std::map<uint16_t, std::string> lm;
  for (auto& m : p->load_modules) lm[m.id] = m.name;
  std::map<uint32_t, std::string> leaf;
  for (auto& n : p->nodes) leaf[n.id] = n.lm_id ? sym.name(lm[n.lm_id], n.lm_ip) : "";
  for (auto& r : tr->records) out.records.emplace_back(r.time, leaf[r.cct_id]);
  out.end = std::stoull(*end);
  out.ok = true;
  return out;
}

// Waits Linux never restarts after a handler (nanosleep, poll, select, epoll_wait, their
// p-forms, pause, sigtimedwait, ...): REALTIME's signal ended each with EINTR after one period
// (a 0.1 s sleep returned at once, -1 EINTR). Now only the application's own signal ends one
// (pause and an endless poll, by SIGUSR1 from another thread), every call returns what it
// returns unmeasured, and REALTIME attributes the waits' time to the functions waited in.
TEST(Signals, WaitsAreNotEndedBySamples) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-waits";
  fs::remove_all(scratch);
  const std::string exe = kWl + "waits-gcc";
  Outcome bare = run(exe, scratch / "bare");
  ASSERT_EQ(bare.status, 0) << bare.err;
  ASSERT_NE(bare.out.find("pause: -1 EINTR\npoll forever: -1 EINTR\n"), std::string::npos) << bare.out;
  int n = 0;
  for (const char* ev : {"REALTIME@1000", "CPUTIME@1000", "perf::task-clock@1000000", "REALTIME@1000 -e CPUTIME@1000"}) {
    const fs::path meas = scratch / ("m" + std::to_string(n++));
    Outcome prof = run(kBin + " -o " + meas.string() + " -e " + ev + " " + exe, scratch / "prof");
    EXPECT_EQ(prof.status, 0) << ev << ": " << prof.err;
    EXPECT_EQ(prof.out, bare.out) << ev;
    if (std::string(ev).rfind("REALTIME", 0) != 0) continue;
    // Main waits 3.3 s (twenty-seven 0.1 s waits, then 0.3 s twice until SIGUSR1, less the 0.1 s
    // of work before them), the other threads 0.6 s and 3.3 s: in the functions waited in.
    Analysis a = analyze(meas);
    double inWaits = 0;
    for (auto& [leaf, v] : a.byLeaf)
      for (const char* w : {"sleep", "poll", "select", "epoll_", "sigtimedwait", "pause", "recv", "send", "accept", "semtimedop", "sem_timedwait", "sem_clockwait", "aio_suspend", "__libc_read", "__libc_write"})
        if (leaf.find(w) != std::string::npos) {
          inWaits += v;
          break;
        }
    EXPECT_GT(a.total, 0.9 * (3.3 + 0.6 + 3.3)) << ev;
    // (The rest: work(), and the join's futex wait for the other thread's last sleep.)
    EXPECT_GT(inWaits, 0.75 * a.total) << ev << ": the waits' time is not in the functions waited in";
    // The listener, in poll from start to end, gets no deferred sample: its time so far is
    // credited as the process ends (1.5 s or more; before, none).
    EXPECT_GT(a.others, 0.6 + 2.0) << ev << ": the other threads' time, the listener's included";
  }
  // With a trace: a wait's record is dated at the wait's start, so the main thread's trace
  // shows work() for about the time it took, and the wait after it for the rest (dated at
  // the wait's end, work() showed over the wait after it too, up to 0.3 s more).
  const fs::path meas = scratch / "traced";
  Outcome traced = run(kBin + " -t -o " + meas.string() + " -e REALTIME@1000 " + exe, scratch / "prof");
  ASSERT_EQ(traced.out, bare.out);
  Symbolizer sym;
  double shownWaiting = 0, shownWorking = 0;
  for (auto& e : fs::directory_iterator(meas)) {
    if (e.path().extension() != ".hpctrace" || e.path().filename().string().find("-000-") == std::string::npos) continue;
    TraceLeaves tr = traceLeaves(e.path(), sym);
    ASSERT_TRUE(tr.ok);
    // A record shows until the next one, the last until the thread's end (trace-max-time).
    for (size_t i = 0; i < tr.records.size(); ++i) {
      const uint64_t until = i + 1 < tr.records.size() ? tr.records[i + 1].first : tr.end;
      const std::string& fn = tr.records[i].second;
      if (fn == "work") shownWorking += double(until - tr.records[i].first) * 1e-9;
      for (const char* w : {"sleep", "poll", "select", "epoll_", "sigtimedwait", "pause", "recv", "send", "accept", "semtimedop", "sem_timedwait", "sem_clockwait", "aio_suspend", "__libc_read", "__libc_write"})
        if (fn.find(w) != std::string::npos) {
          shownWaiting += double(until - tr.records[i].first) * 1e-9;
          break;
        }
    }
  }
  EXPECT_GT(shownWaiting, 1.5 * 0.9) << "seconds the main thread's trace shows in its waits (the sixteen of 0.1 s at least)";
  // work() took what REALTIME attributes to it (about 0.1 s, more on a busy machine).
  Analysis a = analyze(meas);
  const double working = a.byLeaf["work"] + a.byLeaf["spin"];
  EXPECT_LT(shownWorking, working + 0.1) << "seconds the main thread's trace shows in work(), which took " << working;
  fs::remove_all(scratch);
}

// The same waits made by raw system calls through syscall(2), as libaio makes io_getevents
// (workload raw_waits.c: io_getevents, nanosleep, clock_nanosleep, poll, epoll_wait, select,
// and ppoll, epoll_pwait, pselect6 and io_pgetevents with masks of their own that block
// nothing, ten of 20 ms each): under REALTIME every one failed with EINTR (-1) where bare it
// timed out (0); the p-forms take the sampling signal into their masks now. Each now returns what it returns unmeasured, and its time is in syscall,
// the function waited in.
TEST(Signals, RawSystemCallWaitsAreNotEndedBySamples) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-raw-waits";
  fs::remove_all(scratch);
  const std::string exe = kWl + "raw_waits-gcc";
  Outcome bare = run(exe, scratch / "bare");
  if (bare.status == 77) GTEST_SKIP() << "no AIO contexts here: " << bare.err;
  ASSERT_EQ(bare.status, 0) << bare.err;
  ASSERT_EQ(bare.out.substr(0, bare.out.find("io_pgetevents")),
            "io_getevents: 0 x10\nnanosleep: 0 x10\nclock_nanosleep: 0 x10\npoll: 0 x10\n"
            "epoll_wait: 0 x10\nselect: 0 x10\nppoll: 0 x10\nepoll_pwait: 0 x10\npselect6: 0 x10\n");
  const fs::path meas = scratch / "m";
  Outcome prof = run(kBin + " -o " + meas.string() + " -e REALTIME@1000 " + exe, scratch / "prof");
  EXPECT_EQ(prof.status, 0) << prof.err;
  EXPECT_EQ(prof.out, bare.out);
  Analysis a = analyze(meas);
  EXPECT_GT(a.byLeaf["syscall"], 0.9 * 1.8) << "seconds in the waits (1.8 s of them, 2 s with io_pgetevents)";
  fs::remove_all(scratch);
}

// Handlers the application installed without SA_RESTART: a blocking read that SIGALRM or
// SIGINT interrupts fails with EINTR, as unmeasured. Our handler sits in front of both
// signals and must be installed as the application's was (with SA_RESTART the read was
// restarted, and the program waited forever).
// A program that blocks every signal and waits for them (sigwaitinfo, sigwait, sigtimedwait,
// an epoll loop over a signalfd of every signal) gets only its own: under REALTIME the waits
// kept the sampling signal pending, and the old runtime handed it to the program (signal 61
// from sigwaitinfo and sigtimedwait; the signalfd loop read ours hundreds of times).
TEST(Signals, SignalsWaitedForAreOnlyTheApplicationsOwn) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-sigwaits";
  fs::remove_all(scratch);
  const std::string exe = kWl + "sigwaits-gcc";
  Outcome bare = run(exe, scratch / "bare");
  ASSERT_EQ(bare.status, 0) << bare.err;
  ASSERT_EQ(bare.out, "sigwaitinfo: SIGUSR1\nsigwait: SIGUSR2\nsigtimedwait: -1\nsignalfd: SIGUSR1\n");
  int n = 0;
  for (const char* ev : {"REALTIME@1000", "CPUTIME@1000", "REALTIME@250 -e CPUTIME@250"}) {
    Outcome prof = run(kBin + " -o " + (scratch / ("m" + std::to_string(n++))).string() + " -e " + ev + " " + exe,
                       scratch / "prof");
    EXPECT_EQ(prof.status, 0) << ev << ": " << prof.err;
    EXPECT_EQ(prof.out, bare.out) << ev;
  }
  fs::remove_all(scratch);
}

TEST(Signals, InterruptedCallsFailAsTheApplicationAskedThemTo) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-eintr";
  fs::remove_all(scratch);
  const std::string exe = kWl + "eintr-gcc";
  Outcome bare = run("timeout 20 " + exe, scratch / "bare");
  EXPECT_EQ(bare.status, 0);
  EXPECT_EQ(bare.out,
            "SIGALRM: read -1, EINTR, handler ran: yes\nSIGINT: read -1, EINTR, handler ran: yes\n");
  Outcome prof = run("timeout 20 " + kBin + " -o " + (scratch / "m").string() + " " + exe, scratch / "prof");
  EXPECT_EQ(prof.status, 0) << prof.err;
  EXPECT_EQ(prof.out, bare.out);
  fs::remove_all(scratch);
}

// One profile of a measurement directory, its load map and nodes by id.
struct ProfileView {
  fs::path path;
  std::map<uint16_t, std::string> lm;
  std::map<uint32_t, const hpc::hpcrun::CctNode*> byId;
};

// fn(view, node, value) for each node of the directory's profiles with a value of metric 0
// (or of the metric named `metric`).
template <class Fn> void forEachValuedNode(const fs::path& dir, Fn fn, const std::string& metric = "") {
  for (auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".hpcrun") continue;
    auto p = hpc::hpcrun::read_profile(e.path());
    if (!p.ok()) {
      ADD_FAILURE() << e.path() << ": " << p.status().message();
      continue;
    }
    ProfileView view{e.path(), {}, {}};
    for (auto& m : p->load_modules) view.lm[m.id] = m.name;
    for (auto& n : p->nodes) view.byId[n.id] = &n;
    int id = metric.empty() ? 0 : -1;
    for (size_t i = 0; i < p->metrics.size(); ++i)
      if (!metric.empty() && p->metrics[i].name == metric) id = int(i);
    if (id < 0) continue;
    const bool real = p->metrics[size_t(id)].flags.val_fmt == 2;
    for (auto& n : p->nodes) {
      double v = 0;
      for (auto& mv : n.values)
        if (mv.metric_id == id) v += real ? mv.as_real() : double(mv.bits);
      if (v != 0) fn(view, n, v);
    }
  }
}

// hpcrun refuses `opts` before the program starts: exit status 2, `why` in its message.
void expectRefused(const std::string& opts, const std::string& why, const std::string& cmd, const fs::path& scratch) {
  Outcome r = run(kBin + " " + opts + " -o " + (scratch / "bad").string() + " " + cmd, scratch / "run");
  EXPECT_EQ(r.status, 2) << opts;
  EXPECT_NE(r.err.find(why), std::string::npos) << opts << ": " << r.err;
  EXPECT_EQ(r.out, "") << opts << ": the program did not start";
}

// The runtime's wrappers stay out of the application's paths: `threads` creates 504 threads,
// and wall-clock samples in glibc's pthread_create (called by our wrapper, with sampling on)
// had `pthread_create [libhpcrun.so]` between main and glibc; a sample in the wrapper's own
// code had a libhpcrun.so leaf. Now main calls glibc's pthread_create directly in the path.
TEST(Paths, TheRuntimesWrappersAreLeftOut) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-wrappers";
  fs::remove_all(scratch);
  const fs::path meas = scratch / "m";
  Outcome r = run(kBin + " -o " + meas.string() + " -e REALTIME@100 " + kWl + "threads-gcc 0.3", scratch / "run");
  ASSERT_EQ(r.status, 0) << r.err;
  Analysis a = analyze(meas);
  EXPECT_EQ(a.runtimeFrames, 0) << "nodes of libhpcrun.so in the profiles";
  EXPECT_EQ(a.inRuntime, 0);
  // Samples inside glibc's pthread_create still count, below main.
  double inCreate = 0;
  Symbolizer sym;
  forEachValuedNode(meas, [&](ProfileView& p, const hpc::hpcrun::CctNode& n, double v) {
    for (const hpc::hpcrun::CctNode* f = &n; f && f->parent_id; f = p.byId[f->parent_id])
      if (f != &n && f->lm_id && sym.name(p.lm[f->lm_id], f->lm_ip - 1).rfind("pthread_create", 0) == 0) {
        inCreate += v;
        break;
      }
  });
  std::printf("wall-clock seconds below pthread_create: %.4f\n", inCreate);
  EXPECT_GT(inCreate, 0.0) << "no sample below pthread_create: the check above saw no wrapper to leave out";
  fs::remove_all(scratch);
}

// Simple recursion folded, as the reference's hpcrun does unless -r: a frame whose function
// called itself is left out, so each recursion is one level of the path. `recursion`'s deep()
// calls itself 6,000 deep (4 levels with -r's profile at some 12,000 contexts, the folded one
// at some 400); ping and pong call each other (not simple recursion: kept, 200 levels). The
// paths built at a wrapped call fold alike (-e MEMLEAK: `memleak`'s nested() allocates 30
// calls deep in itself). The time is the same either way.
TEST(Paths, SimpleRecursionIsFoldedUnlessRetained) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-recursion-folded";
  fs::remove_all(scratch);
  Symbolizer sym;
  auto fnOf = [&](ProfileView& p, const hpc::hpcrun::CctNode* f) {
    return f->lm_id ? sym.name(p.lm[f->lm_id], f->lm_ip) : std::string("?");
  };
  std::uintmax_t bytes[2] = {0, 0};
  for (const bool retain : {false, true}) {
    const fs::path meas = scratch / (retain ? "r" : "folded");
    Outcome r = run(kBin + (retain ? " -r" : "") + " -e CPUTIME@1000 -o " + meas.string() + " " + kWl +
                        "recursion-gcc 0.3",
                    scratch / "run");
    ASSERT_EQ(r.status, 0) << r.err;
    size_t mostDeep = 0, mostPing = 0, selfCalls = 0;
    double total = 0, inDeep = 0;
    forEachValuedNode(meas, [&](ProfileView& p, const hpc::hpcrun::CctNode& n, double v) {
      total += v;
      size_t deep = 0, ping = 0;
      std::string below;
      for (const hpc::hpcrun::CctNode* f = &n; f && f->parent_id; f = p.byId[f->parent_id]) {
        const std::string fn = fnOf(p, f);
        deep += fn == "deep";
        ping += fn == "ping";
        selfCalls += fn == below && fn != "?";
        below = fn;
      }
      if (deep) inDeep += v;
      mostDeep = std::max(mostDeep, deep);
      mostPing = std::max(mostPing, ping);
    });
    EXPECT_NEAR(total, r.cpu, 0.25 * r.cpu) << retain;
    EXPECT_GT(inDeep, 0.15 * total) << retain;  // deep() has a third of the time
    EXPECT_GT(mostPing, 90u) << retain << ": mutual recursion is kept";
    if (retain) {
      EXPECT_GT(mostDeep, 5000u);
      EXPECT_GT(selfCalls, 5000u);
    } else {
      EXPECT_EQ(mostDeep, 1u) << "deep() one level";
      EXPECT_EQ(selfCalls, 0u) << "no frame in the function it calls";
    }
    for (auto& e : fs::directory_iterator(meas))
      if (e.path().extension() == ".hpcrun") bytes[retain] += e.file_size();

    const fs::path leak = scratch / (retain ? "leak-r" : "leak");
    r = run(kBin + (retain ? " -r" : "") + " -e MEMLEAK -mp 1 -o " + leak.string() + " " + kWl + "memleak-gcc",
            scratch / "run");
    ASSERT_EQ(r.status, 0) << r.err;
    size_t nested = 0;
    double bytesNested = 0;
    forEachValuedNode(leak, [&](ProfileView& p, const hpc::hpcrun::CctNode& n, double v) {
      if (fnOf(p, &n) != "nested") return;
      bytesNested += v;
      size_t k = 0;
      for (const hpc::hpcrun::CctNode* f = &n; f && f->parent_id; f = p.byId[f->parent_id]) k += fnOf(p, f) == "nested";
      nested = std::max(nested, k);
    }, "Bytes Allocated");
    EXPECT_EQ(bytesNested, 7000) << retain;
    EXPECT_EQ(nested, retain ? 31u : 1u);
  }
  EXPECT_LT(bytes[0] * 4, bytes[1]) << "the folded profile is the smaller";
  fs::remove_all(scratch);
}

// Code outside every module, as a JIT compiler's (`jit.c`: two frames of it, under callers
// built with frame pointers), keeps its exact callers, and is recorded against the module
// jit/<app>-<pid>-<gen>.map at its own addresses. A JIT frame reached by a frame pointer, at
// the return address of a call, is a frame of the path. The unwinder's frame-pointer guess
// from it lands in more of it or meets an rbp of 0; before, the first left the callers'
// rbp at the JIT frame's after the stack was scanned for a return address, so each caller
// read its own caller from the wrong frame (the stale return addresses of stain() became
// level3's callers), and the second ended the unwind as if at the stack's bottom (half the
// samples hung on the thread's root). Both counted as complete paths.
TEST(Paths, CodeOutsideEveryModuleKeepsItsExactCallers) {
  for (const std::string cc : {"gcc", "clang"}) {
    fs::path scratch = fs::temp_directory_path() / ("hpcrun-test-jit-" + cc);
    fs::remove_all(scratch);
    const fs::path meas = scratch / "m";
    Outcome bare = run(kWl + "jit-" + cc + " 1", scratch / "bare");
    Outcome r = run(kBin + " -o " + meas.string() + " -e CPUTIME@1000 " + kWl + "jit-" + cc + " 1", scratch / "run");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, bare.out);
    Symbolizer sym;
    double inJit = 0, exact = 0, total = 0;
    std::map<std::string, double> wrong;
    forEachValuedNode(meas, [&](ProfileView& p, const hpc::hpcrun::CctNode& n, double v) {
      // The module's name: jit/jit-<cc>-<pid>-<gen>.map, the profile's name ending -<pid>-<gen>.
      const std::string stem = p.path.stem().string();
      const size_t genAt = stem.rfind('-'), pidAt = stem.rfind('-', genAt - 1);
      const std::string pidGen = "jit/jit-" + cc + "-" + stem.substr(pidAt + 1) + ".map";
      total += v;
      EXPECT_NE(n.lm_id, 0) << cc << ": a sample without a module";
      if (!n.lm_id || p.lm[n.lm_id].rfind("jit/", 0) != 0) return;
      EXPECT_EQ(p.lm[n.lm_id], pidGen);
      inJit += v;
      std::string path;  // the callers, outermost first
      for (const hpc::hpcrun::CctNode* f = p.byId[n.parent_id]; f && f->parent_id; f = p.byId[f->parent_id]) {
        const std::string fn =
            !f->lm_id ? "<placeholder>" : p.lm[f->lm_id] == pidGen ? "<jit>" : sym.name(p.lm[f->lm_id], f->lm_ip - 1);
        path = fn + (path.empty() ? "" : " > ") + path;
      }
      // innerA (at 80 in its page) keeps a frame pointer: its caller, outer, is walked
      // through; innerB (at 96) does not: its callers are found past outer.
      const uint64_t at = n.lm_ip & 0xfff;
      const std::string want =
          std::string("<placeholder> > main > level1 > level2 > level3") + (at >= 80 && at < 94 ? " > <jit>" : "");
      if (path == want && at >= 80 && at < 109) exact += v;
      else wrong["at " + std::to_string(at) + ": " + path] += v;
    });
    std::string paths;
    for (auto& [path, v] : wrong) paths += "\n  " + std::to_string(v) + "  " + path;
    EXPECT_GE(inJit, 0.9 * total) << cc << ": samples in the generated code " << inJit << " of " << total;
    EXPECT_EQ(exact, inJit) << cc << ": paths other than main > level1 > level2 > level3:" << paths;
    fs::remove_all(scratch);
  }
}

// -e IO: every read and write call's bytes at its calling context, exactly (`io.c`: each
// interposed call in a function of its own), with CPUTIME sampled and a trace beside it;
// the runtime's own writes (its profiles, the trace, the log) are not counted, and the
// program's output is its own.
TEST(Sources, IoCountsEveryCallsBytesAtItsContext) {
  for (const std::string cc : {"gcc", "clang"}) {
    fs::path scratch = fs::temp_directory_path() / ("hpcrun-test-io-" + cc);
    fs::remove_all(scratch);
    fs::create_directories(scratch);
    const fs::path meas = scratch / "m";
    const std::string cmd = kWl + "io-" + cc + " " + scratch.string();
    Outcome bare = run(cmd, scratch / "bare");
    Outcome r = run(kBin + " -t -e CPUTIME@1000 -e IO -o " + meas.string() + " " + cmd, scratch / "run");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, bare.out);
    Symbolizer sym;
    for (const auto& [metric, want] : std::map<std::string, std::map<std::string, double>>{
             {"IO Bytes Written",
              {{"writer", 3 << 20}, {"pwriter", 512 << 10}, {"writevr", 512 << 10}, {"fwriter", 2 << 20},
               {"aio_writer", 256 << 10},
               {"pwritevr", 256 << 10}, {"unlocked_writer", 256 << 10}, {"printer", 80000}, {"putser", 100000},
               {"emit", 8000}, {"char_writer", 3000}, {"main", double(bare.out.size()) + 10000 /* into the pipe */}}},
             {"IO Bytes Read",
              {{"reader", 4 << 20}, {"preader", 1 << 20}, {"readvr", 512 << 10}, {"freader", 2 << 20},
               {"aio_reader", 128 << 10}, {"lio_reader", 128 << 10},
               {"chk_reader", 1 << 20}, {"chk_preader", 256 << 10}, {"chk_freader", 1 << 20},
               {"preadvr", 512 << 10}, {"unlocked_reader", 256 << 10}, {"fgetser", 188000}, {"getliner", 188000},
               {"char_reader", 3000}, {"unget_reader", 3000}, {"scanner", 188000}, {"pipe_scanner", 10000}}}}) {
      std::map<std::string, double> got;
      forEachValuedNode(meas, [&](ProfileView& p, const hpc::hpcrun::CctNode& n, double v) {
        // The call's own context: its leaf is the return address into the caller.
        got[n.lm_id ? sym.name(p.lm[n.lm_id], n.lm_ip - 1) : "<placeholder>"] += v;
      }, metric);
      EXPECT_EQ(got, want) << cc << ": " << metric;
    }
    // emit's lines by its caller: a call from the same place with the same stack pointer
    // reuses the last context found there only while every return address is the same.
    std::map<std::string, double> byCaller;
    forEachValuedNode(meas, [&](ProfileView& p, const hpc::hpcrun::CctNode& n, double v) {
      if (!n.lm_id || sym.name(p.lm[n.lm_id], n.lm_ip - 1) != "emit") return;
      const hpc::hpcrun::CctNode* up = p.byId[n.parent_id];
      byCaller[up && up->lm_id ? sym.name(p.lm[up->lm_id], up->lm_ip - 1) : "?"] += v;
    }, "IO Bytes Written");
    EXPECT_EQ(byCaller, (std::map<std::string, double>{{"site_a", 334 * 8}, {"site_b", 666 * 8}})) << cc;
    fs::remove_all(scratch);
  }
}

// -e MEMLEAK (the reference's event, with -mp): each drawn allocation's bytes at its calling
// context as Bytes Allocated, and as Bytes Freed there once freed, whatever the thread
// (`memleak.c`). With every allocation drawn the counts are exact: leaker's 100,000 bytes
// allocated and never freed (its leak), the others' freed in full, producer's on main after
// its thread ended (its profile is written at the process's end). With half drawn, tidy's
// drawn blocks are still freed in full. The program's output is its own.
TEST(Sources, MemleakFindsWhatWasNotFreed) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-memleak";
  fs::remove_all(scratch);
  Symbolizer sym;
  for (const std::string cc : {"gcc", "clang"}) {
    const std::string cmd = kWl + "memleak-" + cc;
    Outcome bare = run(cmd, scratch / "bare");
    ASSERT_EQ(bare.status, 0) << bare.err;
    for (const char* prob : {"1", "1/2"}) {
      const fs::path meas = scratch / (cc + (prob[1] ? "-half" : "-all"));
      Outcome r = run(kBin + " -e MEMLEAK -mp " + prob + " -o " + meas.string() + " " + cmd, scratch / "run");
      ASSERT_EQ(r.status, 0) << r.err;
      EXPECT_EQ(r.out, bare.out);
      std::map<std::string, double> allocated, freed;
      for (auto [metric, into] : {std::pair{"Bytes Allocated", &allocated}, std::pair{"Bytes Freed", &freed}})
        forEachValuedNode(meas, [&](ProfileView& p, const hpc::hpcrun::CctNode& n, double v) {
          const std::string fn = n.lm_id ? sym.name(p.lm[n.lm_id], n.lm_ip - 1) : "?";
          if (fn == "leaker" || fn == "tidy" || fn == "grower" || fn == "producer") (*into)[fn] += v;
        }, metric);
      if (prob[1] == 0) {
        EXPECT_EQ(allocated, (std::map<std::string, double>{
                                 {"leaker", 100000}, {"tidy", 200000}, {"grower", 127500}, {"producer", 50000}}))
            << cc;
        EXPECT_EQ(freed, (std::map<std::string, double>{{"tidy", 200000}, {"grower", 127500}, {"producer", 50000}}))
            << cc;
        // hpcprof keeps both metrics; hpcreport lists what was not freed.
        const std::string bin = std::string(HPC_BINARY_DIR) + "/bin/";
        const fs::path db = scratch / (cc + ".d");
        Outcome prof = run(bin + "hpcprof -o " + db.string() + " " + meas.string(), scratch / "prof");
        ASSERT_EQ(prof.status, 0) << prof.err;
        Outcome rep = run(bin + "hpcreport " + db.string(), scratch / "rep");
        const size_t from = rep.out.find("# Not freed");
        ASSERT_NE(from, std::string::npos) << rep.out;
        const std::string notFreed = rep.out.substr(from, rep.out.find("#\n#", from) - from);
        EXPECT_NE(notFreed.find("        100000       100000  leaker"), std::string::npos) << notFreed;
        for (const char* fn : {"tidy", "grower", "producer"})
          EXPECT_EQ(notFreed.find(fn), std::string::npos) << fn << " freed in full: " << notFreed;
        EXPECT_EQ(rep.out.find("Where the time went"), std::string::npos) << "bytes only: no time to break down";
      } else {
        EXPECT_GT(allocated["tidy"], 0.2 * 200000) << cc;  // binomial(100, 1/2) of 2,000 bytes
        EXPECT_LT(allocated["tidy"], 0.8 * 200000) << cc;
        EXPECT_EQ(freed["tidy"], allocated["tidy"]) << cc;
        EXPECT_EQ(freed["leaker"], 0) << cc;
      }
    }
  }
  fs::remove_all(scratch);
}

// A counter group, as the reference's hpcrun takes it (-e LEADER,MEMBER...): the leader is
// sampled, and at each of its samples each member's count since the last is added where the
// sample lands. `grouped` touches 131,072 new pages in toucher and none in spinner, which has
// most of the time: sampled by cpu-clock, the page faults read at its samples land in toucher
// (all but those between toucher's last sample and spinner's first). The perf:: prefix may
// be left out, as there (the metric is named with it). Before, such an -e was refused.
TEST(Sources, CounterGroupMembersAreReadAtTheLeadersSamples) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-groups";
  fs::remove_all(scratch);
  const std::string cmd = kWl + "grouped-gcc";
  Outcome bare = run(cmd, scratch / "bare");
  ASSERT_EQ(bare.status, 0) << bare.err;
  const double touched = std::stod(bare.out.substr(bare.out.find(": ") + 2));
  ASSERT_EQ(touched, 131072);
  Symbolizer sym;
  for (const char* group : {"perf::cpu-clock@f1000,perf::page-faults", "cpu-clock@f1000,page-faults",
                            "'{cpu-clock,page-faults}@f1000'"}) {
    const fs::path meas = scratch / "m";
    fs::remove_all(meas);
    Outcome r = run(kBin + " -e " + group + " -o " + meas.string() + " " + cmd, scratch / "run");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, bare.out);
    for (auto& e : fs::directory_iterator(meas)) {
      if (e.path().extension() != ".hpcrun") continue;
      auto p = hpc::hpcrun::read_profile(e.path());
      ASSERT_TRUE(p.ok());
      ASSERT_EQ(p->metrics.size(), 2u);
      EXPECT_EQ(p->metrics[0].name, "perf::cpu-clock");
      EXPECT_EQ(p->metrics[1].name, "perf::page-faults");
      EXPECT_EQ(p->metrics[1].period, 1u) << "a member's values are its counts";
    }
    std::map<std::string, double> faults, clock;
    for (auto [metric, into] : {std::pair{"perf::page-faults", &faults}, std::pair{"perf::cpu-clock", &clock}})
      forEachValuedNode(meas, [&](ProfileView& p, const hpc::hpcrun::CctNode& n, double v) {
        (*into)[n.lm_id ? sym.name(p.lm[n.lm_id], n.lm_ip) : "?"] += v;
      }, metric);
    double allFaults = 0, allClock = 0;
    for (auto& [fn, v] : faults) allFaults += v;
    for (auto& [fn, v] : clock) allClock += v;
    // (97 % or more in toucher in runs beside two busy loops; before toucher computed
    // beside its faults, its kernel time took no user-mode sample, and a loaded machine moved
    // a fifth of them past its last one.)
    EXPECT_GT(faults["toucher"], 0.75 * touched) << group;
    EXPECT_LT(allFaults, 1.1 * touched) << group;
    EXPECT_LT(faults["spinner"], 0.2 * touched) << group;
    EXPECT_GT(clock["spinner"], 0.5 * allClock) << group << ": the leader's samples are its own";
  }
  // What a group cannot be.
  for (auto [group, why] : {std::pair{"CPUTIME,perf::page-faults", "must be a perf event"},
                            std::pair{"perf::cpu-clock,page-faults@10", "takes no period"},
                            std::pair{"perf::cpu-clock,REALTIME", "is not a perf event"},
                            std::pair{"perf::cpu-clock,no-such-event", "unknown event"},
                            std::pair{"'{cpu-clock@f100,page-faults}@f1000'", "two rates for its leader"},
                            std::pair{"'{cpu-clock,page-faults'", "expected {EVENT,EVENT...}[@RATE]"}})
    expectRefused(std::string("-e ") + group, why, cmd, scratch);
  fs::remove_all(scratch);
}

// With -t the trace is made of a time-based event's samples (CPUTIME, REALTIME, cpu-clock,
// task-clock or cycles), as the reference traces, whatever order the events were given in:
// with page faults first (`grouped` touches pages in toucher only), the trace showed toucher
// alone, for a program that spends most of its time in spinner.
TEST(Sampling, TheTraceFollowsTheTimeBasedEvent) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-trace-event";
  fs::remove_all(scratch);
  const fs::path meas = scratch / "m";
  Outcome r = run(kBin + " -t -e perf::page-faults@512 -e CPUTIME@1000 -o " + meas.string() + " " + kWl + "grouped-gcc",
                  scratch / "run");
  ASSERT_EQ(r.status, 0) << r.err;
  Symbolizer sym;
  std::map<std::string, size_t> records;
  size_t all = 0;
  for (auto& e : fs::directory_iterator(meas)) {
    if (e.path().extension() != ".hpctrace") continue;
    TraceLeaves tr = traceLeaves(e.path(), sym);
    ASSERT_TRUE(tr.ok);
    for (auto& [time, fn] : tr.records) ++records[fn], ++all;
  }
  ASSERT_GT(all, 100u);
  // (Page faults' samples all lie in toucher; CPUTIME's mostly in spinner: a third of them
  // at least, whatever the machine's load adds to the faults' time.)
  EXPECT_GT(records["spinner"], all / 3) << "trace records in spinner, of " << all;
  fs::remove_all(scratch);
}

// Processes that end by a signal whose default action ends them, or that fork inside glibc.
TEST(Processes, EndedBySigpipeOrForkedByDaemonAreMeasured) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-processes";
  fs::remove_all(scratch);
  // `prog | head`: prog dies of SIGPIPE (141), as unmeasured, having written its profile.
  const fs::path pipeMeas = scratch / "pipe";
  Outcome piped = run("bash -c '" + kBin + " -o " + pipeMeas.string() +
                          " yes | head -2 >/dev/null; exit ${PIPESTATUS[0]}'",
                      scratch / "piped");
  EXPECT_EQ(piped.status, 141) << piped.err;
  int profiles = 0;
  for (auto& e : fs::directory_iterator(pipeMeas)) profiles += e.path().extension() == ".hpcrun";
  EXPECT_EQ(profiles, 1);
  std::string log;
  for (auto& e : fs::directory_iterator(pipeMeas))
    if (e.path().extension() == ".log") log += slurp(e.path());
  EXPECT_NE(log.find("finalized at fatal signal"), std::string::npos) << log;

  // daemon(3): its child has its own files, sampled (before: the parent's pid in its file
  // names, and no sampling timer: no sample); its parent's are written too.
  const std::string exe = kWl + "daemon-gcc";
  Outcome bare = run(exe, scratch / "bare");
  EXPECT_EQ(bare.out, "daemon: worked and exited\n");
  const fs::path meas = scratch / "daemon";
  Outcome prof = run(kBin + " -o " + meas.string() + " " + exe, scratch / "prof");
  EXPECT_EQ(prof.status, 0) << prof.err;
  EXPECT_EQ(prof.out, bare.out);
  auto at = prof.err.find("daemon pid ");
  ASSERT_NE(at, std::string::npos) << prof.err;
  int daemonPid = 0, parentPid = 0;
  ASSERT_EQ(std::sscanf(prof.err.c_str() + at, "daemon pid %d parent %d", &daemonPid, &parentPid), 2) << prof.err;
  // The daemon's own work, and (before: lost, glibc's parent leaves by its internal _exit)
  // the work of the process that called daemon(), each in the profile named with its pid.
  for (auto [pidNumber, who] : {std::pair{daemonPid, "the daemon"}, std::pair{parentPid, "daemon()'s caller"}}) {
    const std::string pid = "-" + std::to_string(pidNumber) + "-";
    fs::path profile;
    for (auto& e : fs::directory_iterator(meas))
      if (e.path().extension() == ".hpcrun" && e.path().filename().string().find(pid) != std::string::npos)
        profile = e.path();
    ASSERT_FALSE(profile.empty()) << "no profile named with " << who << "'s pid " << pid;
    auto p = hpc::hpcrun::read_profile(profile);
    ASSERT_TRUE(p.ok()) << p.status().message();
    double samples = 0;
    for (auto& n : p->nodes)
      for (auto& mv : n.values)
        if (mv.metric_id == 0) samples += mv.as_real();
    EXPECT_GT(samples, 0.1) << "CPUTIME seconds in " << who << "'s profile";
  }
  fs::remove_all(scratch);
}

// An exec that fails returns to the program: the measurement goes on in new files (before:
// the rest of the run was never measured). Execs that cannot start anything (no such file,
// nothing on PATH) do not end it at all; those that fail later (ENOEXEC, by execv and by
// fexecve, which had not been watched: the image before it was never written) end it and
// take it up again, threads created afterwards included.
TEST(Processes, WorkAfterAFailedExecIsMeasured) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-failed-exec";
  fs::remove_all(scratch);
  const std::string exe = kWl + "failed_exec-gcc 0.5";
  Outcome bare = run(exe, scratch / "bare");
  ASSERT_EQ(bare.status, 0) << bare.err;
  EXPECT_NE(bare.out.find("execv unknown format: Exec format error"), std::string::npos) << bare.out;
  EXPECT_NE(bare.out.find("fexecve unknown format: Exec format error"), std::string::npos) << bare.out;
  const fs::path meas = scratch / "m";
  Outcome prof = run(kBin + " -e CPUTIME@1000 -t -o " + meas.string() + " " + exe, scratch / "prof");
  EXPECT_EQ(prof.status, 0) << prof.err;
  EXPECT_EQ(prof.out, bare.out);
  int logs = 0, finalizedAtExec = 0, resumed = 0;
  for (auto& e : fs::directory_iterator(meas)) {
    if (e.path().extension() != ".log") continue;
    ++logs;
    const std::string log = slurp(e.path());
    finalizedAtExec += log.find("finalized at exec") != std::string::npos;
    resumed += log.find("exec failed (errno 8)") != std::string::npos;
  }
  EXPECT_EQ(logs, 3);  // the two missing programs did not end a generation
  EXPECT_EQ(finalizedAtExec, 2);
  EXPECT_EQ(resumed, 2);
  Analysis a = analyze(meas);
  // main and the thread alive across the execs in each generation, the thread after them in
  // the last.
  EXPECT_EQ(a.profiles, 7);
  EXPECT_EQ(a.traces, 7);
  EXPECT_GT(a.byLeaf["work_before"], 0.02);
  EXPECT_GT(a.byLeaf["work_after"], 0.02);
  EXPECT_GT(a.byLeaf["thread_work"], 0.02);
  // The thread started before the execs works after them: measured (before, its state was
  // written at the first exec and never taken up again).
  EXPECT_GT(a.byLeaf["across_after"], 0.02);
  EXPECT_GT(a.others, 0.02);  // thread_work on a thread of its own
  ASSERT_GT(a.total, 0);
  EXPECT_GE(a.complete / a.total, 0.99);
  fs::remove_all(scratch);
}

// vfork stays a vfork (it was made a fork: page tables copied per child, ENOMEM possible
// under strict overcommit, and the memory the child shares with its parent no longer shared):
// each child's writes are seen by the parent as unmeasured, and a child's exec, exit or failed
// exec ends nothing of the parent's measurement, whose work after them is measured.
TEST(Processes, VforkChildrenShareTheParentsMemoryAndLeaveItsMeasurement) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-vfork";
  fs::remove_all(scratch);
  for (const std::string cc : {"gcc", "clang"}) {
    const std::string exe = kWl + "vfork-" + cc + " 0.5";
    Outcome bare = run(exe, scratch / ("bare-" + cc));
    ASSERT_EQ(bare.status, 0) << bare.err;
    EXPECT_EQ(bare.out, "exec: status 0 shared 1\nexit: status 3 shared 2\nfailed exec: status 4 shared 4\nvfork: done 0\n");
    const fs::path meas = scratch / ("m-" + cc);
    Outcome prof = run(kBin + " -e CPUTIME@1000 -o " + meas.string() + " " + exe, scratch / ("prof-" + cc));
    EXPECT_EQ(prof.status, 0) << prof.err;
    EXPECT_EQ(prof.out, bare.out) << cc;
    int logs = 0, parentLogs = 0;
    for (auto& e : fs::directory_iterator(meas)) {
      if (e.path().extension() != ".log") continue;
      ++logs;
      const std::string name = e.path().filename().string();
      if (name.rfind("vfork-", 0) == 0) {
        ++parentLogs;
        EXPECT_NE(slurp(e.path()).find("finalized at exit"), std::string::npos) << slurp(e.path());
      }
    }
    EXPECT_EQ(parentLogs, 1) << cc;  // no child wrote one, nor ended the parent's
    EXPECT_EQ(logs, 2) << cc;        // and /bin/true, exec'd, is measured
    Analysis a = analyze(meas);
    EXPECT_GT(a.byLeaf["parent_before"], 0.05) << cc;
    EXPECT_GT(a.byLeaf["parent_after"], 0.05) << cc;
  }
  fs::remove_all(scratch);
}

// A cancelled thread's measurement ends as the cancellation unwinds its stack: its profile is
// written then (before, only as the process ended, its memory held until then), with the work
// it did, and its cleanup handlers run as unmeasured.
TEST(Processes, CancelledThreadsAreWrittenAsTheyEnd) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-cancel";
  fs::remove_all(scratch);
  const fs::path meas = scratch / "m";
  const std::string exe = kWl + "cancel-gcc 1 " + meas.string();
  Outcome bare = run(exe, scratch / "bare");
  ASSERT_EQ(bare.status, 0) << bare.err;
  EXPECT_EQ(bare.out, "cancelled 3, cleanup handlers run 3\n");
  fs::remove_all(meas);
  Outcome prof = run(kBin + " -e CPUTIME@1000 -o " + meas.string() + " " + exe, scratch / "prof");
  EXPECT_EQ(prof.status, 0) << prof.err;
  EXPECT_EQ(prof.out, bare.out);
  EXPECT_NE(prof.err.find("profiles before the end: 3"), std::string::npos) << prof.err;
  Analysis a = analyze(meas);
  EXPECT_EQ(a.profiles, 4);
  EXPECT_GT(a.byLeaf["cancelled_work"] + a.byLeaf["spin"], 0.3);
  EXPECT_GT(a.others, 0.3);
  fs::remove_all(scratch);
}

// A program built with AddressSanitizer runs under hpcrun as it does bare (before: "ASan
// runtime does not come first in initial library list", status 1 at once), its report and
// status its own; the sanitizer's death after the report writes the measurement, main's too.
TEST(Processes, SanitizedProgramsRunAndAreMeasured) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-sanitized";
  fs::remove_all(scratch);
  const std::string exe = kWl + "sanitized-gcc";
  Outcome bare = run(exe, scratch / "bare");
  ASSERT_EQ(bare.status, 1) << bare.err;
  ASSERT_EQ(bare.out, "threads done\n");
  ASSERT_NE(bare.err.find("ERROR: AddressSanitizer: heap-buffer-overflow"), std::string::npos) << bare.err;
  const fs::path meas = scratch / "m";
  Outcome prof = run(kBin + " -e CPUTIME@1000 -o " + meas.string() + " " + exe, scratch / "prof");
  EXPECT_EQ(prof.status, 1) << prof.err;
  EXPECT_EQ(prof.out, bare.out);
  EXPECT_NE(prof.err.find("ERROR: AddressSanitizer: heap-buffer-overflow"), std::string::npos) << prof.err;
  ASSERT_TRUE(fs::exists(meas));
  std::string log;
  for (auto& e : fs::directory_iterator(meas))
    if (e.path().extension() == ".log") log += slurp(e.path());
  EXPECT_NE(log.find("finalized at sanitizer report"), std::string::npos) << log;
  Analysis a = analyze(meas);
  EXPECT_EQ(a.profiles, 3);
  EXPECT_GT(a.byLeaf["sanitized_work"] + a.byLeaf["spin"], 0.05);
  EXPECT_GT(a.total - a.others, 0.02);  // main's own, written at the sanitizer's death
  fs::remove_all(scratch);
}

// Event ("" for hpcrun's default, CPUTIME at 200 Hz), compiler, pooled runs, scale per run.
using KnownAnswerCase = std::tuple<std::string, std::string, int, double>;
class KnownAnswer : public ::testing::TestWithParam<KnownAnswerCase> {};

// At 200 Hz a share measured from n samples has binomial noise sqrt(p(1-p)/n): about 1.2
// points (1 sigma) on the 50% share for an 8 s pool, which put 3 points only 2.5 sigma away and
// failed now and then. The default rate therefore pools about 22 s (4400 samples: 3 points is
// 3.9 sigma on the 50% share, more on the others), alternating the gcc and clang builds
// ("both"); 4 kHz needs one 2 s run (8000 samples). Each run's truth is weighted by its samples.
TEST_P(KnownAnswer, WithinThreePoints) {
  auto [event, cc, runs, scale] = GetParam();
  fs::path scratch = fs::temp_directory_path() / ("hpcrun-test-known-" + cc + std::to_string(event.size()));
  double truth[3] = {0, 0, 0}, f = 0, t = 0, w = 0;
  for (int i = 0; i < runs; ++i) {
    fs::remove_all(scratch);
    std::string ev = event.empty() ? "" : " -e " + event;
    std::string build = cc != "both" ? cc : i % 2 ? "clang" : "gcc";
    Outcome r = run(kBin + " -o " + (scratch / "m").string() + ev + " " + kWl + "known_answer-" + build + " " +
                        std::to_string(scale),
                    scratch / "run");
    ASSERT_EQ(r.status, 0);
    // REALTIME counts time spent waiting for a CPU (another test's load) where the thread was
    // preempted: its truth is the wall-clock split.
    double one[3];
    bool wall = event.rfind("REALTIME", 0) == 0;
    size_t at = wall ? r.err.find("wall ") : r.err.find("truth ");
    ASSERT_NE(at, std::string::npos) << r.err;
    ASSERT_EQ(std::sscanf(r.err.c_str() + at, wall ? "wall %lf %lf %lf" : "truth %lf %lf %lf", &one[0], &one[1], &one[2]), 3)
        << r.err;
    Analysis a = analyze(scratch / "m");
    double rf = a.byLeaf["fifty"], rt = a.byLeaf["thirty"], rw = a.byLeaf["twenty"];
    for (int k = 0; k < 3; ++k) truth[k] += one[k] * (rf + rt + rw);
    f += rf, t += rt, w += rw;
  }
  double sum = f + t + w;
  ASSERT_GT(sum, 0);
  for (double& x : truth) x /= sum;
  EXPECT_NEAR(f / sum, truth[0], 0.03) << "pooled " << sum << " (metric units) over " << runs << " runs";
  EXPECT_NEAR(t / sum, truth[1], 0.03) << "pooled " << sum << " (metric units) over " << runs << " runs";
  EXPECT_NEAR(w / sum, truth[2], 0.03) << "pooled " << sum << " (metric units) over " << runs << " runs";
  fs::remove_all(scratch);
}

INSTANTIATE_TEST_SUITE_P(HighRate, KnownAnswer,
                         ::testing::Combine(::testing::Values("REALTIME@250", "perf::cpu-clock@f4000"),
                                            ::testing::Values("gcc", "clang"), ::testing::Values(1),
                                            ::testing::Values(2.0)));
INSTANTIATE_TEST_SUITE_P(DefaultRate, KnownAnswer,
                         ::testing::Combine(::testing::Values(""), ::testing::Values("both"), ::testing::Values(4),
                                            ::testing::Values(5.0)));

TEST(Conformance, ReferenceCheckerAcceptsOurDirectories) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-conformance";
  fs::remove_all(scratch);
  std::string checker = "PYTHONPATH=" HPC_SHARED_DIR "/conformance /usr/bin/python3 -m hpctesttool test produces-profiles ";
  for (bool trace : {false, true}) {
    fs::path m = scratch / (trace ? "t" : "p");
    Outcome r = run(kBin + (trace ? " -t" : "") + " -o " + m.string() + " " + kWl + "omp-gcc 0.3", scratch / "run");
    ASSERT_EQ(r.status, 0);
    Outcome c = run(checker + (trace ? "-T " : "") + m.string() + " '^NODE .* THREAD [0-9a-f]+/[0-9a-f]+:logical$' 'THREAD 0/0' 'THREAD 2/2'",
                scratch / "check");
    EXPECT_EQ(c.status, 0) << c.out << c.err;
  }
  fs::remove_all(scratch);
}

TEST(Launcher, RejectsBadEventsBeforeStarting) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-launcher";
  for (const char* ev : {"FOO", "CPUTIME@abc", "REALTIME@f100", "perf::no-such-event", "CPUTIME@0"}) {
    Outcome r = run(kBin + " -e '" + ev + "' /bin/echo started", scratch);
    EXPECT_EQ(r.status, 2) << ev;
    EXPECT_EQ(r.out, "") << ev;
    EXPECT_NE(r.err.find("hpcrun:"), std::string::npos) << ev;
  }
  // A program that is not there, or cannot be run: the shell's statuses (127, 126), the
  // program named.
  Outcome missing = run(kBin + " -o " + (scratch / "m1").string() + " /no/such/program", scratch);
  EXPECT_EQ(missing.status, 127);
  EXPECT_NE(missing.err.find("hpcrun: cannot run '/no/such/program': No such file or directory"), std::string::npos)
      << missing.err;
  const fs::path plain = scratch / "not-executable";
  std::ofstream(plain) << "data\n";
  fs::permissions(plain, fs::perms::owner_read | fs::perms::owner_write);
  Outcome denied = run(kBin + " -o " + (scratch / "m2").string() + " " + plain.string(), scratch);
  EXPECT_EQ(denied.status, 126);
  EXPECT_NE(denied.err.find("hpcrun: cannot run '" + plain.string() + "': Permission denied"), std::string::npos)
      << denied.err;
  Outcome l = run(kBin + " -L", scratch);
  EXPECT_EQ(l.status, 0);
  EXPECT_NE(l.out.find("CPUTIME"), std::string::npos);
  EXPECT_NE(l.out.find("perf::cpu-clock"), std::string::npos);
  fs::remove_all(scratch);
}

// Two events of one period on a busy thread fire together: the guard against samples that
// cost more than their period is kept per event (one rule for all events dropped a third of
// both events' samples as blocked, and their totals with them).
TEST(Sampling, TwoEventsOfOnePeriodAreBothSampled) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-two-events";
  fs::remove_all(scratch);
  const std::string exe = kWl + "callheavy-gcc 1";
  Outcome bare = run(exe, scratch / "bare");
  ASSERT_EQ(bare.status, 0);
  const fs::path meas = scratch / "m";
  Outcome r = run(kBin + " -o " + meas.string() + " -e CPUTIME -e REALTIME " + exe, scratch / "run");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, bare.out);
  double total[2] = {0, 0};
  for (auto& e : fs::directory_iterator(meas)) {
    if (e.path().extension() != ".hpcrun") continue;
    auto p = hpc::hpcrun::read_profile(e.path());
    ASSERT_TRUE(p.ok()) << p.status().message();
    ASSERT_EQ(p->metrics.size(), 2u);
    for (auto& n : p->nodes)
      for (auto& mv : n.values)
        if (mv.metric_id < 2) total[mv.metric_id] += mv.as_real();
  }
  const uint64_t blocked = logCount(meas, "blocked: ");
  const uint64_t samples = logCount(meas, "SUMMARY: samples: ");
  EXPECT_LE(blocked, samples / 20) << "samples blocked of " << samples;
  // Each event sees the program's time, as either alone would: its CPU time (a busy single
  // thread), and at least that in wall-clock time (more where other tests' load took the CPU).
  // The measured run's own CPU time is the reference: under CI's load the bare run's differed
  // from it by more than the tolerance (CPUTIME 0.540 s against a bare 0.454).
  EXPECT_NEAR(total[0], r.cpu, 0.15 * r.cpu) << "CPUTIME (the bare run used " << bare.cpu << " s)";
  EXPECT_GE(total[1], 0.85 * r.cpu) << "REALTIME (the bare run used " << bare.cpu << " s)";
  fs::remove_all(scratch);
}

// 800 threads one after another, each using 0.4 ms of CPU, at a period of 1 ms: each thread's
// first period is drawn from (0, period], so 40 % of them are sampled once, each sample a
// period: their time in all is what they used (0.92-1.03 of it in four runs here). With a whole first period none was ever
// sampled (perf::task-clock@1000000 saw none of 400 such threads' 0.16 s; so did @f1000, the
// kernel's own fixed period for its clock events at a frequency, now ours). CPUTIME's
// timers are advanced at the kernel's tick (4 ms here), so threads shorter than a tick stay
// mostly unseen there (src/measurement/README.md): not checked.
TEST(Sampling, ShortThreadsCountWhatTheyCost) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-short-threads";
  fs::remove_all(scratch);
  const std::string cmd = kWl + "short_threads-gcc 800";
  int k = 0;
  for (const char* ev : {"perf::task-clock@1000000", "perf::task-clock@f1000", "REALTIME@1000", "CPUTIME@1000"}) {
    const bool perf = std::string(ev).rfind("perf::", 0) == 0;
    const bool cpu = perf || std::string(ev).rfind("CPUTIME", 0) == 0;  // CPU time, not wall time
    fs::path meas = scratch / ("m" + std::to_string(k++));
    Outcome r = run(kBin + " -e " + ev + " -o " + meas.string() + " " + cmd, scratch / "run");
    if (perf && r.status == 2 && r.err.find("hpcrun:") != std::string::npos) {
      ADD_FAILURE() << "perf::task-clock unavailable: " << r.err;
      continue;
    }
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "short threads: 800\n");
    auto at = r.err.find("thread cpu us: ");
    ASSERT_NE(at, std::string::npos) << r.err;
    const double used = std::stod(r.err.substr(at + 15)) * 1e-6;  // seconds
    Analysis a = analyze(meas);
    EXPECT_EQ(a.profiles, 801) << ev;
    const double seen = perf ? a.others * 1e-9 : a.others;  // task-clock counts nanoseconds
    // CPU time: within 25 % (about 320 samples, a standard deviation near 4 %; CPUTIME's
    // threads, each shorter than the kernel's tick, credited what their samples did not stand
    // for: 14 samples, 0.014 s of 0.32, before); wall time at least the CPU time less 30 %,
    // at most three times it (a loaded machine).
    EXPECT_GT(seen, (cpu ? 0.75 : 0.7) * used) << ev << ": threads used " << used << " s";
    EXPECT_LT(seen, (cpu ? 1.25 : 3.0) * used) << ev << ": threads used " << used << " s";
  }
  // The same for processes shorter than a tick: 40 runs of a main of 2 ms under CPUTIME.
  const fs::path meas = scratch / "processes";
  double used = 0;
  for (int i = 0; i < 40; ++i) {
    Outcome r = run(kBin + " -e CPUTIME@1000 -o " + meas.string() + " " + kWl + "short_main-gcc", scratch / "run");
    ASSERT_EQ(r.status, 0) << r.err;
    auto at = r.err.find("main cpu us: ");
    ASSERT_NE(at, std::string::npos) << r.err;
    used += std::stod(r.err.substr(at + 13)) * 1e-6;
  }
  Analysis a = analyze(meas);
  EXPECT_EQ(a.profiles, 40);
  EXPECT_GT(a.total, 0.75 * used) << "mains used " << used;
  EXPECT_LT(a.total, 1.25 * used) << "mains used " << used;
  fs::remove_all(scratch);
}

// hpctoolkit.h's switch (workload `sampling_switch.c`, linked with lib/libhpctoolkit.so):
// hpctoolkit_sampling_stop() pauses sampling, hpctoolkit_sampling_start() resumes it, and
// under hpcrun -ds there is none until the first start. Run bare, the library's functions
// do nothing (the reference's options -ds and its API; before, hpcrun rejected -ds).
TEST(Sampling, TheApplicationSwitchesSamplingOnAndOff) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-sampling-switch";
  fs::remove_all(scratch);
  const std::string cmd = kWl + "sampling_switch-gcc 1";
  Outcome bare = run(cmd, scratch / "bare");
  ASSERT_EQ(bare.status, 0) << bare.err;
  EXPECT_EQ(bare.out, "active: before 0, during 0, paused 0 0\n");
  for (const bool delay : {false, true}) {
    const fs::path meas = scratch / (delay ? "ds" : "plain");
    Outcome r = run(kBin + (delay ? " -ds" : "") + " -o " + meas.string() + " " + cmd, scratch / "run");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, delay ? "active: before 0, during 1, paused 0 0\n" : "active: before 1, during 1, paused 0 0\n");
    Analysis a = analyze(meas);
    EXPECT_GT(a.byLeaf["during"], 0.03) << delay;
    EXPECT_GT(a.byLeaf["after"], 0.03) << delay;
    EXPECT_EQ(a.byLeaf["paused"], 0) << delay;
    if (delay) EXPECT_EQ(a.byLeaf["before"], 0);
    else EXPECT_GT(a.byLeaf["before"], 0.03);
  }
  fs::remove_all(scratch);
}

// hpcrun -nu (the reference's --no-unwind): a flat profile, each sample at the interrupted
// function alone below the thread's root, where a deep recursion's samples lie thousands of
// frames down; the time is the same.
TEST(Sampling, NoUnwindMakesAFlatProfile) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-no-unwind";
  fs::remove_all(scratch);
  const std::string cmd = kWl + "recursion-gcc 0.3";
  for (const bool flat : {false, true}) {
    const fs::path meas = scratch / (flat ? "nu" : "full");
    Outcome r = run(kBin + (flat ? " -nu" : "") + " -o " + meas.string() + " " + cmd, scratch / "run");
    ASSERT_EQ(r.status, 0) << r.err;
    size_t deepest = 0;
    double total = 0;
    forEachValuedNode(meas, [&](ProfileView& p, const hpc::hpcrun::CctNode& n, double v) {
      size_t depth = 0;
      for (const hpc::hpcrun::CctNode* f = &n; f->parent_id; f = p.byId[f->parent_id]) ++depth;
      deepest = std::max(deepest, depth);
      total += v;
    });
    EXPECT_NEAR(total, r.cpu, 0.25 * r.cpu) << flat;
    if (flat) EXPECT_LE(deepest, 2u) << "the leaf below the thread's root";
    else EXPECT_GT(deepest, 100u);
  }
  fs::remove_all(scratch);
}

// hpcrun -f (the reference's --process-fraction): each process measured with probability
// FRAC. With 0 none writes anything (no profile, trace or log) and the program runs as bare;
// with 1/2 over 24 processes (a shell running a program 24 times), a share of them: each
// process's draw from the run's seed and its pid.
TEST(Processes, AFractionOfThemIsMeasured) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-fraction";
  fs::remove_all(scratch);
  const std::string cmd = kWl + "recursion-gcc 0.05";
  Outcome bare = run(cmd, scratch / "bare");
  const fs::path none = scratch / "none";
  Outcome r = run(kBin + " -f 0 -t -o " + none.string() + " " + cmd, scratch / "run");
  EXPECT_EQ(r.status, bare.status);
  EXPECT_EQ(r.out, bare.out);
  size_t files = 0;
  for (auto& e : fs::directory_iterator(none)) files += e.is_regular_file();
  EXPECT_EQ(files, 0u) << "a process not drawn writes nothing";
  const fs::path some = scratch / "some";
  r = run(kBin + " -fp 1/2 -o " + some.string() + " bash -c 'for i in $(seq 24); do " + kWl +
              "short_main-gcc >/dev/null; done'",
          scratch / "run");
  ASSERT_EQ(r.status, 0) << r.err;
  size_t measured = 0;
  for (auto& e : fs::directory_iterator(some))
    measured += e.path().extension() == ".hpcrun" && e.path().filename().string().rfind("short_main-gcc-", 0) == 0;
  EXPECT_GE(measured, 3u);  // binomial(24, 1/2) outside [3, 21]: 4e-5
  EXPECT_LE(measured, 21u);
  const fs::path all = scratch / "all";
  r = run(kBin + " --process-fraction=1 -o " + all.string() + " " + cmd, scratch / "run");
  EXPECT_EQ(analyze(all).profiles, 1);
  fs::remove_all(scratch);
}

// hpcrun -m 1 (the reference's --merge-threads): a thread that starts after another ended
// takes up its state, so threads that do not overlap make one profile and one trace: 800
// threads one after another, 2 profiles (main's and theirs) where there were 801, the same
// CPU time seen; 20 timer callbacks, 2 (a few more where callbacks overlap); 504 threads
// partly at once, fewer profiles than threads, every path complete, the same total. hpcprof
// reads the merged traces.
TEST(Threads, MergedThreadsShareProfiles) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-merge-threads";
  fs::remove_all(scratch);
  {
    const fs::path meas = scratch / "short";
    Outcome r = run(kBin + " -m 1 -t -e CPUTIME@1000 -o " + meas.string() + " " + kWl + "short_threads-gcc 800",
                    scratch / "run");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "short threads: 800\n");
    auto at = r.err.find("thread cpu us: ");
    ASSERT_NE(at, std::string::npos) << r.err;
    const double used = std::stod(r.err.substr(at + 15)) * 1e-6;
    Analysis a = analyze(meas);
    EXPECT_EQ(a.profiles, 2);
    EXPECT_EQ(a.traces, 2);
    EXPECT_GT(a.others, 0.75 * used);
    EXPECT_LT(a.others, 1.25 * used);
    Outcome prof = run(std::string(HPC_BINARY_DIR) + "/bin/hpcprof -o " + (scratch / "short.d").string() + " " + meas.string(), scratch / "prof");
    EXPECT_EQ(prof.status, 0) << prof.err;
  }
  {
    const fs::path meas = scratch / "timer";
    Outcome r = run(kBin + " -m 1 -o " + meas.string() + " " + kWl + "timer_thread-gcc 20", scratch / "run");
    ASSERT_EQ(r.status, 0) << r.err;
    // 2 (main's and the callbacks'), one more wherever a callback outlasted its period on a
    // loaded machine and the next ran beside it; 21 unmerged.
    EXPECT_GE(analyze(meas).profiles, 2);
    EXPECT_LE(analyze(meas).profiles, 4);
  }
  {
    const std::string cmd = kWl + "threads-gcc 1";
    Outcome bare = run(cmd, scratch / "bare");
    const fs::path meas = scratch / "threads";
    Outcome r = run(kBin + " -m 1 -e REALTIME@1000 -o " + meas.string() + " " + cmd, scratch / "run");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, bare.out);
    Analysis a = analyze(meas);
    EXPECT_LT(a.profiles, 505);
    EXPECT_GE(a.profiles, 2);
    ASSERT_GT(a.total, 0);
    EXPECT_GE(a.complete / a.total, 0.99);
  }
  fs::remove_all(scratch);
}

// The reference's other options are accepted (its scripts run): -r (simple recursion kept
// whole: Paths.SimpleRecursionIsFoldedUnlessRetained), -tt (-t with GPU launches traced: OpenCL.LaunchesAre...), -m, -mp, and -ms, -lm,
// --disable-gprof, -dd, -md (without effect);
// bad values are refused before the program starts; PAPI events are named as missing.
// Before, every one was "unknown option".
TEST(Launcher, AcceptsTheReferencesOptions) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-reference-options";
  fs::remove_all(scratch);
  const std::string cmd = kWl + "recursion-gcc 0.05";
  Outcome bare = run(cmd, scratch / "bare");
  int k = 0;
  for (const char* opts : {"-r", "--retain-recursion", "-tt", "--ttrace", "-m 0", "--merge-threads 1", "-ms 4M",
                           "--memsize 4096", "-lm 80K", "--low-memsize 80k", "-mp 0.1", "--memleak-prob 1/10",
                           "--disable-gprof", "-dd UNW", "--dynamic-debug ALL", "-md", "--monitor-debug"}) {
    const fs::path meas = scratch / ("m" + std::to_string(k++));
    Outcome r = run(kBin + " " + opts + " -o " + meas.string() + " " + cmd, scratch / "run");
    EXPECT_EQ(r.status, bare.status) << opts << ": " << r.err;
    EXPECT_EQ(r.out, bare.out) << opts;
    EXPECT_EQ(analyze(meas).profiles, 1) << opts;
    if (std::string(opts).find("tt") != std::string::npos) {
      EXPECT_EQ(analyze(meas).traces, 1) << opts;
    }
  }
  for (auto [opts, why] : {std::pair{"-m 2", "--merge-threads takes 0 or 1"}, std::pair{"-ms 4X", "-ms needs a size"},
                           std::pair{"-f 2", "--process-fraction needs a number from 0 to 1"},
                           std::pair{"-mp x", "--memleak-prob needs a number"},
                           std::pair{"-e MEMLEAK@10", "event 'MEMLEAK' takes no period"},
                           std::pair{"-e PAPI_TOT_CYC", "this hpcrun has no PAPI source"},
                           std::pair{"-e papi::CYCLES", "this hpcrun has no PAPI source"}})
    expectRefused(opts, why, cmd, scratch);
  fs::remove_all(scratch);
}

// hpcrun -d: each process waits for a debugger, which lets it go on by calling
// hpcrun_continue(), as the reference's manual says (or by setting hpcrunDebugWait to 0).
// Skipped without gdb.
TEST(Launcher, DebugWaitEndsAtHpcrunContinue) {
  if (std::system("command -v gdb >/dev/null 2>&1") != 0) GTEST_SKIP() << "no gdb";
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-debug-wait";
  fs::remove_all(scratch);
  fs::create_directories(scratch);
  const std::string err = (scratch / "err").string(), out = (scratch / "out").string();
  {
    std::ofstream sh(scratch / "attach.sh");
    sh << "(" << kBin << " -d -o " << (scratch / "m").string() << " " << kWl << "short_main-gcc >" << out << " 2>"
       << err << "; echo status=$? >>" << out << ") &\n"
       << "for i in $(seq 200); do grep -q 'waiting for a debugger' " << err << " && break; sleep 0.05; done\n"
       << "pid=$(sed -n 's/.*waiting for a debugger: pid \\([0-9]*\\).*/\\1/p' " << err << " | head -1)\n"
       << "gdb -q -batch -p \"$pid\" -ex 'call (void)hpcrun_continue()' -ex detach >/dev/null 2>&1\n"
       // Still waiting 10 s on: killed, so that the test fails rather than hangs.
       << "for i in $(seq 100); do kill -0 \"$pid\" 2>/dev/null || break; sleep 0.1; done\n"
       << "kill -9 \"$pid\" 2>/dev/null; wait\n";
  }
  Outcome r = run("bash " + (scratch / "attach.sh").string(), scratch / "run");
  EXPECT_NE(slurp(err).find("call hpcrun_continue()"), std::string::npos) << slurp(err);
  EXPECT_NE(slurp(out).find("status=0"), std::string::npos) << slurp(out) << r.err;
  EXPECT_EQ(analyze(scratch / "m").profiles, 1);
  fs::remove_all(scratch);
}

// In a batch job hpcrun names its default directory with the job's id, as the reference's
// does (hpctoolkit-COMMAND-measurements-JOBID), and writes the id in each profile's header;
// hpcprof names the database alike. Before, every job's run went into the same directory.
TEST(Launcher, DefaultDirectoryNamesTheBatchJob) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-job-id";
  fs::remove_all(scratch);
  fs::create_directories(scratch / "cwd");
  const std::string bin = std::string(HPC_BINARY_DIR) + "/bin/";
  const std::string clean = "env -u SLURM_JOB_ID -u PBS_JOBID -u LSB_JOBID -u COBALT_JOBID -u FLUX_JOB_ID -u JOB_ID "
                            "-u LOAD_STEP_ID ";
  for (auto [var, id, named] : {std::tuple{"SLURM_JOB_ID", "4242", "4242"},
                                std::tuple{"PBS_JOBID", "77.pbs01.example", "77.pbs01.example"},
                                std::tuple{"LSB_JOBID", "9 9/x", "9_9_x"}}) {
    Outcome r = run("cd " + (scratch / "cwd").string() + " && " + clean + var + "='" + id + "' " + kBin + " " + kWl +
                        "short_main-gcc",
                    scratch / "run");
    ASSERT_EQ(r.status, 0) << r.err;
    const fs::path meas = scratch / "cwd" / (std::string("hpctoolkit-short_main-gcc-measurements-") + named);
    ASSERT_TRUE(fs::is_directory(meas)) << var;
    size_t profiles = 0;
    for (auto& e : fs::directory_iterator(meas)) {
      if (e.path().extension() != ".hpcrun") continue;
      auto p = hpc::hpcrun::read_profile(e.path());
      ASSERT_TRUE(p.ok());
      const std::string* job = p->header_value("job-id");
      ASSERT_TRUE(job);
      EXPECT_EQ(*job, named);
      ++profiles;
    }
    EXPECT_EQ(profiles, 1u);
  }
  Outcome prof = run("cd " + (scratch / "cwd").string() + " && " + bin + "hpcprof hpctoolkit-short_main-gcc-measurements-4242",
                     scratch / "prof");
  ASSERT_EQ(prof.status, 0) << prof.err;
  EXPECT_TRUE(fs::is_directory(scratch / "cwd" / "hpctoolkit-short_main-gcc-database-4242"));
  // Outside a job: no id.
  Outcome r = run("cd " + (scratch / "cwd").string() + " && " + clean + kBin + " " + kWl + "short_main-gcc",
                  scratch / "run");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::is_directory(scratch / "cwd" / "hpctoolkit-short_main-gcc-measurements"));
  fs::remove_all(scratch);
}

// Rust-like signal stacks of 8 KiB (workload `small_altstack.c`): a sample that came while
// the application's stack-overflow handler ran on it pushed its signal frame (some 3.5 KiB
// with AVX-512 state) over the fault's and the handler's, past the stack's end: the process
// died of SIGSEGV instead of SIGABRT with no profile (CI: 1 run in 4 at REALTIME@100 on a
// loaded machine). The application's handlers on such a stack now run unsampled. Ten runs
// at 10 kHz, each as bare.
TEST(Signals, SamplesLeaveTheApplicationsSmallSignalStackRoom) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-small-altstack";
  fs::remove_all(scratch);
  for (int i = 0; i < 10; ++i) {
    const fs::path meas = scratch / ("m" + std::to_string(i));
    Outcome r = run(kBin + " -e REALTIME@100 -o " + meas.string() + " " + kWl + "small_altstack-" +
                        (i % 2 ? "clang" : "gcc") + " 0.3",
                    scratch / "run");
    EXPECT_EQ(r.status, 128 + SIGABRT) << "run " << i << ": " << r.err;
    EXPECT_EQ(analyze(meas).profiles, 2) << "run " << i;
  }
  fs::remove_all(scratch);
}

// A SIGEV_THREAD timer's callbacks run on threads glibc creates inside libc (past the
// pthread_create wrapper) with every signal blocked: 20 callbacks of 8 ms went unmeasured
// (one profile, no sample). Each callback thread now has its profile, with samples: under
// REALTIME at least three quarters of the callbacks' CPU time and at most 1.25 times their
// elapsed time; under CPUTIME at least half of their CPU time (its timers expire at the
// kernel's 4 ms tick: a callback of two ticks loses what it ran after its last one, 0.12 of
// 0.16 s here).
TEST(Threads, TimerCallbackThreadsAreMeasured) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-timer-threads";
  fs::remove_all(scratch);
  const std::string cmd = kWl + "timer_thread-gcc 20";
  Outcome bare = run(cmd, scratch / "bare");
  ASSERT_EQ(bare.status, 0) << bare.err;
  int k = 0;
  for (const char* ev : {"CPUTIME@1000", "REALTIME@1000"}) {
    const fs::path meas = scratch / ("m" + std::to_string(k++));
    Outcome r = run(kBin + " -e " + ev + " -o " + meas.string() + " " + cmd, scratch / "run");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, bare.out);
    auto at = r.err.find("callbacks: ");
    ASSERT_NE(at, std::string::npos) << r.err;
    const int callbacks = std::stoi(r.err.substr(at + 11));
    at = r.err.find("callback cpu us: ");
    ASSERT_NE(at, std::string::npos) << r.err;
    const double used = std::stod(r.err.substr(at + 17)) * 1e-6;
    at = r.err.find("callback wall us: ");
    ASSERT_NE(at, std::string::npos) << r.err;
    const double elapsed = std::stod(r.err.substr(at + 18)) * 1e-6;
    Analysis a = analyze(meas);
    EXPECT_EQ(a.profiles, 1 + callbacks) << ev;
    // Sampled, not only credited (the sampling signal was blocked in these threads: no sample
    // at all); CPUTIME's tick makes about two samples a callback, fewer on a loaded machine
    // (16 for 20 callbacks in a CI run).
    EXPECT_GT(logCount(meas, "recorded: "), uint64_t(callbacks) / 4) << ev << ": samples in the callbacks";
    const bool cpu = std::string(ev).rfind("CPUTIME", 0) == 0;
    EXPECT_GT(a.others, (cpu ? 0.5 : 0.75) * used) << ev << ": callbacks used " << used << " s";
    // REALTIME counts a callback's waits for a core too: on a loaded machine its elapsed time,
    // not its CPU time, bounds it (a CI run saw 0.53 s for 0.17 s of CPU time). Each thread's
    // start and end around the callback add a little.
    EXPECT_LT(a.others, cpu ? 1.25 * used : 1.25 * elapsed + 0.002 * callbacks)
        << ev << ": callbacks used " << used << " s in " << elapsed << " s";
  }
  fs::remove_all(scratch);
}

// A message queue's SIGEV_THREAD notifications (mq_notify) run on threads glibc creates inside
// libc as a timer's callbacks do: before, unmeasured (one profile). Each now has its profile,
// with samples; under CPUTIME at least half of the callbacks' CPU time (the kernel's tick, as
// above).
TEST(Threads, MessageQueueNotificationThreadsAreMeasured) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-mq-threads";
  fs::remove_all(scratch);
  const std::string cmd = kWl + "mq_thread-gcc 20";
  Outcome bare = run(cmd, scratch / "bare");
  if (bare.status == 77) GTEST_SKIP() << "no POSIX message queues here: " << bare.err;
  ASSERT_EQ(bare.status, 0) << bare.err;
  const fs::path meas = scratch / "m";
  Outcome r = run(kBin + " -e CPUTIME@1000 -o " + meas.string() + " " + cmd, scratch / "run");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, bare.out);
  auto at = r.err.find("callbacks: ");
  ASSERT_NE(at, std::string::npos) << r.err;
  const int callbacks = std::stoi(r.err.substr(at + 11));
  at = r.err.find("callback cpu us: ");
  ASSERT_NE(at, std::string::npos) << r.err;
  const double used = std::stod(r.err.substr(at + 17)) * 1e-6;
  Analysis a = analyze(meas);
  EXPECT_EQ(callbacks, 20);
  EXPECT_EQ(a.profiles, 1 + callbacks);
  EXPECT_GT(logCount(meas, "recorded: "), uint64_t(callbacks) / 4) << "samples in the callbacks";
  EXPECT_GT(a.others, 0.5 * used) << "callbacks used " << used << " s";
  EXPECT_LT(a.others, 1.25 * used) << "callbacks used " << used << " s";
  fs::remove_all(scratch);
}

// A library opened with RTLD_DEEPBIND binds libc's pthread_create and write ahead of the
// preloaded runtime's: its thread went unmeasured (one profile) and its write uncounted. Its
// interposed imports are now pointed at the runtime's, bound now or lazily: the worker has its
// profile with deep_worker's time, and deep_writer's 12,345 bytes are counted.
TEST(Threads, DeepBoundLibrariesAreMeasured) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-deepbind";
  fs::remove_all(scratch);
  Symbolizer sym;
  for (const std::string cc : {"gcc", "clang"})
    for (const char* mode : {"now", "lazy"}) {
      SCOPED_TRACE(cc + " " + mode);
      const std::string cmd = kWl + "deepbind-" + cc + " 0.5 " + kWl + "libdeep-" + cc + ".so " + mode;
      Outcome bare = run(cmd, scratch / "bare");
      ASSERT_EQ(bare.status, 0) << bare.err;
      const fs::path meas = scratch / (cc + "-" + mode);
      Outcome r = run(kBin + " -e CPUTIME@1000 -e IO -o " + meas.string() + " " + cmd, scratch / "run");
      ASSERT_EQ(r.status, 0) << r.err;
      EXPECT_EQ(r.out, bare.out);
      Analysis a = analyze(meas);
      EXPECT_EQ(a.profiles, 2);
      std::map<std::string, double> time, written;
      for (auto [metric, into] : {std::pair{"CPUTIME (sec)", &time}, std::pair{"IO Bytes Written", &written}})
        forEachValuedNode(meas, [&](ProfileView& p, const hpc::hpcrun::CctNode& n, double v) {
          if (n.lm_id) (*into)[sym.name(p.lm[n.lm_id], n.lm_ip - 1)] += v;
        }, metric);
      EXPECT_EQ(written["deep_writer"], 12345);
      double spun = time["deep_worker"] + time["spin"];
      EXPECT_GT(spun, 0.5 * r.cpu) << "the deep-bound library's thread is measured";
    }
  fs::remove_all(scratch);
}

// CPUTIME's timers advance at the kernel's tick: at a period shorter than the tick each signal
// stands for several periods (its overruns), each sample weighs them all, and the log says
// so. Where the tick is as short as the period (HZ=1000) there is no such line to check, and
// the total is checked alone.
TEST(Sampling, TimerPeriodsShorterThanTheTickAreCreditedAndLogged) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-tick";
  fs::remove_all(scratch);
  fs::path meas = scratch / "m";
  Outcome r = run(kBin + " -e CPUTIME@1000 -o " + meas.string() + " " + kWl + "known_answer-gcc", scratch / "run");
  ASSERT_EQ(r.status, 0) << r.err;
  std::string log;
  for (auto& e : fs::directory_iterator(meas))
    if (e.path().extension() == ".log") log += slurp(e.path());
  Analysis a = analyze(meas);
  // The run's CPU time (about 1 s) in samples of 1 ms: within 10 %.
  EXPECT_NEAR(a.total, r.cpu, 0.1 * r.cpu) << log;
  const auto at = log.find("timer signals: ");
  if (at == std::string::npos) {
    EXPECT_GT(a.recorded, 0.8 * r.cpu * 1000) << "no overruns, yet fewer samples than periods: " << log;
  } else {
    std::istringstream in(log.substr(at + 15));
    uint64_t signals = 0, periods = 0;
    std::string word;
    in >> signals >> word >> periods;
    EXPECT_EQ(word, "for");
    EXPECT_GE(periods, signals + signals / 2);
    EXPECT_GE(signals, a.recorded + a.errant) << log;  // and those dropped, if any
    EXPECT_NEAR(double(periods) * 1e-3, a.total, 0.05 * a.total) << log;
  }
  fs::remove_all(scratch);
}

// An MPI launcher's rank, from whichever variable it sets (Open MPI, MPICH's PMI, PMIx as
// under srun, Slurm, MVAPICH), names the files and is the profile's RANK identifier; a
// process no launcher started has none (before, PMIx and MVAPICH ranks named the files but
// gave the profiles no RANK).
// -e IO's stdio wrappers are preloaded with -e IO only: in every other measurement they cost
// each of the program's stdio calls an extra call (a loop of short fputs ran 25 % slower under
// CPUTIME alone). The application's own LD_PRELOAD stays after ours.
TEST(Launcher, StdioWrappersOnlyWithIo) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-preload";
  fs::remove_all(scratch);
  auto preloadOf = [&](const std::string& opts) {
    Outcome r = run("LD_PRELOAD=libm.so.6 " + kBin + " -o " + (scratch / "m").string() + " " + opts + " /usr/bin/env",
                    scratch / "run");
    EXPECT_EQ(r.status, 0) << r.err;
    const std::string out = "\n" + r.out;  // the variable may come first
    const size_t at = out.find("\nLD_PRELOAD=");
    return at == std::string::npos ? std::string() : out.substr(at + 12, out.find('\n', at + 1) - at - 12);
  };
  const std::string plain = preloadOf("-e CPUTIME"), io = preloadOf("-e IO");
  EXPECT_NE(plain.find("libhpcrun.so"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("libhpcrun_io.so"), std::string::npos) << plain;
  EXPECT_NE(io.find("/libhpcrun.so "), std::string::npos) << io;
  EXPECT_NE(io.find("/libhpcrun_io.so libm.so.6"), std::string::npos) << io;
  fs::remove_all(scratch);
}

TEST(Launcher, MpiRanksFromEveryLaunchersVariable) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-ranks";
  fs::remove_all(scratch);
  int n = 0;
  for (const char* var : {"", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID", "MV2_COMM_WORLD_RANK"}) {
    const uint64_t rank = *var ? uint64_t(3 + n) : 0;
    const fs::path meas = scratch / ("m" + std::to_string(n++));
    const std::string env = *var ? std::string(var) + "=" + std::to_string(rank) + " " : "";
    Outcome r = run("env -u OMPI_COMM_WORLD_RANK -u PMI_RANK -u PMIX_RANK -u SLURM_PROCID -u MV2_COMM_WORLD_RANK " + env +
                        kBin + " -o " + meas.string() + " " + kWl + "recursion-gcc 0.05",
                    scratch / "run");
    ASSERT_EQ(r.status, 0) << var << ": " << r.err;
    int profiles = 0;
    for (auto& e : fs::directory_iterator(meas)) {
      if (e.path().extension() != ".hpcrun") continue;
      ++profiles;
      char want[16];
      std::snprintf(want, sizeof want, "-%06llu-", static_cast<unsigned long long>(rank));
      EXPECT_NE(e.path().filename().string().find(want), std::string::npos) << var << ": " << e.path();
      auto p = hpc::hpcrun::read_profile(e.path());
      ASSERT_TRUE(p.ok()) << p.status().message();
      int ranks = 0;
      for (auto& id : p->id_tuple)
        if (id.kind() == 2) {
          ++ranks;
          EXPECT_EQ(id.physical, rank) << var;
        }
      EXPECT_EQ(ranks, *var ? 1 : 0) << var;
    }
    EXPECT_EQ(profiles, 1) << var;
  }
  fs::remove_all(scratch);
}

// -a python hooks in through a sitecustomize module: Python's -S, -E and -I skip it, so the
// run would have no Python frame; said so. Options after the script, -c or -m are the
// program's, and -W/-X take a word: no warning there.
TEST(Launcher, WarnsWhenPythonSkipsTheSiteHook) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-python-site";
  fs::remove_all(scratch);
  int n = 0;
  for (auto [args, flag] : {std::pair{"-I -c 'print(7)'", 'I'}, std::pair{"-Es -c 'print(7)'", 'E'},
                            std::pair{"-S -c 'print(7)'", 'S'}, std::pair{"-c 'print(7)'", '\0'},
                            std::pair{"-W ignore -X utf8 -c 'print(7)' -I", '\0'}, std::pair{"-u -c 'print(7)' -S", '\0'}}) {
    Outcome r = run(kBin + " -a python -o " + (scratch / std::to_string(n++)).string() + " /usr/bin/python3 " + args,
                    scratch / "run");
    EXPECT_EQ(r.status, 0) << args << ": " << r.err;
    EXPECT_EQ(r.out, "7\n") << args;
    const std::string warning = std::string("hpcrun: warning: python's -") + flag + " keeps it from loading";
    if (flag) EXPECT_NE(r.err.find(warning), std::string::npos) << args << ": " << r.err;
    else EXPECT_EQ(r.err.find("warning"), std::string::npos) << args << ": " << r.err;
  }
  fs::remove_all(scratch);
}

TEST(Launcher, WarnsOfStaticPrograms) {
  // The reference's hpcrun cannot measure a static program either; ours says so and still
  // runs it (a static launcher's dynamic children are measured), its output and status its own.
  const fs::path program = kWl + "static_exit";
  if (!fs::exists(program)) GTEST_SKIP() << "no static workload on this architecture";
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-static";
  fs::remove_all(scratch);
  Outcome r = run(kBin + " -o " + (scratch / "m").string() + " " + program.string(), scratch);
  EXPECT_EQ(r.status, 7);
  EXPECT_EQ(r.out, "static program ran\n");
  EXPECT_NE(r.err.find("hpcrun: warning: '" + program.string() + "' cannot be measured: it is statically linked"),
            std::string::npos)
      << r.err;
  // Found on PATH as execvp finds it; a dynamic program gets no warning.
  Outcome onPath = run("PATH=" + program.parent_path().string() + ":$PATH " + kBin + " -o " +
                           (scratch / "m2").string() + " static_exit",
                       scratch);
  EXPECT_EQ(onPath.status, 7);
  EXPECT_NE(onPath.err.find("'static_exit' cannot be measured"), std::string::npos) << onPath.err;
  Outcome dynamic = run(kBin + " -o " + (scratch / "m3").string() + " /bin/echo fine", scratch);
  EXPECT_EQ(dynamic.status, 0);
  EXPECT_EQ(dynamic.out, "fine\n");
  EXPECT_EQ(dynamic.err.find("warning"), std::string::npos) << dynamic.err;
  // A set-user-ID program of another user runs in secure mode, LD_PRELOAD ignored: said so
  // (as root only: another user's file is needed).
  if (geteuid() == 0) {
    const fs::path suid = scratch / "suid";
    fs::copy_file(kWl + "recursion-gcc", suid);
    ASSERT_EQ(chown(suid.c_str(), 65534, 65534), 0);
    ASSERT_EQ(chmod(suid.c_str(), 04755), 0);
    Outcome r = run(kBin + " -o " + (scratch / "m-suid").string() + " " + suid.string() + " 0.05", scratch / "suid-run");
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("cannot be measured: it is set-user-ID"), std::string::npos) << r.err;
  }
  fs::remove_all(scratch);
}

// A daemon closes every descriptor past stderr, then opens its own files on the numbers.
// The runtime's log, traces and perf events must then neither write into those files nor
// close them (before: the log's and traces' last writes went into the application's stdout,
// and a thread's end closed the number its perf event had had), and must come out whole; the
// application's opens get the numbers they get unmeasured (libunwind's pipe and the runtime's
// files took the lowest ones before: "first open" was 5, 8 with a perf event).
TEST(Descriptors, AnApplicationClosingAndReusingEveryOneKeepsItsOutput) {
  fs::path scratch = fs::temp_directory_path() / "hpcrun-test-closes-fds";
  fs::remove_all(scratch);
  const std::string exe = kWl + "closes_fds-gcc";
  Outcome bare = run(exe, scratch / "bare");
  ASSERT_EQ(bare.status, 3);
  int dups = -1, written = -2;
  auto at = bare.out.find("descriptors: ");
  ASSERT_NE(at, std::string::npos) << bare.out;
  ASSERT_EQ(std::sscanf(bare.out.c_str() + at, "descriptors: %d, written through: %d", &dups, &written), 2);
  ASSERT_EQ(written, dups);
  ASSERT_GT(dups, 60);
  int n = 0;
  for (const char* ev : {"REALTIME@1000", "perf::task-clock@1000000"}) {
    const fs::path meas = scratch / ("m" + std::to_string(n++));
    Outcome prof = run(kBin + " -t -o " + meas.string() + " -e " + ev + " " + exe, scratch / "prof");
    if (std::string(ev).rfind("perf::", 0) == 0 && prof.status == 2 && prof.err.find("hpcrun:") != std::string::npos) {
      ADD_FAILURE() << "perf::task-clock unavailable: " << prof.err;
      continue;
    }
    EXPECT_EQ(prof.status, 3) << ev << ": " << prof.err;
    EXPECT_EQ(prof.out, bare.out) << ev;
    // The log's last lines, written after the application took its numbers back.
    std::string log;
    for (auto& e : fs::directory_iterator(meas))
      if (e.path().extension() == ".log") log += slurp(e.path());
    EXPECT_NE(log.find("SUMMARY: samples: "), std::string::npos) << ev << ": " << log;
    EXPECT_EQ(logCount(meas, "sample sources that failed to start: "), 0u) << ev;
    Analysis a = analyze(meas);
    EXPECT_EQ(a.profiles, 2) << ev;
    EXPECT_EQ(a.traces, 2) << ev;
    EXPECT_GT(a.recorded, 50u) << ev;
    // Each trace whole: a header and records after it, read back by the trace reader.
    for (auto& e : fs::directory_iterator(meas)) {
      if (e.path().extension() != ".hpctrace") continue;
      auto tr = hpc::hpcrun::read_trace(e.path());
      ASSERT_TRUE(tr.ok()) << e.path() << ": " << tr.status().message();
      EXPECT_GT(tr->records.size(), 10u) << e.path();
    }
  }
  // libunwind's own reader tests stack pages through a pipe on two descriptors, and closed
  // the application's numbers 768 and 769 (the pipe's) once reading them failed: the worker's
  // last samples land on stack pages not read before. Ours tests pages with process_vm_readv,
  // or with mincore where a seccomp filter refuses that call: whole paths either way.
  {
    Outcome bareSandboxed = run(exe + " 1 noreadv", scratch / "bare-noreadv");
    ASSERT_EQ(bareSandboxed.status, 3) << bareSandboxed.err;
    ASSERT_EQ(bareSandboxed.err, "");
    const fs::path meas = scratch / ("m" + std::to_string(n++));
    Outcome prof = run(kBin + " -o " + meas.string() + " -e REALTIME@1000 " + exe + " 1 noreadv", scratch / "prof");
    EXPECT_EQ(prof.status, 3) << prof.err;
    EXPECT_EQ(prof.out, bareSandboxed.out);
    Analysis a = analyze(meas);
    EXPECT_EQ(a.profiles, 2);
    EXPECT_GT(a.recorded, 50u);
    EXPECT_GT(a.complete, 0.95 * a.total) << "incomplete paths under the seccomp filter";
    EXPECT_GT(a.byLeaf["deep"], 0.1 * a.total) << "the worker's last work, at the bottom of deep frames";
  }
  // Out of descriptors (files opened until EMFILE) while a thread ends and before the
  // process exits: the log's descriptor is given up for each profile, and the log opened
  // again for its SUMMARY (before: no profile at all, and no SUMMARY).
  Outcome bareOut = run(exe + " 1 exhaust", scratch / "bare-exhaust");
  ASSERT_EQ(bareOut.status, 3);
  for (const char* ev : {"REALTIME@1000", "perf::task-clock@1000000"}) {
    const fs::path meas = scratch / ("m" + std::to_string(n++));
    // No traces: closing a trace frees a number for the profile after it.
    Outcome prof = run(kBin + " -o " + meas.string() + " -e " + ev + " " + exe + " 1 exhaust", scratch / "prof");
    EXPECT_EQ(prof.status, 3) << ev << ": " << prof.err;
    EXPECT_EQ(prof.out, bareOut.out) << ev;
    EXPECT_GT(logCount(meas, "SUMMARY: samples: "), 50u) << ev;
    Analysis a = analyze(meas);
    EXPECT_EQ(a.profiles, 2) << ev;
    EXPECT_GT(a.recorded, 50u) << ev;
  }
  fs::remove_all(scratch);
}

}  // namespace
