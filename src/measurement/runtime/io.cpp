// The IO source (`-e IO`: events IO::read and IO::write): the bytes each read or write call
// of the application moved, at the call's calling context. Here the system-call level: read,
// pread(64), readv, preadv(64) and write, pwrite(64), writev, pwritev(64), with the
// _FORTIFY_SOURCE forms of the reads (__read_chk, __pread_chk, __pread64_chk); stdio's calls
// are counted by libhpcrun_io.so (io_stdio.cpp), preloaded with -e IO only, through
// hpcrun_io_count. Each call that moved bytes unwinds from its wrapper (contextHere, sampling
// suspended meanwhile) and adds its count to its context's metric. Not sampled: every call
// counts; a call from where the thread's last one came from reuses its context (contextHere
// checks the stack's return addresses), any other pays an unwind. The runtime's own writes
// (profiles, traces, the log) run with sampling suspended, or in the handler, or after the
// measurement: never counted.
//
// Under REALTIME (whatever the events), a transfer of more than a page runs with the sampling
// signal blocked (QuietWait, waits.hpp): a signal that comes while the kernel copies one
// ends it early with what it moved so far, a short read or write that SA_RESTART does not
// undo. `dd if=/dev/urandom bs=4M count=5` copied 1.5 MB instead of 20 under REALTIME@1000,
// and `dd if=/dev/zero bs=1M` piped to md5sum gave another sum each run; a large write to a
// pipe or socket returned short the same way. Smaller transfers are not cut (a page copied
// at most, and a pipe write of at most PIPE_BUF is atomic), and pay nothing. A read or write
// on a socket given a timeout (timedSocket, waits.hpp) is kept whole too, whatever its size:
// Linux ends it with EINTR after any handler (a read that waited 0.1 s for EAGAIN bare
// returned EINTR at the first sample).
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "interpose.hpp"
#include "io.hpp"
#include "process.hpp"
#include "sample.hpp"
#include "state.hpp"
#include "waits.hpp"

namespace hpc::rt {

namespace {

ssize_t (*real_read)(int, void*, size_t);
ssize_t (*real_write)(int, const void*, size_t);
ssize_t (*real_pread)(int, void*, size_t, off_t);
ssize_t (*real_pread64)(int, void*, size_t, off64_t);
ssize_t (*real_pwrite)(int, const void*, size_t, off_t);
ssize_t (*real_pwrite64)(int, const void*, size_t, off64_t);
ssize_t (*real_readv)(int, const iovec*, int);
ssize_t (*real_writev)(int, const iovec*, int);
// What _FORTIFY_SOURCE compiles a call into where the buffer's size is known and the count is
// not (Debian's and Ubuntu's packages, Ubuntu's gcc by default): glibc's checked functions
// call the unchecked ones internally, where no wrapper sees them.
ssize_t (*real___read_chk)(int, void*, size_t, size_t);
ssize_t (*real___pread_chk)(int, void*, size_t, off_t, size_t);
ssize_t (*real___pread64_chk)(int, void*, size_t, off64_t, size_t);
ssize_t (*real_preadv)(int, const iovec*, int, off_t);
ssize_t (*real_preadv64)(int, const iovec*, int, off64_t);
ssize_t (*real_pwritev)(int, const iovec*, int, off_t);
ssize_t (*real_pwritev64)(int, const iovec*, int, off64_t);

// Each direction's event index, -1 where not measured (and until the event list is read).
std::atomic<int> gEvent[2] = {-1, -1};

int eventOf(int dir) { return gEvent[dir].load(std::memory_order_relaxed); }

// Adds bytes to the calling context of the I/O call being wrapped (dir 0: read, 1: write).
void count(int dir, ssize_t bytes) {
  if (bytes <= 0) return;
  const int ev = eventOf(dir);
  if (ev < 0 || !gSampling.load(std::memory_order_acquire)) return;
  ThreadState* ts = currentThread();
  if (!ts || ts->suspend > 0 || ts->inHandler.load(std::memory_order_relaxed) ||
      ts->phase.load(std::memory_order_acquire) != ThreadPhase::Running)
    return;
  const int saved = errno;
  {
    SuspendSampling guard;
    if (CctNode* node = contextHere(*ts)) {
      node->metrics()[ev] += double(bytes);
      node->hasValue = 1;
    }
  }
  errno = saved;
}

// REAL(fn) of a transfer, kept whole under REALTIME where a signal could cut it short.
template <class Fn, class... Args> ssize_t whole(Fn* fn, bool cuttable, Args... args) {
  QuietWait q(cuttable, reinterpret_cast<const void*>(fn));
  return q.done(fn(args...));
}


}  // namespace

void ioInit() {
  // Looked up now, not at a first call: the sample handler itself reads a perf event's
  // count and writes a full trace buffer through these names, where dlsym must not run.
  REAL(read), REAL(write), REAL(pread), REAL(pread64), REAL(pwrite), REAL(pwrite64);
  REAL(readv), REAL(writev), REAL(preadv), REAL(preadv64), REAL(pwritev), REAL(pwritev64);
  REAL(__read_chk), REAL(__pread_chk), REAL(__pread64_chk);
  for (unsigned i = 0; i < gConfig.nEvents; ++i) {
    if (gConfig.events[i].kind == SourceKind::IoRead) gEvent[0].store(int(i), std::memory_order_relaxed);
    if (gConfig.events[i].kind == SourceKind::IoWrite) gEvent[1].store(int(i), std::memory_order_relaxed);
  }
}

}  // namespace hpc::rt

