// Waits that a sample must not end. REALTIME's timers run on while a thread waits in the
// kernel, and a handler's signal ends the waits Linux never restarts after one (nanosleep,
// clock_nanosleep, poll, select, epoll_wait, their p-forms, pause, sigsuspend, sigtimedwait,
// sigwaitinfo) with EINTR, whatever SA_RESTART says: under REALTIME a program's sleep
// returned after one period, its poll said "interrupted", its pause woke up. Where a REALTIME
// event is measured, each such wait runs with the sampling signal blocked (for the p-forms
// and sigsuspend: added to the mask they take), so only the application's own signals end
// it. The timer's expirations meanwhile are one pending signal and its overrun count; it is
// delivered as the wrapper restores the mask, and its sample, weighing every period the wait
// took, records the waited-in function as its leaf below the application's call, and its
// trace record is dated at the wait's start (the trace shows the wait, not the code before
// it, over the time waited). A wait with a zero timeout cannot be ended by a sample and is
// passed straight on.
//
// The other interfaces signal(7) lists as never restarted are kept whole too: epoll_pwait2,
// System V IPC's semop, semtimedop, msgrcv and msgsnd (unless IPC_NOWAIT), and the socket
// calls that wait (recv, recvfrom, recvmsg, recvmmsg, accept, accept4; send, sendto, sendmsg,
// connect) on a socket given a receive or send timeout: setsockopt is watched for
// SO_RCVTIMEO and SO_SNDTIMEO, and such a socket's number marked (never unmarked: a socket
// closed and its number reused only costs its calls the two mask changes). Without a timeout
// SA_RESTART restarts those socket calls, so the sockets of every other program go straight
// through. recvmmsg with a timeout of its own is kept whole on any socket. The same waits made
// through syscall(2) (libaio's io_getevents is) are kept whole by the interposed syscall
// (rawWait), a mask they take given the sampling signal.
#include <dlfcn.h>
#include <aio.h>
#include <poll.h>
#include <signal.h>
#include <semaphore.h>
#include <sys/epoll.h>
#include <sys/msg.h>
#include <sys/select.h>
#include <sys/sem.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "interpose.hpp"
#include "loadmap.hpp"
#include "process.hpp"
#include "signals.hpp"
#include "state.hpp"
#include "sys.hpp"
#include "waits.hpp"

