#include "sample.hpp"

#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <cerrno>

#include "gpu/gpu.hpp"
#include "loadmap.hpp"
#include "output.hpp"
#include "sources.hpp"
#include "sys.hpp"
#include "unwind.hpp"

namespace hpc::rt {

namespace {

constexpr uint64_t kUnnormalized = placeholder("*Unnorm ");

void record(ThreadState& ts, void* uc, int ev, double value) {
  ts.nFrames = 0;
  volatile UnwindEnd end = UnwindEnd::Failed;
  ts.inUnwind.store(1, std::memory_order_relaxed);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  // No mask saved: that would cost a sigprocmask call every sample. The rare fault path
  // restores the mask itself (recoverFromUnwindFault).
  if (sigsetjmp(ts.unwindJump, 0) == 0) end = unwindFromSignal(uc, ts.frames, kMaxFrames, ts.nFrames);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  ts.inUnwind.store(0, std::memory_order_relaxed);

  bool complete = end == UnwindEnd::Fence || end == UnwindEnd::Bottom;
  CctNode* node = complete ? ts.fence : ts.cct.partialRoot();
  for (size_t i = ts.nFrames; i-- > 0 && node;) {
    // Callers are recorded at their call instruction (return address - 1), as the
    // reference does, so the call maps to its own source line.
    ModuleRef m = loadmapLookup(i > 0 ? ts.frames[i] - 1 : ts.frames[i]);
    node = m.id ? ts.cct.child(node, m.id, m.offset) : ts.cct.child(node, kPlaceholderModule, kUnnormalized);
  }
  if (!node) {  // out of memory
    ++ts.blocked;
    return;
  }
  node->metrics()[ev] += value;
  node->hasValue = 1;
  if (complete) ++ts.recorded;
  else {
    ++ts.errant;
    if (end == UnwindEnd::Truncated) ++ts.truncated;
    else ++ts.unwindFailures;
  }
  if (gConfig.trace && ev == 0) traceAppend(ts, nowNs(), node->id);
}

}  // namespace

void onSampleSignal(int, siginfo_t* si, void* uc) {
  int savedErrno = errno;
  ThreadState* ts = currentThread();
  if (!ts) {
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
    // A sample that arrives within a quarter period of the previous one's end means the
    // unwinds cost more than the period (very deep stacks): drop it so the app progresses.
    uint64_t start = monotonicNs();
    if (!gSampling.load(std::memory_order_acquire) || ts->suspend > 0 ||
        ts->phase.load(std::memory_order_acquire) != ThreadPhase::Running ||
        start - ts->lastSampleEnd < ts->minGapNs)
      ++ts->blocked;
    else {
      record(*ts, uc, ev, value);
      if (ts->gpu) gpu::onSample(*ts);
      ts->lastSampleEnd = monotonicNs();
    }
    sourcesRearm(*ts, ev);
  }
  ts->inHandler.store(0, std::memory_order_release);
  errno = savedErrno;
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