using namespace hpc::rt;

HPC_EXPORT void hpcrun_io_count(int dir, long bytes) { count(dir, ssize_t(bytes)); }

HPC_EXPORT ssize_t read(int fd, void* buf, size_t n) {
  return counted(0, whole(REAL(read), mayBeCut(n) || timedSocket(fd), fd, buf, n));
}

HPC_EXPORT ssize_t write(int fd, const void* buf, size_t n) {
  return counted(1, whole(REAL(write), mayBeCut(n) || timedSocket(fd), fd, buf, n));
}

HPC_EXPORT ssize_t pread(int fd, void* buf, size_t n, off_t at) {
  return counted(0, whole(REAL(pread), mayBeCut(n), fd, buf, n, at));
}

HPC_EXPORT ssize_t pread64(int fd, void* buf, size_t n, off64_t at) {
  return counted(0, whole(REAL(pread64), mayBeCut(n), fd, buf, n, at));
}

HPC_EXPORT ssize_t pwrite(int fd, const void* buf, size_t n, off_t at) {
  return counted(1, whole(REAL(pwrite), mayBeCut(n), fd, buf, n, at));
}

HPC_EXPORT ssize_t pwrite64(int fd, const void* buf, size_t n, off64_t at) {
  return counted(1, whole(REAL(pwrite64), mayBeCut(n), fd, buf, n, at));
}

HPC_EXPORT ssize_t readv(int fd, const iovec* iov, int n) {
  return counted(0, whole(REAL(readv), mayBeCut(iov, n) || timedSocket(fd), fd, iov, n));
}

HPC_EXPORT ssize_t writev(int fd, const iovec* iov, int n) {
  return counted(1, whole(REAL(writev), mayBeCut(iov, n) || timedSocket(fd), fd, iov, n));
}

HPC_EXPORT ssize_t preadv(int fd, const iovec* iov, int n, off_t at) {
  return counted(0, whole(REAL(preadv), mayBeCut(iov, n), fd, iov, n, at));
}

HPC_EXPORT ssize_t preadv64(int fd, const iovec* iov, int n, off64_t at) {
  return counted(0, whole(REAL(preadv64), mayBeCut(iov, n), fd, iov, n, at));
}

HPC_EXPORT ssize_t pwritev(int fd, const iovec* iov, int n, off_t at) {
  return counted(1, whole(REAL(pwritev), mayBeCut(iov, n), fd, iov, n, at));
}

HPC_EXPORT ssize_t pwritev64(int fd, const iovec* iov, int n, off64_t at) {
  return counted(1, whole(REAL(pwritev64), mayBeCut(iov, n), fd, iov, n, at));
}

// _FORTIFY_SOURCE's checked reads (room: the buffer's size the compiler knew).
HPC_EXPORT ssize_t __read_chk(int fd, void* buf, size_t n, size_t room) {
  return counted(0, whole(REAL(__read_chk), mayBeCut(n) || timedSocket(fd), fd, buf, n, room));
}

HPC_EXPORT ssize_t __pread_chk(int fd, void* buf, size_t n, off_t at, size_t room) {
  return counted(0, whole(REAL(__pread_chk), mayBeCut(n), fd, buf, n, at, room));
}

HPC_EXPORT ssize_t __pread64_chk(int fd, void* buf, size_t n, off64_t at, size_t room) {
  return counted(0, whole(REAL(__pread64_chk), mayBeCut(n), fd, buf, n, at, room));
}