namespace hpc::rt {

namespace {

int (*real_nanosleep)(const timespec*, timespec*);
int (*real_clock_nanosleep)(clockid_t, int, const timespec*, timespec*);
int (*real_usleep)(useconds_t);
unsigned (*real_sleep)(unsigned);
int (*real_poll)(pollfd*, nfds_t, int);
int (*real_ppoll)(pollfd*, nfds_t, const timespec*, const sigset_t*);
int (*real_select)(int, fd_set*, fd_set*, fd_set*, timeval*);
int (*real_pselect)(int, fd_set*, fd_set*, fd_set*, const timespec*, const sigset_t*);
int (*real_epoll_wait)(int, epoll_event*, int, int);
int (*real_epoll_pwait)(int, epoll_event*, int, int, const sigset_t*);
int (*real_pause)();
int (*real_sigsuspend)(const sigset_t*);
int (*real_sigtimedwait)(const sigset_t*, siginfo_t*, const timespec*);
int (*real_sigwaitinfo)(const sigset_t*, siginfo_t*);
int (*real_sigwait)(const sigset_t*, int*);
int (*real_signalfd)(int, const sigset_t*, int);
int (*real_sigpending)(sigset_t*);
int (*real_sem_timedwait)(sem_t*, const timespec*);
int (*real_sem_clockwait)(sem_t*, clockid_t, const timespec*);
int (*real_aio_suspend)(const aiocb* const[], int, const timespec*);
int (*real_aio_suspend64)(const aiocb64* const[], int, const timespec*);
int (*real_epoll_pwait2)(int, epoll_event*, int, const timespec*, const sigset_t*);
int (*real_semop)(int, sembuf*, size_t);
int (*real_semtimedop)(int, sembuf*, size_t, const timespec*);
ssize_t (*real_msgrcv)(int, void*, size_t, long, int);
int (*real_msgsnd)(int, const void*, size_t, int);
int (*real_setsockopt)(int, int, int, const void*, socklen_t);
ssize_t (*real_recv)(int, void*, size_t, int);
ssize_t (*real_recvfrom)(int, void*, size_t, int, sockaddr*, socklen_t*);
// _FORTIFY_SOURCE's forms (a buffer of known size, a count that is not): glibc's call the
// plain functions internally, where no wrapper sees them.
int (*real___poll_chk)(pollfd*, nfds_t, int, size_t);
int (*real___ppoll_chk)(pollfd*, nfds_t, const timespec*, const sigset_t*, size_t);
ssize_t (*real___recv_chk)(int, void*, size_t, size_t, int);
ssize_t (*real___recvfrom_chk)(int, void*, size_t, size_t, int, sockaddr*, socklen_t*);
ssize_t (*real_recvmsg)(int, msghdr*, int);
int (*real_recvmmsg)(int, mmsghdr*, unsigned, int, timespec*);
int (*real_accept)(int, sockaddr*, socklen_t*);
int (*real_accept4)(int, sockaddr*, socklen_t*, int);
ssize_t (*real_send)(int, const void*, size_t, int);
ssize_t (*real_sendto)(int, const void*, size_t, int, const sockaddr*, socklen_t);
ssize_t (*real_sendmsg)(int, const msghdr*, int);
int (*real_connect)(int, const sockaddr*, socklen_t);

// Socket numbers given a receive or send timeout (SO_RCVTIMEO, SO_SNDTIMEO, either spelling).
constexpr int kTimedSockets = 1 << 16;
std::atomic<uint64_t> gTimedSocket[kTimedSockets / 64];


bool semWaits(const sembuf* ops, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (!(ops[i].sem_flg & IPC_NOWAIT)) return true;
  return false;
}

bool zero(const timespec* t) { return t && t->tv_sec == 0 && t->tv_nsec == 0; }

// -1: not known yet; 0: no REALTIME event; 1: waits are kept whole.
std::atomic<int> gQuiet{-1};

}  // namespace

bool timedSocket(int fd) {
  return fd >= 0 && fd < kTimedSockets && (gTimedSocket[fd / 64].load(std::memory_order_relaxed) >> (fd % 64)) & 1;
}

bool quietWaits() {
  int q = gQuiet.load(std::memory_order_relaxed);
  if (q < 0) {
    q = 0;
    for (unsigned i = 0; i < gConfig.nEvents; ++i) q |= gConfig.events[i].kind == SourceKind::RealTime;
    gQuiet.store(q, std::memory_order_relaxed);
  }
  return q != 0;
}

namespace {

// A kernel signal set (64 bits here) read from the application's memory without faulting: a
// bad pointer stays the kernel's to refuse (EFAULT), as unmeasured.
bool readKernelMask(long at, uint64_t& mask) {
  iovec local{&mask, sizeof mask}, remote{reinterpret_cast<void*>(at), sizeof mask};
  const int saved = errno;
  const bool ok = syscall(SYS_process_vm_readv, getpid(), &local, 1UL, &remote, 1UL, 0UL) == long(sizeof mask);
  errno = saved;
  return ok;
}

}  // namespace

bool rawWait(RawSyscall real, long number, const long (&args)[6], long& result) {
  long x[6] = {args[0], args[1], args[2], args[3], args[4], args[5]};
  auto endless = [](long ts) { return !zero(reinterpret_cast<const timespec*>(ts)); };
  bool blocking = false;
  int maskAt = -1;  // the argument holding a kernel mask (its size follows it)
  int pairAt = -1;  // the argument holding {mask, size} (pselect6, io_pgetevents)
  switch (number) {
  case SYS_io_getevents: blocking = endless(x[4]); break;
  case SYS_io_pgetevents: blocking = endless(x[4]), pairAt = 5; break;
  case SYS_nanosleep: blocking = endless(x[0]); break;
  case SYS_clock_nanosleep: blocking = endless(x[2]); break;
  case SYS_poll: blocking = int(x[2]) != 0; break;
  case SYS_ppoll: blocking = endless(x[2]), maskAt = 3; break;
  case SYS_epoll_wait: blocking = int(x[3]) != 0; break;
  case SYS_epoll_pwait: blocking = int(x[3]) != 0, maskAt = 4; break;
  case SYS_epoll_pwait2: blocking = endless(x[3]), maskAt = 4; break;
  case SYS_select: {
    const timeval* t = reinterpret_cast<const timeval*>(x[4]);
    blocking = !(t && t->tv_sec == 0 && t->tv_usec == 0);
    break;
  }
  case SYS_pselect6: blocking = endless(x[4]), pairAt = 5; break;
  case SYS_pause: blocking = true; break;
  default: return false;
  }
  if (!blocking) return false;
  QuietWait q(true, reinterpret_cast<const void*>(real));
  const uint64_t ours = uint64_t(1) << (gConfig.sampleSignal - 1);
  uint64_t mask = 0;
  struct {
    long mask;
    long size;
  } pair{};
  if (q.on() && maskAt >= 0 && x[maskAt] && x[maskAt + 1] == long(sizeof mask) && readKernelMask(x[maskAt], mask)) {
    mask |= ours;
    x[maskAt] = reinterpret_cast<long>(&mask);
  }
  if (q.on() && pairAt >= 0 && x[pairAt]) {
    iovec local{&pair, sizeof pair}, remote{reinterpret_cast<void*>(x[pairAt]), sizeof pair};
    const int saved = errno;
    const bool read = syscall(SYS_process_vm_readv, getpid(), &local, 1UL, &remote, 1UL, 0UL) == long(sizeof pair);
    errno = saved;
    if (read && pair.mask && pair.size == long(sizeof mask) && readKernelMask(pair.mask, mask)) {
      mask |= ours;
      pair.mask = reinterpret_cast<long>(&mask);
      x[pairAt] = reinterpret_cast<long>(&pair);
    }
  }
  result = q.done(real(number, x[0], x[1], x[2], x[3], x[4], x[5]));
  return true;
}

void waitsCreditUnfinished(ThreadState& t) {
  // A thread still in a kept-whole wait as the process ends (a progress thread in epoll_wait,
  // a listener in poll) never gets its deferred sample: its REALTIME time so far goes to the
  // function waited in, below the thread's root (its call path is not known here).
  const uintptr_t fn = t.waitingIn;
  if (!fn || !t.fence) return;
  const uint64_t now = nowNs(), since = t.waitingSince;
  if (now <= since) return;
  ModuleRef m = loadmapLookup(fn);
  CctNode* node = m.id ? t.cct.child(t.fence, m.id, m.offset) : nullptr;
  if (!node) return;
  for (unsigned i = 0; i < gConfig.nEvents; ++i)
    if (gConfig.events[i].kind == SourceKind::RealTime) {
      node->metrics()[i] += double(now - since) * 1e-9;
      node->hasValue = 1;
    }
  t.waitingIn = 0;
}

bool deferredSampleLeaf(const ThreadState& ts, const uintptr_t* frames, size_t n, uintptr_t& leaf) {
  // The sample the restored mask let in: interrupted in the mask's system call, called from
  // the wrapper (an application's handler running there instead leaves its own frames).
  if (!ts.deferredLeaf || n < 2 || !loadmapIsSelf(frames[1] - 1)) return false;
  leaf = ts.deferredLeaf;
  return true;
}

}  // namespace hpc::rt

