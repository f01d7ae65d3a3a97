// Process-wide configuration and the per-thread measurement state.
#pragma once

#include <setjmp.h>
#include <signal.h>
#include <time.h>

#include <atomic>
#include <cstdint>

#include "arena.hpp"
#include "cct.hpp"
#include "event_spec.hpp"
#include "sys.hpp"
#include "unwind_cache.hpp"

namespace hpc::rt {

namespace gpu {
struct ThreadGpu;
}

using measurement::EventSpec;
using measurement::kMaxEvents;
using measurement::SourceKind;

constexpr size_t kPathMax = 4096;

struct Config {
  EventSpec events[kMaxEvents];
  unsigned nEvents = 0;
  bool trace = false;
  bool launchTrace = false;  // hpcrun -tt: GPU operations' launches are trace records too
  char outDir[kPathMax] = {};
  char appName[256] = {};
  char appPath[kPathMax] = {};
  char jobId[64] = {};  // the batch job's id (the launcher's HPCRUN_JOB_ID), for each profile's header
  uint32_t hostId = 0;
  uint32_t rank = 0;
  bool ranked = false;  // launched as an MPI rank (a launcher's rank variable set)
  int pid = 0;
  unsigned gen = 0;
  int sampleSignal = 0;   // the real-time signal our timers and perf events deliver
  UnwindCacheMode unwindCache = UnwindCacheMode::On;
  // hpcrun -f: the fraction of processes measured and the run's seed. A process not drawn
  // (selected false) runs its sources and drops every sample, so that it is slowed as the
  // measured ones are (MPI ranks stay balanced), and writes no file.
  double processFraction = 1;
  uint64_t fractionSeed = 0;
  bool selected = true;
  bool noUnwind = false;  // hpcrun -nu: the interrupted function alone, no calling context
  bool mergeThreads = false;  // hpcrun -m 1: a thread that starts takes up a parked state
  // hpcrun -r: every frame of a simple recursion kept (by default a caller in the same
  // function as its callee is left out of the path, as the reference does; sample.cpp).
  bool retainRecursion = false;
  // With -t, the event whose samples make the trace: the first time-based one (CPUTIME,
  // REALTIME, perf's cpu-clock, task-clock or cycles), as the reference traces, else the
  // first sampled one.
  unsigned traceEvent = 0;
};

// Whether process `pid` is measured under hpcrun -f (its draw from the run's seed: the same
// through an exec, drawn again by a fork's child).
bool processDrawn(int pid);

// Written once by the constructor (and again in a fork child), read everywhere.
extern Config gConfig;
extern std::atomic<bool> gSampling;     // samples are taken only while true
// hpcrun -ds and hpctoolkit_sampling_start/stop: the application's own switch (samples taken
// only while on as well).
extern std::atomic<bool> gAppSampling;
extern std::atomic<bool> gFinalized;

// Parked (hpcrun -m 1): the state of a thread that ended, kept for the next thread to start
// (threads that do not overlap make one profile); written at the process's end.
enum class ThreadPhase : int { Running, Writing, Done, Parked };

struct TraceRecord {
  uint64_t time;
  uint32_t node;
};

struct PyStack;  // python.hpp

struct ThreadState {
  ThreadState* next;  // registry link; states are never freed
  uint32_t index;     // 0 for the main thread, then creation order
  int tid;
  int core;
  bool isMain;
  std::atomic<ThreadPhase> phase;
  std::atomic<int> inHandler;
  int suspend;        // > 0 while the thread runs runtime or loader code: samples blocked
  Arena arena;
  Cct cct;
  CctNode* fence;
  uintptr_t* frames;  // unwind scratch, kMaxFrames entries
  UnwindCache* unwindCache;  // allocated once the thread's stack was deep (unwind_cache.hpp)
  void* hereCache;           // contextHere's last path (sample.cpp), allocated at its first use
  void* functionCache;       // functions of return addresses (sample.cpp), allocated at its first use
  UnwindCacheStats unwindStats;
  size_t lastDepth;          // frames of the last complete unwind
  // sources
  bool timerLive[kMaxEvents];
  int timers[kMaxEvents];  // the kernel's timer ids (made by the system call: its signals carry them)
  int perfFd[kMaxEvents];
  uint64_t perfLast[kMaxEvents];
  uint32_t perfArmed[kMaxEvents];  // overflows left before the kernel disables the event
  uint64_t perfPeriod[kMaxEvents];  // the period to set at the first overflow (0: set already)
  // trace, buffered and flushed to its file from the signal handler
  KeptFile trace;
  TraceRecord* traceBuf;
  uint32_t traceLen;
  uint64_t traceMin, traceMax;
  // counters for the log's SUMMARY line
  uint64_t samples, recorded, blocked, errant, unwindFailures, truncated, sourceFailures;
  uint64_t timerSignals, timerPeriods;  // timer samples, and the periods they stood for (overruns)
  uint64_t periodsOf[kMaxEvents];       // the same per event (a timer's)
  uint64_t cpuAtStart;                  // the thread's CPU clock (ns) as its sources started
  uintptr_t startRoutine;               // a thread's start routine (0: the main thread)
  size_t nFrames;
  // Livelock guard, see onSampleSignal: each event's last recorded sample's end and shortest
  // gap (a quarter of its period in time; 0 for a period in counts), the last sample's cost.
  uint64_t lastSampleEnd[kMaxEvents], minGapNs[kMaxEvents], lastSampleCost;
  // Set by a wait's wrapper (waits.cpp) while it lets the samples deferred over the wait be
  // delivered: the function waited in, which such a sample records as its leaf.
  volatile uintptr_t deferredLeaf;
  uint64_t waitSince;  // when that wait began (trace time): its trace record is dated then
  // The wait the thread is in now (waits.cpp), and when it began (trace time): a process
  // that ends meanwhile credits the time waited so far (waitsCreditUnfinished).
  volatile uintptr_t waitingIn;
  volatile uint64_t waitingSince;
  sigjmp_buf unwindJump;
  std::atomic<int> inUnwind;
  gpu::ThreadGpu* gpu;  // GPU launches and returning records; nullptr until the first launch
  void* altStack;       // the signal stack the runtime gave this thread (signals.hpp); nullptr: none
  stack_t appAltStack{};  // the application's, while it has set one in place of ours (ss_size 0: none)
  PyStack* py;          // the thread's Python frames (python.hpp); nullptr: no profile hook
  // Set where another thread gave this one new state (a failed exec: processResumeAfterFailedExec)
  // while this state was written and done; currentThread() follows it and binds the new one.
  std::atomic<ThreadState*> successor;
};

constexpr size_t kMaxFrames = 32768;
constexpr uint32_t kTraceBufRecords = 4096;

ThreadState* currentThread();                 // MT: async-signal-safe; nullptr if unmeasured
bool inVforkChild();  // this thread is a vfork child running in its parent's memory (interpose.cpp)
void setVforkChild(bool child);
ThreadState* newThreadState(bool isMain);     // allocates, registers and binds to this thread
// The same for another live thread of the process (tid), bound by nothing: the caller sets it
// as that thread's old state's successor.
ThreadState* newThreadStateFor(int tid, bool isMain);
// A parked state (hpcrun -m 1) taken up by this thread and bound to it; nullptr if none.
ThreadState* takeParkedThreadState();
ThreadState* registryHead();
void registryReset();                         // empty, next index 1, this thread unbound (fork child, failed exec)
void bindThread(ThreadState* ts);

}  // namespace hpc::rt
