#include "process.hpp"

#include <dlfcn.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "gpu/gpu.hpp"
#include "io.hpp"
#include "loadmap.hpp"
#include "memleak.hpp"
#include "output.hpp"
#include "python.hpp"
#include "signals.hpp"
#include "sources.hpp"
#include "sys.hpp"
#include "unwind.hpp"
#include "waits.hpp"

// hpcrun -d: a debugger attached to the waiting process sets this to 0 to let it go on.
extern "C" {
__attribute__((visibility("default"), used)) volatile int hpcrunDebugWait = 1;
// What the reference's manual tells a debugger to call to let the process go on (hpcrun -d).
__attribute__((visibility("default"), used, noinline)) void hpcrun_continue() { hpcrunDebugWait = 0; }
}

namespace hpc::rt {

std::atomic<bool> gAppSampling{true};

bool processDrawn(int pid) {
  if (gConfig.processFraction >= 1) return true;
  if (gConfig.processFraction <= 0) return false;
  uint64_t x = gConfig.fractionSeed ^ (uint64_t(uint32_t(pid)) * 0x9e3779b97f4a7c15ull);
  x ^= x >> 30, x *= 0xbf58476d1ce4e5b9ull, x ^= x >> 27, x *= 0x94d049bb133111ebull, x ^= x >> 31;
  return double(x >> 11) * 0x1.0p-53 < gConfig.processFraction;
}

namespace {

bool gReady = false;

void parseConfig() {
  gpu::configure();
  const char* list = getenv("HPCRUN_EVENT_LIST");
  // With only a GPU event, no CPU sample source (the launcher passes an empty list).
  if (!list || !*list) list = gpu::enabled() ? "" : "CPUTIME@5000";
  measurement::forEachEvent(list, [](const char* e, size_t n) {
    if (gConfig.nEvents == kMaxEvents) return;
    EventSpec& ev = gConfig.events[gConfig.nEvents];
    if (const char* err = measurement::parseEvent(e, n, ev)) {
      char buf[256];
      Text t(buf, sizeof buf);
      t.str("ignoring event '").str(e, n).str("': ").str(err);
      complain(t.c_str());
      return;
    }
    // A member's leader: a sampled perf event before it (an event ignored above shifts the
    // indices: then the member is ignored too).
    if (ev.member && (ev.leader >= gConfig.nEvents || gConfig.events[ev.leader].kind != SourceKind::Perf ||
                      gConfig.events[ev.leader].member)) {
      char buf[256];
      Text t(buf, sizeof buf);
      t.str("ignoring event '").str(e, n).str("': its counter group's leader is not a sampled perf event");
      complain(t.c_str());
      return;
    }
    ++gConfig.nEvents;
  });
  {
    auto timeBased = [](const EventSpec& ev) {
      if (ev.kind == SourceKind::CpuTime || ev.kind == SourceKind::RealTime) return true;
      if (ev.kind != SourceKind::Perf || ev.member) return false;
      return (ev.perfType == PERF_TYPE_SOFTWARE &&
              (ev.perfConfig == PERF_COUNT_SW_CPU_CLOCK || ev.perfConfig == PERF_COUNT_SW_TASK_CLOCK)) ||
             (ev.perfType == PERF_TYPE_HARDWARE &&
              (ev.perfConfig == PERF_COUNT_HW_CPU_CYCLES || ev.perfConfig == PERF_COUNT_HW_REF_CPU_CYCLES));
    };
    unsigned sampled = gConfig.nEvents, timed = gConfig.nEvents;
    for (unsigned i = gConfig.nEvents; i-- > 0;) {
      const EventSpec& ev = gConfig.events[i];
      if (!isCounted(ev.kind) && !ev.member) sampled = i;
      if (timeBased(ev)) timed = i;
    }
    gConfig.traceEvent = timed < gConfig.nEvents ? timed : sampled < gConfig.nEvents ? sampled : 0;
  }
  const char* tr = getenv("HPCRUN_TRACE");
  gConfig.trace = tr && (tr[0] == '1' || tr[0] == '2');
  gConfig.launchTrace = tr && tr[0] == '2';
  if (const char* f = getenv("HPCRUN_PROCESS_FRACTION"); f && *f) {
    gConfig.processFraction = strtod(f, nullptr);
    if (const char* s = getenv("HPCRUN_FRACTION_SEED")) gConfig.fractionSeed = strtoull(s, nullptr, 16);
  }
  if (const char* d = getenv("HPCRUN_DELAY_SAMPLING"); d && d[0] == '1') gAppSampling.store(false);
  if (const char* nu = getenv("HPCRUN_NO_UNWIND"); nu && nu[0] == '1') gConfig.noUnwind = true;
  if (const char* r = getenv("HPCRUN_RETAIN_RECURSION"); r && r[0] == '1') gConfig.retainRecursion = true;
  if (const char* j = getenv("HPCRUN_JOB_ID"))
    for (size_t k = 0; j[k] && k + 1 < sizeof gConfig.jobId; ++k) gConfig.jobId[k] = j[k];
  if (const char* m = getenv("HPCRUN_MERGE_THREADS"); m && m[0] == '1') gConfig.mergeThreads = true;
  if (const char* uc = getenv("HPCRUN_UNWIND_CACHE"))
    gConfig.unwindCache = uc[0] == '0'   ? UnwindCacheMode::Off
                          : uc[0] == 'v' ? UnwindCacheMode::Verify
                                         : UnwindCacheMode::On;
  gConfig.sampleSignal = SIGRTMAX - 3;
  gConfig.pid = getpid();
  gConfig.selected = processDrawn(gConfig.pid);
  // hpcrun -d: wait for a debugger (it sets hpcrunDebugWait to 0, or the wait is ended by
  // a signal the application handles).
  if (const char* d = getenv("HPCRUN_DEBUG_WAIT"); d && d[0] == '1') {
    char buf[96];
    Text t(buf, sizeof buf);
    t.str("waiting for a debugger: pid ").dec(uint64_t(gConfig.pid)).str(" (call hpcrun_continue() or set hpcrunDebugWait = 0)");
    complain(t.c_str());
    while (hpcrunDebugWait) sleep(1);
  }
}

void onExit() { processFinalize("exit"); }

// quick_exit(3) runs at_quick_exit's handlers, not atexit's, then ends by _exit past our
// wrapper (glibc calls it internally): the measurement was never written, main's profile
// lost. Registered first, this runs after the application's own handlers.
void onQuickExit() { processFinalize("quick_exit"); }

// A sanitizer (ASan, TSan, UBSan with halt_on_error) ends the process after its report by
// the system call itself, past every exit handler: its death callback writes the measurement
// first (before, only the threads that had ended were written).
void onSanitizerDeath() { processFinalize("sanitizer report"); }

// Every fork's child, by fork() or by glibc's own (daemon(): its child kept the parent's pid
// in its file names, overwriting the parent's files, and ran with no sampling timer).
void onForkChild() { processChildAfterFork(); }

// CPUTIME's timers advance at the kernel's tick, and only while the thread runs at one: a
// thread shorter than a tick is rarely sampled (800 threads of 0.4 ms each: 14 samples at
// CPUTIME@1000 for 0.32 s), and when it is, for the time it had run by then. A thread that
// ends with fewer than two samples of a CPUTIME event has the CPU time they did not stand
// for credited to its start routine (a leaf at its entry; the main thread's: main), so that
// its CPU time is its own whatever its length; longer threads keep their samples alone.
// The caller holds the thread's state for writing (its own thread's end, or the process's).
void creditShortThread(ThreadState& ts) {
  if (!ts.startRoutine) return;
  const uint64_t now = threadCpuNs(ts.tid);
  const uint64_t used = now > ts.cpuAtStart ? now - ts.cpuAtStart : 0;
  CctNode* node = nullptr;
  for (unsigned i = 0; i < gConfig.nEvents; ++i) {
    const EventSpec& ev = gConfig.events[i];
    if (ev.kind != SourceKind::CpuTime || ts.periodsOf[i] >= 2) continue;
    const uint64_t credited = ts.periodsOf[i] * ev.value * 1000;  // ev.value: the period in us
    if (used <= credited) continue;
    if (!node) {
      ModuleRef m = loadmapLookupOrAnonymous(ts.startRoutine);
      node = m.id ? ts.cct.child(ts.fence, m.id, m.offset) : nullptr;
      if (!node) return;
    }
    node->metrics()[i] += double(used - credited) * 1e-9;
    node->hasValue = 1;
  }
}

// Stops every thread's sources, waits (bounded) for handlers in flight, and writes each
// thread not yet written. The caller's own thread is among them.
void writeAllThreads() {
  for (ThreadState* t = registryHead(); t; t = t->next) sourcesStopThread(*t);
  for (ThreadState* t = registryHead(); t; t = t->next) {
    for (int spins = 0; t->inHandler.load(std::memory_order_acquire) && spins < 2000; ++spins) sched_yield();
    ThreadPhase expect = ThreadPhase::Parked;  // hpcrun -m 1: its threads credited as they ended
    if (t->phase.compare_exchange_strong(expect, ThreadPhase::Writing)) {
      outputWriteThread(*t);
      t->phase.store(ThreadPhase::Done, std::memory_order_release);
      continue;
    }
    expect = ThreadPhase::Running;
    if (t->phase.compare_exchange_strong(expect, ThreadPhase::Writing)) {
      waitsCreditUnfinished(*t);
      creditShortThread(*t);
      outputWriteThread(*t);
      t->phase.store(ThreadPhase::Done, std::memory_order_release);
    }
  }
}

}  // namespace

void processInit() {
  if (gReady) return;
  gReady = true;
  parseConfig();
  ioInit();
  memleakInit();
  signalsInit();
  if (!unwindInit()) complain("libunwind.so.8 not found or not usable: call paths will be partial");
  if (!outputInit()) {
    complain("cannot create the measurement directory: measurement disabled");
    return;
  }
  loadmapRefresh();
  newThreadState(true);
  atexit(onExit);
  at_quick_exit(onQuickExit);
  pthread_atfork(nullptr, nullptr, onForkChild);
  using SetDeathCallback = void (*)(void (*)());
  if (auto set = reinterpret_cast<SetDeathCallback>(dlsym(RTLD_DEFAULT, "__sanitizer_set_death_callback")))
    set(onSanitizerDeath);
}

void processStartMain(uintptr_t appMain) {
  ThreadState* ts = currentThread();
  if (!ts || gFinalized.load()) return;
  ts->startRoutine = appMain;
  if (gConfig.trace) outputOpenTrace(*ts);
  signalsStartThreadStack(*ts);
  sourcesStartThread(*ts);
  ts->cpuAtStart = threadCpuNs(ts->tid);
  gSampling.store(true, std::memory_order_release);
}

ThreadState* threadBegin(uintptr_t startRoutine) {
  if (!gReady || gFinalized.load(std::memory_order_acquire)) return nullptr;
  // hpcrun -m 1: a thread that ended left its state (its profile, its trace going on).
  ThreadState* ts = gConfig.mergeThreads ? takeParkedThreadState() : nullptr;
  const bool fresh = !ts;
  if (fresh) ts = newThreadState(false);
  if (!ts) return nullptr;
  ++ts->suspend;
  ts->startRoutine = startRoutine;
  if (gConfig.trace && fresh) outputOpenTrace(*ts);
  signalsStartThreadStack(*ts);
  sourcesStartThread(*ts);
  ts->cpuAtStart = threadCpuNs(ts->tid);
  --ts->suspend;
  return ts;
}

void threadEnd(ThreadState* ts) {
  if (!ts || ts != currentThread()) return;
  ++ts->suspend;
  ts->py = nullptr;  // it lies in the arena
  sourcesStopThread(*ts);
  signalsEndThreadStack(*ts);
  if (ts->gpu) gpu::threadFinish(*ts);
  ThreadPhase expect = ThreadPhase::Running;
  // hpcrun -m 1: the state is parked for the next thread to start (not a GPU launcher's,
  // whose CCT the stream tracers read); it is written at the process's end. Claimed first,
  // so that a finalize meanwhile neither credits it twice nor writes it half reset. Under
  // -e MEMLEAK too (taken up again only with -m 1): the blocks a thread allocated are often
  // freed by others after it ended (a worker's results), and their Bytes Freed belong in its
  // profile.
  if ((gConfig.mergeThreads || memleakMeasured()) && !ts->gpu && !ts->isMain &&
      ts->phase.compare_exchange_strong(expect, ThreadPhase::Writing)) {
    creditShortThread(*ts);
    bindThread(nullptr);
    ts->startRoutine = 0;
    --ts->suspend;
    ts->phase.store(ThreadPhase::Parked, std::memory_order_release);
    return;
  }
  if (ts->phase.compare_exchange_strong(expect, ThreadPhase::Writing)) {
    creditShortThread(*ts);
    outputWriteThread(*ts);
    ts->phase.store(ThreadPhase::Done, std::memory_order_release);
    // A thread that launched GPU operations keeps its CCT: the stream tracers copy launch
    // contexts from it, possibly after the thread is gone; so does one under MEMLEAK, whose
    // blocks may be freed on other threads later (memleak.cpp adds to their nodes).
    if (!ts->gpu && !memleakMeasured()) {
      ts->unwindCache = nullptr;  // these lie in the arena
      ts->hereCache = nullptr;
      ts->functionCache = nullptr;
      ts->arena.release();
    }
  }
}

void processMainReturned() {
  ThreadState* ts = currentThread();
  if (!ts || !ts->gpu || gFinalized.load()) return;
  SuspendSampling guard;
  gpu::threadFinish(*ts);
}

void processFinalize(const char* reason) {
  // A vfork child shares the parent's memory: its exit or exec ends nothing of the parent's.
  if (inVforkChild()) return;
  if (!gReady || gFinalized.exchange(true)) return;
  gSampling.store(false, std::memory_order_release);
  ThreadState* self = currentThread();
  if (self) ++self->suspend;
  // From a handler on the application's small signal stack (an exit or abort there): on ours.
  signalsOnRoomyStack(self, [](void* why) {
    gpu::processFinalize(currentThread());
    writeAllThreads();
    outputCopyPerfMap();
    pythonWriteTable();
    outputWriteLog(static_cast<const char*>(why));
  }, const_cast<char*>(reason));
}

// An exec that failed returns to the program, whose measurement was written for the new
// image: the calling thread's goes on in a new generation of files (log, profile, trace), as
// an exec'd image's would. So do the other threads still alive: each gets a new state from
// here, its sources started for it (a timer or perf event may target any thread of the
// process), and its old state points to the new one, which the thread binds at its next
// currentThread() (before, they stayed unmeasured: their sources stopped, their profiles
// written). A process that had GPU work stays unmeasured, its tracers being gone.
void processResumeAfterFailedExec(int err) {
  ThreadState* old = currentThread();
  if (!gReady || !gFinalized.load() || !old) return;
  unsigned others = 0;
  ThreadState* oldHead = registryHead();
  for (ThreadState* t = oldHead; t; t = t->next) {
    if (t->gpu) return;
    others += t != old;
  }
  registryReset();  // the old states' links stay: walked again below
  outputResumeAfterExec(err, others);
  // What a thread's new state takes over from its written one: the Python frames on its
  // stack and its signal stacks are still there, and so is the function it runs.
  auto takeOver = [](ThreadState& n, ThreadState& from) {
    n.py = from.py;
    n.altStack = from.altStack;
    n.appAltStack = from.appAltStack;
    n.startRoutine = from.startRoutine;
    from.py = nullptr;
    from.altStack = nullptr;
    if (gConfig.trace) outputOpenTrace(n);
  };
  ThreadState* ts = newThreadState(old->isMain);
  if (!ts) return;
  ++ts->suspend;
  takeOver(*ts, *old);
  gFinalized.store(false, std::memory_order_release);
  sourcesStartThread(*ts);
  ts->cpuAtStart = threadCpuNs(ts->tid);
  // The other threads alive (a parked state's thread, or one that ended since, is not).
  const int pid = getpid();
  for (ThreadState* t = oldHead; t; t = t->next) {
    if (t == old || t->phase.load(std::memory_order_acquire) != ThreadPhase::Done || t->successor.load() ||
        syscall(SYS_tgkill, pid, t->tid, 0) != 0)
      continue;
    ThreadState* n = newThreadStateFor(t->tid, t->isMain);
    if (!n) break;
    n->core = t->core;
    takeOver(*n, *t);
    t->successor.store(n, std::memory_order_release);  // before its sources can signal it
    sourcesStartThread(*n);
    n->cpuAtStart = threadCpuNs(n->tid);
  }
  gSampling.store(true, std::memory_order_release);
  --ts->suspend;
}

void processChildAfterFork() {
  if (!gReady || gFinalized.load()) return;
  gpu::childAfterFork();
  gConfig.pid = getpid();
  gConfig.selected = processDrawn(gConfig.pid);
  ThreadState* parent = currentThread();
  if (parent) keptClose(parent->trace);
  // The forking thread's Python frames are the child's too (a multiprocessing worker keeps
  // its hook): the stack, in the parent's arena, is the child's copy.
  PyStack* py = parent ? parent->py : nullptr;
  registryReset();
  outputChildAfterFork();
  const uintptr_t startRoutine = parent ? parent->startRoutine : 0;
  ThreadState* ts = newThreadState(true);
  if (!ts) return;
  ts->py = py;
  ts->startRoutine = startRoutine;  // the function the forking thread ran, for creditShortThread
  if (gConfig.trace) outputOpenTrace(*ts);
  sourcesStartThread(*ts);
  ts->cpuAtStart = threadCpuNs(ts->tid);
}

}  // namespace hpc::rt

// hpctoolkit.h: the application's sampling switch (with hpcrun -ds, off until started).
extern "C" {
__attribute__((visibility("default"))) void hpctoolkit_sampling_start() { hpc::rt::gAppSampling.store(true); }
__attribute__((visibility("default"))) void hpctoolkit_sampling_stop() { hpc::rt::gAppSampling.store(false); }
__attribute__((visibility("default"))) int hpctoolkit_sampling_is_active() {
  return hpc::rt::gAppSampling.load() && hpc::rt::gConfig.selected && hpc::rt::gSampling.load();
}
__attribute__((visibility("default"))) void hpctoolkit_sampling_start_() { hpctoolkit_sampling_start(); }
__attribute__((visibility("default"))) void hpctoolkit_sampling_stop_() { hpctoolkit_sampling_stop(); }
}