using namespace hpc::rt;

HPC_EXPORT int nanosleep(const timespec* req, timespec* rem) {
  auto* fn = REAL(nanosleep);
  QuietWait q(!zero(req), reinterpret_cast<const void*>(fn));
  return q.done(fn(req, rem));
}

HPC_EXPORT int clock_nanosleep(clockid_t clock, int flags, const timespec* req, timespec* rem) {
  auto* fn = REAL(clock_nanosleep);
  QuietWait q(!zero(req), reinterpret_cast<const void*>(fn));
  return q.done(fn(clock, flags, req, rem));
}

HPC_EXPORT int usleep(useconds_t usec) {
  auto* fn = REAL(usleep);
  QuietWait q(usec != 0, reinterpret_cast<const void*>(fn));
  return q.done(fn(usec));
}

HPC_EXPORT unsigned sleep(unsigned seconds) {
  auto* fn = REAL(sleep);
  QuietWait q(seconds != 0, reinterpret_cast<const void*>(fn));
  return q.done(fn(seconds));
}

HPC_EXPORT int poll(pollfd* fds, nfds_t n, int timeout) {
  auto* fn = REAL(poll);
  QuietWait q(timeout != 0, reinterpret_cast<const void*>(fn));
  return q.done(fn(fds, n, timeout));
}

