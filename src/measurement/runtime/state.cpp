#include "state.hpp"

#include <sched.h>

#include <new>

#include "sys.hpp"

namespace hpc::rt {

Config gConfig;
std::atomic<bool> gSampling{false};
std::atomic<bool> gFinalized{false};

namespace {
// initial-exec: the signal handler must never reach __tls_get_addr, which may allocate.
thread_local ThreadState* tlsState __attribute__((tls_model("initial-exec"))) = nullptr;
std::atomic<ThreadState*> gHead{nullptr};
std::atomic<uint32_t> gNextIndex{1};
}  // namespace

ThreadState* currentThread() {
  ThreadState* ts = tlsState;
  if (ts) {
    ThreadState* next = ts->successor.load(std::memory_order_acquire);
    if (__builtin_expect(next != nullptr, 0)) {
      while (ThreadState* later = next->successor.load(std::memory_order_acquire)) next = later;
      tlsState = ts = next;
    }
  }
  return ts;
}

// Set by a vfork child in the thread-local storage it shares with its waiting parent thread,
// cleared by that parent as it resumes (interpose.cpp's vfork).
thread_local bool tlsVforkChild __attribute__((tls_model("initial-exec"))) = false;
bool inVforkChild() { return tlsVforkChild; }
void setVforkChild(bool child) { tlsVforkChild = child; }
ThreadState* registryHead() { return gHead.load(std::memory_order_acquire); }
void bindThread(ThreadState* ts) { tlsState = ts; }

namespace {

// A new state for thread `tid`, registered; bound to the calling thread where it is that one.
ThreadState* makeThreadState(bool isMain, int tid, int core, bool bind) {
  auto* ts = static_cast<ThreadState*>(pageAlloc(sizeof(ThreadState)));
  if (!ts) return nullptr;
  new (ts) ThreadState();
  ts->index = isMain ? 0 : gNextIndex.fetch_add(1, std::memory_order_relaxed);
  ts->isMain = isMain;
  ts->tid = tid;
  ts->core = core < 0 ? 0 : core;
  ts->trace = KeptFile{};
  for (unsigned i = 0; i < gConfig.nEvents; ++i) {  // each event's sampling period, in ns
    const EventSpec& ev = gConfig.events[i];
    const uint64_t p = ev.kind != SourceKind::Perf ? ev.value * 1000 : ev.frequency ? 1000000000ull / ev.value : 0;
    ts->minGapNs[i] = p / 4;
  }
  for (unsigned i = 0; i < kMaxEvents; ++i) ts->perfFd[i] = -1;
  ts->phase.store(ThreadPhase::Running, std::memory_order_relaxed);
  bool ok = ts->cct.init(ts->arena, gConfig.nEvents);
  ts->frames = static_cast<uintptr_t*>(ts->arena.alloc(kMaxFrames * sizeof(uintptr_t)));
  if (gConfig.trace) ts->traceBuf = static_cast<TraceRecord*>(ts->arena.alloc(kTraceBufRecords * sizeof(TraceRecord)));
  if (!ok || !ts->frames) {
    ts->phase.store(ThreadPhase::Done);
    complain("out of memory for a thread's measurement state");
  } else {
    ts->fence = ts->cct.child(ts->cct.root(), kPlaceholderModule, isMain ? kFenceMain : kFenceThread);
  }
  ThreadState* head = gHead.load(std::memory_order_relaxed);
  do ts->next = head;
  while (!gHead.compare_exchange_weak(head, ts, std::memory_order_release, std::memory_order_relaxed));
  if (bind) tlsState = ts;
  return ts;
}

}  // namespace

ThreadState* newThreadState(bool isMain) { return makeThreadState(isMain, sysGettid(), sched_getcpu(), true); }

ThreadState* newThreadStateFor(int tid, bool isMain) {
  return makeThreadState(isMain, tid, tlsState ? tlsState->core : 0, false);
}

ThreadState* takeParkedThreadState() {
  for (ThreadState* t = registryHead(); t; t = t->next) {
    ThreadPhase expect = ThreadPhase::Parked;
    if (!t->phase.compare_exchange_strong(expect, ThreadPhase::Running, std::memory_order_acquire)) continue;
    t->tid = sysGettid();
    t->core = sched_getcpu();
    if (t->core < 0) t->core = 0;
    t->inHandler.store(0, std::memory_order_relaxed);
    t->suspend = 0;
    t->deferredLeaf = 0;
    t->waitSince = 0;
    t->waitingIn = 0;
    t->waitingSince = 0;
    t->cpuAtStart = 0;
    for (unsigned i = 0; i < kMaxEvents; ++i) t->periodsOf[i] = 0, t->lastSampleEnd[i] = 0;
    t->lastSampleCost = 0;
    t->appAltStack = stack_t{};
    tlsState = t;
    return t;
  }
  return nullptr;
}

void registryReset() {
  gHead.store(nullptr, std::memory_order_relaxed);
  gNextIndex.store(1, std::memory_order_relaxed);
  tlsState = nullptr;
}

}  // namespace hpc::rt
