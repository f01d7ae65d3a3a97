#pragma once
// Waits a sample must not end (waits.cpp): under REALTIME, the interposed waits block the
// sampling signal over the wait and let it in afterwards.
#include <signal.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>

#include "state.hpp"
#include "sys.hpp"

namespace hpc::rt {

// True where a REALTIME event is measured: its timer runs on while a thread waits.
bool quietWaits();

// syscall(number, args...) by `real` where it is a wait Linux never restarts after a handler,
// one that may last (not a zero timeout), kept whole as the libc wrappers below keep theirs:
// io_getevents and io_pgetevents (libaio's, made through syscall(2)), nanosleep,
// clock_nanosleep, poll, ppoll, epoll_wait, epoll_pwait, epoll_pwait2, select, pselect6,
// pause. A mask the wait takes gets the sampling signal added (a copy). Returns false, having
// done nothing, for any other call.
using RawSyscall = long (*)(long, ...);
bool rawWait(RawSyscall real, long number, const long (&args)[6], long& result);
// The numbers rawWait looks at: every other system call goes straight on, without entering
// its frame (the runtime's own raw calls run on the application's small signal stacks too).
inline bool isRawWait(long number) {
  switch (number) {
  case SYS_io_getevents: case SYS_io_pgetevents: case SYS_nanosleep: case SYS_clock_nanosleep: case SYS_poll:
  case SYS_ppoll: case SYS_epoll_wait: case SYS_epoll_pwait: case SYS_epoll_pwait2: case SYS_select:
  case SYS_pselect6: case SYS_pause:
    return true;
  default:
    return false;
  }
}

// Whether fd is a socket the application gave a receive or send timeout (SO_RCVTIMEO,
// SO_SNDTIMEO): Linux then ends its blocking calls, read and write included, with EINTR
// after any signal handler, SA_RESTART or not.
bool timedSocket(int fd);

// Whether a transfer of n bytes (or of an iovec array's) may be cut short by a signal once
// part is copied (a read of /dev/urandom, a write into a full pipe or socket): more than a
// page. Up to a page no signal cuts one (a pipe write of at most PIPE_BUF is atomic).
constexpr size_t kUncutTransfer = 4096;
inline bool mayBeCut(size_t n) { return n > kUncutTransfer; }
inline bool mayBeCut(const iovec* iov, int n) {
  size_t t = 0;
  for (int i = 0; i < n && t <= kUncutTransfer; ++i) t += iov[i].iov_len;
  return t > kUncutTransfer;
}

// A measured thread's wait, the sampling signal blocked over it.
// Also the I/O wrappers' (io.cpp) for transfers a signal could cut short.
class QuietWait {
public:
  // blocking: the wait may last (not a zero timeout); fn: the function waited in.
  QuietWait(bool blocking, const void* fn) : fn_(reinterpret_cast<uintptr_t>(fn)) {
    if (!blocking || !quietWaits()) return;
    ts_ = currentThread();
    if (!ts_ || ts_->inHandler.load(std::memory_order_relaxed) || ts_->suspend > 0) return;
    sigset_t ours;
    sigemptyset(&ours);
    sigaddset(&ours, gConfig.sampleSignal);
    const int saved = errno;
    on_ = syscall(SYS_rt_sigprocmask, SIG_BLOCK, &ours, &old_, _NSIG / 8) == 0 &&
          !sigismember(&old_, gConfig.sampleSignal);
    if (on_) {
      since_ = nowNs();
      ts_->waitingSince = since_;
      ts_->waitingIn = fn_;
    }
    errno = saved;
  }
  QuietWait(const QuietWait&) = delete;
  QuietWait& operator=(const QuietWait&) = delete;
  bool on() const { return on_; }  // the sampling signal is blocked over the wait
  // The mask a p-form wait takes, with the sampling signal added (the caller's, where it
  // gave none or waits are not kept whole).
  const sigset_t* with(const sigset_t* mask) {
    if (!mask || !on_) return mask;
    mask_ = *mask;
    sigaddset(&mask_, gConfig.sampleSignal);
    return &mask_;
  }
  // After the wait: the mask back, and with it the deferred sample, recorded in fn.
  template <typename R> R done(R result) {
    if (!on_) return result;
    const int saved = errno;
    ts_->waitingIn = 0;
    ts_->waitSince = since_;
    ts_->deferredLeaf = fn_;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old_, nullptr, _NSIG / 8);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    ts_->deferredLeaf = 0;
    errno = saved;
    return result;
  }

private:
  uintptr_t fn_;
  ThreadState* ts_ = nullptr;
  bool on_ = false;
  uint64_t since_ = 0;
  sigset_t old_, mask_;
};


// For a sample the end of such a wait let in (frames as unwound, frames[0] the interrupted
// pc): true, with `leaf` the function waited in, which the sample records as its leaf.
bool deferredSampleLeaf(const ThreadState& ts, const uintptr_t* frames, size_t n, uintptr_t& leaf);

// For a thread still in such a wait as the process ends (its samples stopped): its REALTIME
// time waited so far, credited to the function waited in below its root.
void waitsCreditUnfinished(ThreadState& t);

}  // namespace hpc::rt