HPC_EXPORT int ppoll(pollfd* fds, nfds_t n, const timespec* timeout, const sigset_t* mask) {
  auto* fn = REAL(ppoll);
  QuietWait q(!zero(timeout), reinterpret_cast<const void*>(fn));
  return q.done(fn(fds, n, timeout, q.with(mask)));
}

HPC_EXPORT int select(int n, fd_set* r, fd_set* w, fd_set* e, timeval* timeout) {
  auto* fn = REAL(select);
  QuietWait q(!(timeout && timeout->tv_sec == 0 && timeout->tv_usec == 0), reinterpret_cast<const void*>(fn));
  return q.done(fn(n, r, w, e, timeout));
}

HPC_EXPORT int pselect(int n, fd_set* r, fd_set* w, fd_set* e, const timespec* timeout, const sigset_t* mask) {
  auto* fn = REAL(pselect);
  QuietWait q(!zero(timeout), reinterpret_cast<const void*>(fn));
  return q.done(fn(n, r, w, e, timeout, q.with(mask)));
}

HPC_EXPORT int epoll_wait(int fd, epoll_event* events, int max, int timeout) {
  auto* fn = REAL(epoll_wait);
  QuietWait q(timeout != 0, reinterpret_cast<const void*>(fn));
  return q.done(fn(fd, events, max, timeout));
}

HPC_EXPORT int epoll_pwait(int fd, epoll_event* events, int max, int timeout, const sigset_t* mask) {
  auto* fn = REAL(epoll_pwait);
  QuietWait q(timeout != 0, reinterpret_cast<const void*>(fn));
  return q.done(fn(fd, events, max, timeout, q.with(mask)));
}

HPC_EXPORT int pause() {
  auto* fn = REAL(pause);
  QuietWait q(true, reinterpret_cast<const void*>(fn));
  return q.done(fn());
}

HPC_EXPORT int sigsuspend(const sigset_t* mask) {
  auto* fn = REAL(sigsuspend);
  QuietWait q(true, reinterpret_cast<const void*>(fn));
  return q.done(fn(q.with(mask)));
}

// The signal waits take the sampling signal out of the set waited for: a program waiting for
// every signal (sigfillset) took our samples for signals of its own, where the wait kept it
// pending (a signal-handling thread under REALTIME got signal 61 from sigwaitinfo).
HPC_EXPORT int sigtimedwait(const sigset_t* set, siginfo_t* info, const timespec* timeout) {
  auto* fn = REAL(sigtimedwait);
  sigset_t mine;
  set = withoutSampleSignal(set, &mine);
  QuietWait q(!zero(timeout), reinterpret_cast<const void*>(fn));
  return q.done(fn(set, info, timeout));
}

HPC_EXPORT int sigwaitinfo(const sigset_t* set, siginfo_t* info) {
  auto* fn = REAL(sigwaitinfo);
  sigset_t mine;
  set = withoutSampleSignal(set, &mine);
  QuietWait q(true, reinterpret_cast<const void*>(fn));
  return q.done(fn(set, info));
}

