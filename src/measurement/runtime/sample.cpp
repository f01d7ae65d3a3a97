#include "sample.hpp"

#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <cerrno>

#include "gpu/gpu.hpp"
#include "loadmap.hpp"
#include "output.hpp"
#include "python.hpp"
#include "signals.hpp"
#include "sources.hpp"
#include "sys.hpp"
#include "unwind.hpp"
#include "unwind_cache.hpp"
#include "waits.hpp"

namespace hpc::rt {

namespace {

constexpr uint64_t kUnnormalized = placeholder("*Unnorm ");

// The thread's unwind cache where its last complete unwind was deep (allocated then, once).
UnwindCache* cacheFor(ThreadState& ts) {
  if (gConfig.unwindCache == UnwindCacheMode::Off) return nullptr;
  if (gConfig.unwindCache != UnwindCacheMode::Verify && ts.lastDepth < UnwindCache::kMinFrames) return nullptr;
  if (!ts.unwindCache) {
    const bool verify = gConfig.unwindCache == UnwindCacheMode::Verify;
    ts.unwindCache = UnwindCache::create(ts.arena, kMaxFrames, verify, ts.unwindStats);
    if (!ts.unwindCache) ts.lastDepth = 0;  // no memory: try again at the next deep unwind
  }
  return ts.unwindCache;
}

// Runs fn where a fault in it (reading a stack that is gone) is recovered: false then.
template <class Fn> bool guarded(ThreadState& ts, Fn&& fn) {
  volatile bool ok = false;
  ts.inUnwind.store(1, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  // No mask saved: that would cost a sigprocmask call every sample. The rare fault path
  // restores the mask itself (recoverFromUnwindFault).
  if (sigsetjmp(ts.unwindJump, 0) == 0) {
    fn();
    ok = true;
  }
  std::atomic_signal_fence(std::memory_order_seq_cst);
  ts.inUnwind.store(0, std::memory_order_relaxed);
  return ok;
}

// Whether a full libunwind walk gives what the walk with recipes gave (frames[0..n), end).
bool agreesWithLibunwind(ThreadState& ts, void* uc, UnwindEnd end) {
  size_t n = 0;
  UnwindEnd full = UnwindEnd::Failed;
  if (!guarded(ts, [&] { full = unwindFromSignal(uc, ts.unwindCache->verifyFrames, kMaxFrames, n); })) return false;
  if (full != end || n != ts.nFrames) return false;
  for (size_t i = 0; i < n; ++i)
    if (ts.unwindCache->verifyFrames[i] != ts.frames[i]) return false;
  return true;
}

// Whether frame i (a caller's return address) lies in the runtime's own code: a wrapper
// between the application's call and the function it wraps (pthread_create, dlopen, ...).
// Such frames are left out of the path, which then reads as it would unmeasured.
inline bool isRuntimeCaller(const uintptr_t* frames, size_t i) { return i > 0 && loadmapIsSelf(frames[i] - 1); }

// The functions (their CFI's ranges) a thread's frames lay in, sorted by start: a sample's
// frames are found here by a binary search, whatever instruction of the function they are
// at; libunwind's search of the modules' CFI indexes (some microseconds) is for a function not
// met before. Forgotten when full, and when the load map changes.
struct FunctionCache {
  static constexpr size_t kMost = 1024;
  uintptr_t generation;
  size_t n;
  uintptr_t start[kMost], end[kMost];
};

// The start of the function holding code address `at`, 0 where unknown.
uintptr_t functionOf(ThreadState& ts, uintptr_t at) {
  auto* c = static_cast<FunctionCache*>(ts.functionCache);
  if (!c) {
    c = static_cast<FunctionCache*>(ts.arena.alloc(sizeof(FunctionCache)));
    if (!c) return 0;
    ts.functionCache = c;
  }
  if (c->generation != loadmapGeneration()) c->n = 0, c->generation = loadmapGeneration();
  size_t lo = 0, hi = c->n;  // the first range starting above `at`
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (c->start[mid] <= at) lo = mid + 1;
    else hi = mid;
  }
  if (lo > 0 && at < c->end[lo - 1]) return c->start[lo - 1];
  volatile uintptr_t start = 0, end = 0;
  if (!guarded(ts, [&] {
        uintptr_t e = 0;
        start = functionStart(at, e);
        end = e;
      }))
    start = 0;
  if (!start) return 0;
  if (c->n == FunctionCache::kMost) c->n = 0, lo = 0;
  for (size_t k = c->n; k > lo; --k) c->start[k] = c->start[k - 1], c->end[k] = c->end[k - 1];
  c->start[lo] = start;
  c->end[lo] = end;
  ++c->n;
  return start;
}

// The code address frame i stands for: the interrupted pc, or a caller's call instruction.
inline uintptr_t frameAddress(const uintptr_t* frames, size_t i) { return i > 0 ? frames[i] - 1 : frames[i]; }

// Simple recursion folded, as the reference's hpcrun does unless -r: a caller's frame in the
// function its callee's frame is in (a function that called itself) is left out, so that a
// recursion of any depth is one level, at its innermost call, with all of its costs below.
inline bool isRecursiveCaller(ThreadState& ts, const uintptr_t* frames, size_t i, size_t innermost = 0) {
  if (gConfig.retainRecursion || i <= innermost) return false;
  const uintptr_t f = functionOf(ts, frameAddress(frames, i));
  return f && f == functionOf(ts, frameAddress(frames, i - 1));
}

// Frames that get no node of the path.
inline bool leftOut(ThreadState& ts, const uintptr_t* frames, size_t i) {
  return isRuntimeCaller(frames, i) || isRecursiveCaller(ts, frames, i);
}

// Whether the path from node up is the frames' (outermost at the fence), as inserted afresh.
bool pathMatchesFrames(ThreadState& ts, const CctNode* node) {
  for (size_t i = 0; i < ts.nFrames; ++i) {
    if (leftOut(ts, ts.frames, i)) continue;  // as the path was inserted
    ModuleRef m = loadmapLookupOrAnonymous(i > 0 ? ts.frames[i] - 1 : ts.frames[i]);
    const uint16_t module = m.id ? m.id : kPlaceholderModule;
    const uint64_t offset = m.id ? m.offset : kUnnormalized;
    if (!node || node->module != module || node->offset != offset) return false;
    node = node->parent;
  }
  return node == ts.fence;
}

// members: the counts of ev's counter group's members since its last sample (nullptr: none).
void record(ThreadState& ts, void* uc, int ev, double value, const double* members) {
  ts.nFrames = 0;
  UnwindCache* cache = cacheFor(ts);
  const uintptr_t generation = cache ? loadmapGeneration() : 0;
  uint64_t byRecipes = 0;
  if (cache) {
    cache->recipes.syncWith(generation);
    byRecipes = ts.unwindStats.byRecipes;
  }
  volatile UnwindEnd end = UnwindEnd::Failed;
  if (gConfig.noUnwind) {
    // hpcrun -nu: a flat profile, the interrupted instruction below the thread's root.
    ts.frames[0] = uintptr_t(static_cast<ucontext_t*>(uc)->uc_mcontext.gregs[REG_RIP]);
    ts.nFrames = 1;
    cache = nullptr;
    end = UnwindEnd::Bottom;
  } else if (!guarded(ts, [&] { end = unwindFromSignal(uc, ts.frames, kMaxFrames, ts.nFrames, cache); })) {
    end = UnwindEnd::Failed;
  }
  const bool complete = end == UnwindEnd::Fence || end == UnwindEnd::Bottom;
  if (cache && gConfig.unwindCache == UnwindCacheMode::Verify && ts.unwindStats.byRecipes != byRecipes) {
    ++ts.unwindStats.verified;
    if (!agreesWithLibunwind(ts, uc, end)) ++ts.unwindStats.mismatches;
  }
  // A sample deferred over a wait (waits.cpp) is the wait's: its leaf is the function waited
  // in, not the mask's system call that let it in.
  bool deferred = false;
  if (uintptr_t leaf; deferredSampleLeaf(ts, ts.frames, ts.nFrames, leaf)) ts.frames[0] = leaf, deferred = true;

  // A thread running Python: its Python frames in place of the interpreter's (python.hpp).
  CctNode* pyLeaf = nullptr;
  if (ts.py && complete && !guarded(ts, [&] {
        if (!pythonInsertPath(ts, ts.frames, ts.nFrames, true, pyLeaf)) pyLeaf = nullptr;
      }))
    pyLeaf = nullptr;

  // A complete path shares its outermost frames' nodes with the last one (return addresses
  // only: frames[0], the interrupted pc, is recorded as itself, not as a call).
  PathCache* path = cache && complete && ts.nFrames > 0 && !pyLeaf ? &cache->path : nullptr;
  size_t shared = 0;
  CctNode* node = complete ? ts.fence : ts.cct.partialRoot();
  if (path) {
    if (path->generation != generation) path->count = 0;
    const size_t most = path->count < ts.nFrames - 1 ? path->count : ts.nFrames - 1;
    while (shared < most && ts.frames[ts.nFrames - 1 - shared] == path->ip[shared]) ++shared;
    // Whether the innermost frame shared is a recursive caller depends on its callee, which
    // may have changed: it is looked at again.
    if (shared && !gConfig.retainRecursion) --shared;
    if (shared) node = path->node[shared - 1];
    ts.unwindStats.nodesReused += shared;
  }
  if (pyLeaf) node = pyLeaf;
  for (size_t i = pyLeaf ? 0 : ts.nFrames - shared; i-- > 0 && node;) {
    // Callers are recorded at their call instruction (return address - 1), as the
    // reference does, so the call maps to its own source line. A runtime wrapper's frame
    // gets no node, nor does a recursive caller: the path cache keeps its parent's for it.
    if (!leftOut(ts, ts.frames, i)) {
      ModuleRef m = loadmapLookupOrAnonymous(frameAddress(ts.frames, i));
      node = m.id ? ts.cct.child(node, m.id, m.offset) : ts.cct.child(node, kPlaceholderModule, kUnnormalized);
    }
    if (path && i > 0) {
      path->ip[ts.nFrames - 1 - i] = ts.frames[i];
      path->node[ts.nFrames - 1 - i] = node;
    }
  }
  if (cache) {
    cache->path.count = path && node ? ts.nFrames - 1 : 0;
    cache->path.generation = generation;
    if (gConfig.unwindCache == UnwindCacheMode::Verify && shared && node) {
      ++ts.unwindStats.verified;
      if (!pathMatchesFrames(ts, node)) ++ts.unwindStats.mismatches;
    }
  }
  ts.lastDepth = complete ? ts.nFrames : 0;
  if (!node) {  // out of memory
    ++ts.blocked;
    return;
  }
  node->metrics()[ev] += value;
  if (members)
    for (unsigned i = 0; i < gConfig.nEvents; ++i)
      if (gConfig.events[i].member && gConfig.events[i].leader == unsigned(ev)) node->metrics()[i] += members[i];
  node->hasValue = 1;
  if (complete) ++ts.recorded;
  else {
    ++ts.errant;
    if (end == UnwindEnd::Truncated) ++ts.truncated;
    else ++ts.unwindFailures;
  }
  if (gConfig.trace && unsigned(ev) == gConfig.traceEvent) traceAppend(ts, deferred && ts.waitSince ? ts.waitSince : nowNs(), node->id);
}

}  // namespace

void onSampleSignal(int sig, siginfo_t* si, void* uc) {
  int savedErrno = errno;
  ThreadState* ts = currentThread();
  if (!ts) {
    // Our timers signal measured threads only: a timer's signal here is the application's,
    // unless one of ours queued before this thread's state was reset (a failed exec).
    signalsForward(sig, si, uc, si->si_code == SI_TIMER && !sourcesRecentTimer(si->si_timerid));
    errno = savedErrno;
    return;
  }
  if (ts->inHandler.exchange(1, std::memory_order_acquire)) {
    ++ts->blocked;
    errno = savedErrno;
    return;
  }
  double value = 0;
  int ev = sourcesIdentify(*ts, si, value);
  if (ev >= 0) {
    ++ts->samples;
    // A counter group's members are read at each of its leader's samples, also one dropped
    // below (their counts since the last go with it, as the leader's own do).
    double memberCounts[kMaxEvents];
    const bool members = sourcesReadMembers(*ts, ev, memberCounts);
    // A sample that arrives within a quarter period of its event's previous one's end, or
    // sooner after it than the last sample took, means samples cost more than the period
    // (very deep stacks, or a perf event that counts the handler's own time and queues a
    // signal for each overflow): drop it, so the app keeps at least half of its time against
    // each event. Per event: two events of one period (CPUTIME and REALTIME) fire together on
    // a busy thread, and one rule for both dropped a third of their samples.
    uint64_t start = monotonicNs();
    const uint64_t gap = ts->lastSampleCost > ts->minGapNs[ev] ? ts->lastSampleCost : ts->minGapNs[ev];
    // A sample in the runtime's own code (a wrapper around one of the application's calls,
    // the end of main) is the measurement's cost, not the application's: blocked, so that no
    // frame of libhpcrun.so shows in a profile.
    // hpcrun -ds and the application's hpctoolkit_sampling_stop(), and a process hpcrun -f
    // did not draw: sampled all the same (slowed alike), the samples dropped.
    if (!gSampling.load(std::memory_order_acquire) || !gAppSampling.load(std::memory_order_relaxed) ||
        !gConfig.selected || ts->suspend > 0 ||
        ts->phase.load(std::memory_order_acquire) != ThreadPhase::Running || start - ts->lastSampleEnd[ev] < gap ||
        loadmapIsSelf(uintptr_t(static_cast<ucontext_t*>(uc)->uc_mcontext.gregs[REG_RIP]))) {
      ++ts->blocked;
    } else {
      struct Work {
        ThreadState* ts;
        void* uc;
        int ev;
        double value;
        const double* members;
      } work{ts, uc, ev, value, members ? memberCounts : nullptr};
      // On the application's small signal stack (Rust's: 8 KiB), the sample is taken on ours.
      signalsOnRoomyStack(ts, [](void* p) {
        Work& w = *static_cast<Work*>(p);
        record(*w.ts, w.uc, w.ev, w.value, w.members);
        if (w.ts->gpu) gpu::onSample(*w.ts);
      }, &work);
      ts->lastSampleEnd[ev] = monotonicNs();
      ts->lastSampleCost = ts->lastSampleEnd[ev] - start;
    }
    sourcesRearm(*ts, ev);
  }
  ts->inHandler.store(0, std::memory_order_release);
  // Not a sample: the application's own use of the signal number (test
  // `Signals.TheSamplingSignalSentByTheApplicationReachesIt`).
  if (ev < 0) signalsForward(sig, si, uc, ev == kAppTimer);
  errno = savedErrno;
}

// The last complete path contextHere found on a thread, and where its return addresses lay
// on the stack: the next call from the same place (contextHere's frame where it was, each of
// those return addresses still in its slot, the load map unchanged) is in the same calling
// context, found by a read of each slot instead of an unwind. A program writing a line at a
// time calls from one place over and over: each count cost an unwind (about 0.75 us) before.
// Not for threads with Python frames, whose context changes where the C stack does not.
struct HereCache {
  static constexpr size_t kMax = 96;
  uintptr_t frame;       // contextHere's frame address
  uintptr_t generation;  // the load map's
  size_t n;              // frames; 0: nothing cached
  CctNode* node;
  uintptr_t ips[kMax];
  uintptr_t sps[kMax];   // frame k's stack pointer: its return address lay at sps[k] - 8
};

HereCache* hereCache(ThreadState& ts) {
  if (!ts.hereCache) {
    ts.hereCache = ts.arena.alloc(sizeof(HereCache));
    if (ts.hereCache) static_cast<HereCache*>(ts.hereCache)->n = 0;
  }
  return static_cast<HereCache*>(ts.hereCache);
}

CctNode* contextHere(ThreadState& ts) {
  const uintptr_t frame = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
  HereCache* cache = ts.py ? nullptr : hereCache(ts);
  if (cache && cache->n && cache->frame == frame && cache->generation == loadmapGeneration()) {
    // The frames of the unwind's own calls below this one (their slots are not live now) are
    // the same code each time; from this frame's return address out each slot is checked.
    volatile bool same = true;
    if (guarded(ts, [&] {
          for (size_t k = 0; k < cache->n && same; ++k)
            if (cache->sps[k] - 8 > frame)
              same = *reinterpret_cast<const volatile uintptr_t*>(cache->sps[k] - 8) == cache->ips[k];
        }) &&
        same)
      return cache->node;
  }
  if (cache) cache->n = 0;
  ts.nFrames = 0;
  volatile UnwindEnd end = UnwindEnd::Failed;
  uintptr_t* sps = cache ? cache->sps : nullptr;
  const size_t spsCap = cache ? HereCache::kMax : 0;
  if (!guarded(ts, [&] { end = unwindHere(ts.frames, kMaxFrames, ts.nFrames, sps, spsCap); }))
    end = UnwindEnd::Failed;
  size_t first = 0;
  while (first < ts.nFrames && loadmapIsSelf(ts.frames[first])) ++first;
  const bool complete = end == UnwindEnd::Fence || end == UnwindEnd::Bottom;
  CctNode* py = nullptr;
  if (ts.py && complete && first < ts.nFrames &&
      guarded(ts, [&] {
        if (!pythonInsertPath(ts, ts.frames + first, ts.nFrames - first, false, py)) py = nullptr;
      }) &&
      py)
    return py;
  CctNode* node = complete ? ts.fence : ts.cct.partialRoot();
  for (size_t i = ts.nFrames; i-- > first && node;) {
    if (isRecursiveCaller(ts, ts.frames, i, first)) continue;
    ModuleRef m = loadmapLookupOrAnonymous(ts.frames[i] - 1);
    node = m.id ? ts.cct.child(node, m.id, m.offset) : ts.cct.child(node, kPlaceholderModule, kUnnormalized);
  }
  if (cache && complete && node && ts.nFrames <= HereCache::kMax) {
    cache->frame = frame;
    cache->generation = loadmapGeneration();
    cache->node = node;
    for (size_t k = 0; k < ts.nFrames; ++k) cache->ips[k] = ts.frames[k];
    cache->n = ts.nFrames;
  }
  return node;
}

void recoverFromUnwindFault(void* faultContext) {
  ThreadState* ts = currentThread();
  if (!ts || !ts->inUnwind.load(std::memory_order_relaxed)) return;
  // Back to the mask the sample handler ran with (the fault handler's own adds the fault
  // signal), then out of the unwind. The raw system call: the interposed one filters masks.
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &static_cast<ucontext_t*>(faultContext)->uc_sigmask, nullptr,
          _NSIG / 8);
  siglongjmp(ts->unwindJump, 1);
}

}  // namespace hpc::rt
