// The IO source (`-e IO`: events IO::read and IO::write): the bytes each read or write call
// of the application moved, at the call's calling context. read, pread(64), readv, fread and
// write, pwrite(64), writev, fwrite are interposed; each call that moved bytes unwinds from
// its wrapper (contextHere, sampling suspended meanwhile) and adds its count to its
// context's metric. Not sampled: every call counts, and a program of many small calls pays
// an unwind each. glibc's stdio reads and writes its buffers by internal calls no wrapper
// sees: fread and fwrite count what the application asked for, and the system calls under
// them are not counted again. The runtime's own writes (profiles, traces, the log) run with
// sampling suspended, or in the handler, or after the measurement: never counted.
//
// Under REALTIME (whatever the events), a transfer of more than a page runs with the sampling
// signal blocked (QuietWait, waits.hpp): a signal that comes while the kernel copies one
// ends it early with what it moved so far, a short read or write that SA_RESTART does not
// undo. `dd if=/dev/urandom bs=4M count=5` copied 1.5 MB instead of 20 under REALTIME@1000,
// and `dd if=/dev/zero bs=1M` piped to md5sum gave another sum each run; a large write to a
// pipe or socket returned short the same way. Smaller transfers are not cut (a page copied
// at most, and a pipe write of at most PIPE_BUF is atomic), and pay nothing.
#include <stdio.h>
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
size_t (*real_fread)(void*, size_t, size_t, FILE*);
size_t (*real_fwrite)(const void*, size_t, size_t, FILE*);

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
  REAL(readv), REAL(writev), REAL(fread), REAL(fwrite);
  for (unsigned i = 0; i < gConfig.nEvents; ++i) {
    if (gConfig.events[i].kind == SourceKind::IoRead) gEvent[0].store(int(i), std::memory_order_relaxed);
    if (gConfig.events[i].kind == SourceKind::IoWrite) gEvent[1].store(int(i), std::memory_order_relaxed);
  }
}

}  // namespace hpc::rt

using namespace hpc::rt;

HPC_EXPORT ssize_t read(int fd, void* buf, size_t n) {
  const ssize_t r = whole(REAL(read), mayBeCut(n), fd, buf, n);
  count(0, r);
  return r;
}

HPC_EXPORT ssize_t write(int fd, const void* buf, size_t n) {
  const ssize_t r = whole(REAL(write), mayBeCut(n), fd, buf, n);
  count(1, r);
  return r;
}

HPC_EXPORT ssize_t pread(int fd, void* buf, size_t n, off_t at) {
  const ssize_t r = whole(REAL(pread), mayBeCut(n), fd, buf, n, at);
  count(0, r);
  return r;
}

HPC_EXPORT ssize_t pread64(int fd, void* buf, size_t n, off64_t at) {
  const ssize_t r = whole(REAL(pread64), mayBeCut(n), fd, buf, n, at);
  count(0, r);
  return r;
}

HPC_EXPORT ssize_t pwrite(int fd, const void* buf, size_t n, off_t at) {
  const ssize_t r = whole(REAL(pwrite), mayBeCut(n), fd, buf, n, at);
  count(1, r);
  return r;
}

HPC_EXPORT ssize_t pwrite64(int fd, const void* buf, size_t n, off64_t at) {
  const ssize_t r = whole(REAL(pwrite64), mayBeCut(n), fd, buf, n, at);
  count(1, r);
  return r;
}

HPC_EXPORT ssize_t readv(int fd, const iovec* iov, int n) {
  const ssize_t r = whole(REAL(readv), mayBeCut(iov, n), fd, iov, n);
  count(0, r);
  return r;
}

HPC_EXPORT ssize_t writev(int fd, const iovec* iov, int n) {
  const ssize_t r = whole(REAL(writev), mayBeCut(iov, n), fd, iov, n);
  count(1, r);
  return r;
}

HPC_EXPORT size_t fread(void* buf, size_t size, size_t n, FILE* f) {
  const size_t r = REAL(fread)(buf, size, n, f);
  count(0, ssize_t(r * size));
  return r;
}

HPC_EXPORT size_t fwrite(const void* buf, size_t size, size_t n, FILE* f) {
  const size_t r = REAL(fwrite)(buf, size, n, f);
  count(1, ssize_t(r * size));
  return r;
}