HPC_EXPORT int sigwait(const sigset_t* set, int* sig) {
  auto* fn = REAL(sigwait);
  sigset_t mine;
  set = withoutSampleSignal(set, &mine);
  QuietWait q(true, reinterpret_cast<const void*>(fn));
  return q.done(fn(set, sig));
}

// Nor is it among the signals pending that the program is told of (one a wait left pending
// would then be waited for by a set the wait above empties of it: a wait without end).
HPC_EXPORT int sigpending(sigset_t* set) {
  const int r = REAL(sigpending)(set);
  if (r == 0 && gConfig.sampleSignal) sigdelset(set, gConfig.sampleSignal);
  return r;
}

// A signalfd reads the signals of its mask that are pending and blocked: while a wait of the
// program's (poll, epoll_wait: QuietWait) blocked the sampling signal, an event loop reading
// a signalfd of every signal got ours, 150 times in 0.3 s under REALTIME@1000.
HPC_EXPORT int signalfd(int fd, const sigset_t* mask, int flags) {
  sigset_t mine;
  return REAL(signalfd)(fd, withoutSampleSignal(mask, &mine), flags);
}

// glibc's timed semaphore waits end with EINTR after any handler (the futex wait with a
// deadline is not restarted), where the untimed sem_wait goes on: sem_timedwait returned
// EINTR at the first sample under REALTIME, ETIMEDOUT unmeasured. A semaphore that can be
// taken at once is taken without the two mask changes (POSIX lets the deadline go unchecked
// then).
namespace {
bool takenAtOnce(sem_t* sem) {
  const int saved = errno;
  const bool taken = sem_trywait(sem) == 0;
  errno = saved;
  return taken;
}
}  // namespace

HPC_EXPORT int sem_timedwait(sem_t* sem, const timespec* deadline) {
  if (takenAtOnce(sem)) return 0;
  auto* fn = REAL(sem_timedwait);
  QuietWait q(true, reinterpret_cast<const void*>(fn));
  return q.done(fn(sem, deadline));
}

HPC_EXPORT int sem_clockwait(sem_t* sem, clockid_t clock, const timespec* deadline) {
  if (takenAtOnce(sem)) return 0;
  auto* fn = REAL(sem_clockwait);
  QuietWait q(true, reinterpret_cast<const void*>(fn));
  return q.done(fn(sem, clock, deadline));
}

// POSIX AIO's wait ends with EINTR after any handler too (EAGAIN at its timeout unmeasured).
HPC_EXPORT int aio_suspend(const aiocb* const list[], int n, const timespec* timeout) {
  auto* fn = REAL(aio_suspend);
  QuietWait q(!zero(timeout), reinterpret_cast<const void*>(fn));
  return q.done(fn(list, n, timeout));
}

HPC_EXPORT int aio_suspend64(const aiocb64* const list[], int n, const timespec* timeout) {
  auto* fn = REAL(aio_suspend64);
  QuietWait q(!zero(timeout), reinterpret_cast<const void*>(fn));
  return q.done(fn(list, n, timeout));
}

HPC_EXPORT int epoll_pwait2(int fd, epoll_event* events, int max, const timespec* timeout, const sigset_t* mask) {
  auto* fn = REAL(epoll_pwait2);
  if (!fn) {
    errno = ENOSYS;
    return -1;
  }
  QuietWait q(!zero(timeout), reinterpret_cast<const void*>(fn));
  return q.done(fn(fd, events, max, timeout, q.with(mask)));
}

HPC_EXPORT int semop(int id, sembuf* ops, size_t n) {
  auto* fn = REAL(semop);
  QuietWait q(semWaits(ops, n), reinterpret_cast<const void*>(fn));
  return q.done(fn(id, ops, n));
}

HPC_EXPORT int semtimedop(int id, sembuf* ops, size_t n, const timespec* timeout) {
  auto* fn = REAL(semtimedop);
  QuietWait q(semWaits(ops, n) && !zero(timeout), reinterpret_cast<const void*>(fn));
  return q.done(fn(id, ops, n, timeout));
}

HPC_EXPORT ssize_t msgrcv(int id, void* msg, size_t size, long type, int flags) {
  auto* fn = REAL(msgrcv);
  QuietWait q(!(flags & IPC_NOWAIT), reinterpret_cast<const void*>(fn));
  return q.done(fn(id, msg, size, type, flags));
}

HPC_EXPORT int msgsnd(int id, const void* msg, size_t size, int flags) {
  auto* fn = REAL(msgsnd);
  QuietWait q(!(flags & IPC_NOWAIT), reinterpret_cast<const void*>(fn));
  return q.done(fn(id, msg, size, flags));
}

namespace {
int (*real_dup)(int);
int (*real_dup2)(int, int);
int (*real_dup3)(int, int, int);

// fd's mark as the socket from: a timeout set through one descriptor is the socket's, seen
// through its duplicates too.
void markAs(int fd, int from) {
  if (fd < 0 || fd >= kTimedSockets) return;
  const uint64_t bit = uint64_t(1) << (fd % 64);
  if (timedSocket(from)) gTimedSocket[fd / 64].fetch_or(bit, std::memory_order_relaxed);
  else gTimedSocket[fd / 64].fetch_and(~bit, std::memory_order_relaxed);
}
}  // namespace

HPC_EXPORT int dup(int fd) {
  const int r = REAL(dup)(fd);
  if (r >= 0) markAs(r, fd);
  return r;
}

HPC_EXPORT int dup2(int fd, int to) {
  const int r = REAL(dup2)(fd, to);
  if (r >= 0 && r != fd) markAs(r, fd);
  return r;
}

HPC_EXPORT int dup3(int fd, int to, int flags) {
  const int r = REAL(dup3)(fd, to, flags);
  if (r >= 0) markAs(r, fd);
  return r;
}

HPC_EXPORT int setsockopt(int fd, int level, int name, const void* value, socklen_t len) {
  const int r = REAL(setsockopt)(fd, level, name, value, len);
  // SO_RCVTIMEO and SO_SNDTIMEO, and their 64-bit-time spellings (66, 67).
  if (r == 0 && level == SOL_SOCKET && (name == SO_RCVTIMEO || name == SO_SNDTIMEO || name == 66 || name == 67) &&
      fd >= 0 && fd < kTimedSockets)
    gTimedSocket[fd / 64].fetch_or(uint64_t(1) << (fd % 64), std::memory_order_relaxed);
  return r;
}

HPC_EXPORT ssize_t recv(int fd, void* buf, size_t n, int flags) {
  auto* fn = REAL(recv);
  QuietWait q(timedSocket(fd) && !(flags & MSG_DONTWAIT), reinterpret_cast<const void*>(fn));
  return q.done(fn(fd, buf, n, flags));
}

HPC_EXPORT ssize_t recvfrom(int fd, void* buf, size_t n, int flags, sockaddr* from, socklen_t* len) {
  auto* fn = REAL(recvfrom);
  QuietWait q(timedSocket(fd) && !(flags & MSG_DONTWAIT), reinterpret_cast<const void*>(fn));
  return q.done(fn(fd, buf, n, flags, from, len));
}

HPC_EXPORT int __poll_chk(pollfd* fds, nfds_t n, int timeout, size_t room) {
  auto* fn = REAL(__poll_chk);
  QuietWait q(timeout != 0, reinterpret_cast<const void*>(fn));
  return q.done(fn(fds, n, timeout, room));
}

HPC_EXPORT int __ppoll_chk(pollfd* fds, nfds_t n, const timespec* timeout, const sigset_t* mask, size_t room) {
  auto* fn = REAL(__ppoll_chk);
  QuietWait q(!zero(timeout), reinterpret_cast<const void*>(fn));
  return q.done(fn(fds, n, timeout, q.with(mask), room));
}

HPC_EXPORT ssize_t __recv_chk(int fd, void* buf, size_t n, size_t room, int flags) {
  auto* fn = REAL(__recv_chk);
  QuietWait q(timedSocket(fd) && !(flags & MSG_DONTWAIT), reinterpret_cast<const void*>(fn));
  return q.done(fn(fd, buf, n, room, flags));
}

HPC_EXPORT ssize_t __recvfrom_chk(int fd, void* buf, size_t n, size_t room, int flags, sockaddr* from,
                                  socklen_t* len) {
  auto* fn = REAL(__recvfrom_chk);
  QuietWait q(timedSocket(fd) && !(flags & MSG_DONTWAIT), reinterpret_cast<const void*>(fn));
  return q.done(fn(fd, buf, n, room, flags, from, len));
}

HPC_EXPORT ssize_t recvmsg(int fd, msghdr* msg, int flags) {
  auto* fn = REAL(recvmsg);
  QuietWait q(timedSocket(fd) && !(flags & MSG_DONTWAIT), reinterpret_cast<const void*>(fn));
  return q.done(fn(fd, msg, flags));
}

HPC_EXPORT int recvmmsg(int fd, mmsghdr* msgs, unsigned n, int flags, timespec* timeout) {
  auto* fn = REAL(recvmmsg);
  QuietWait q((timedSocket(fd) || (timeout && !zero(timeout))) && !(flags & MSG_DONTWAIT), reinterpret_cast<const void*>(fn));
  return q.done(fn(fd, msgs, n, flags, timeout));
}

// A socket accepted from a listener given timeouts has them too (Linux clones the listener's).
HPC_EXPORT int accept(int fd, sockaddr* addr, socklen_t* len) {
  auto* fn = REAL(accept);
  QuietWait q(timedSocket(fd), reinterpret_cast<const void*>(fn));
  const int r = q.done(fn(fd, addr, len));
  if (r >= 0) markAs(r, fd);
  return r;
}

HPC_EXPORT int accept4(int fd, sockaddr* addr, socklen_t* len, int flags) {
  auto* fn = REAL(accept4);
  QuietWait q(timedSocket(fd), reinterpret_cast<const void*>(fn));
  const int r = q.done(fn(fd, addr, len, flags));
  if (r >= 0) markAs(r, fd);
  return r;
}

// A send of more than a page may also be cut short by a signal once some of it went out
// (as a pipe's write: io.cpp), on any socket.

HPC_EXPORT ssize_t send(int fd, const void* buf, size_t n, int flags) {
  auto* fn = REAL(send);
  QuietWait q((timedSocket(fd) || mayBeCut(n)) && !(flags & MSG_DONTWAIT), reinterpret_cast<const void*>(fn));
  return q.done(fn(fd, buf, n, flags));
}

HPC_EXPORT ssize_t sendto(int fd, const void* buf, size_t n, int flags, const sockaddr* to, socklen_t len) {
  auto* fn = REAL(sendto);
  QuietWait q((timedSocket(fd) || mayBeCut(n)) && !(flags & MSG_DONTWAIT), reinterpret_cast<const void*>(fn));
  return q.done(fn(fd, buf, n, flags, to, len));
}

HPC_EXPORT ssize_t sendmsg(int fd, const msghdr* msg, int flags) {
  auto* fn = REAL(sendmsg);
  QuietWait q((timedSocket(fd) || (msg && mayBeCut(msg->msg_iov, int(msg->msg_iovlen)))) && !(flags & MSG_DONTWAIT),
              reinterpret_cast<const void*>(fn));
  return q.done(fn(fd, msg, flags));
}

HPC_EXPORT int connect(int fd, const sockaddr* addr, socklen_t len) {
  auto* fn = REAL(connect);
  QuietWait q(timedSocket(fd), reinterpret_cast<const void*>(fn));
  return q.done(fn(fd, addr, len));
}
