// The IO source (`-e IO`: events IO::read and IO::write): the bytes each read or write call
// of the application moved, at the call's calling context. read, pread(64), readv, preadv,
// fread, fgets, getline and write, pwrite(64), writev, pwritev, fwrite, the printf family,
// fputs, puts are interposed, with their _unlocked and _FORTIFY_SOURCE (__*_chk) forms; the
// byte-at-a-time calls (fputc, getc, ...) and scanf are not. Each call that moved bytes unwinds from
// its wrapper (contextHere, sampling suspended meanwhile) and adds its count to its
// context's metric. Not sampled: every call counts; a call from where the thread's last one
// came from reuses its context (contextHere checks the stack's return addresses), any
// other pays an unwind. glibc's stdio reads and writes its buffers by internal calls no wrapper
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
size_t (*real_fread)(void*, size_t, size_t, FILE*);
size_t (*real_fwrite)(const void*, size_t, size_t, FILE*);
// What _FORTIFY_SOURCE compiles a call into where the buffer's size is known and the count is
// not (Debian's and Ubuntu's packages, Ubuntu's gcc by default): glibc's checked functions
// call the unchecked ones internally, where no wrapper sees them.
ssize_t (*real___read_chk)(int, void*, size_t, size_t);
ssize_t (*real___pread_chk)(int, void*, size_t, off_t, size_t);
ssize_t (*real___pread64_chk)(int, void*, size_t, off64_t, size_t);
size_t (*real___fread_chk)(void*, size_t, size_t, size_t, FILE*);
size_t (*real___fread_unlocked_chk)(void*, size_t, size_t, size_t, FILE*);
size_t (*real_fread_unlocked)(void*, size_t, size_t, FILE*);
size_t (*real_fwrite_unlocked)(const void*, size_t, size_t, FILE*);
ssize_t (*real_preadv)(int, const iovec*, int, off_t);
ssize_t (*real_preadv64)(int, const iovec*, int, off64_t);
ssize_t (*real_pwritev)(int, const iovec*, int, off_t);
ssize_t (*real_pwritev64)(int, const iovec*, int, off64_t);
// Formatted and line-wise stdio: the characters each call wrote or the line it read.
int (*real_vfprintf)(FILE*, const char*, va_list);
int (*real_vprintf)(const char*, va_list);
int (*real___vfprintf_chk)(FILE*, int, const char*, va_list);
int (*real___vprintf_chk)(int, const char*, va_list);
int (*real_vdprintf)(int, const char*, va_list);
int (*real___vdprintf_chk)(int, int, const char*, va_list);
int (*real_fputs)(const char*, FILE*);
int (*real_fputs_unlocked)(const char*, FILE*);
int (*real_puts)(const char*);
char* (*real_fgets)(char*, int, FILE*);
char* (*real_fgets_unlocked)(char*, int, FILE*);
char* (*real___fgets_chk)(char*, size_t, int, FILE*);
char* (*real___fgets_unlocked_chk)(char*, size_t, int, FILE*);
ssize_t (*real_getline)(char**, size_t*, FILE*);
ssize_t (*real_getdelim)(char**, size_t*, int, FILE*);
ssize_t (*real___getdelim)(char**, size_t*, int, FILE*);

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

// A call's result r, its bytes (r itself, or r items of `size` bytes) counted in direction dir.
template <class R> R counted(int dir, R r, size_t size = 1) {
  count(dir, ssize_t(r) * ssize_t(size));
  return r;
}

// A call's result r, the string it read or wrote (fgets's line, fputs's string; and extra,
// puts's newline) counted where it succeeded (ok).
template <class R> R countedText(int dir, R r, bool ok, const char* text, ssize_t extra = 0) {
  if (ok && text) count(dir, ssize_t(strlen(text)) + extra);
  return r;
}

}  // namespace

void ioInit() {
  // Looked up now, not at a first call: the sample handler itself reads a perf event's
  // count and writes a full trace buffer through these names, where dlsym must not run.
  REAL(read), REAL(write), REAL(pread), REAL(pread64), REAL(pwrite), REAL(pwrite64);
  REAL(readv), REAL(writev), REAL(fread), REAL(fwrite);
  REAL(__read_chk), REAL(__pread_chk), REAL(__pread64_chk), REAL(__fread_chk), REAL(__fread_unlocked_chk);
  REAL(fread_unlocked), REAL(fwrite_unlocked), REAL(preadv), REAL(preadv64), REAL(pwritev), REAL(pwritev64);
  REAL(vfprintf), REAL(vprintf), REAL(__vfprintf_chk), REAL(__vprintf_chk), REAL(vdprintf), REAL(__vdprintf_chk);
  REAL(fputs), REAL(fputs_unlocked), REAL(puts), REAL(fgets), REAL(fgets_unlocked), REAL(__fgets_chk);
  REAL(__fgets_unlocked_chk), REAL(getline), REAL(getdelim), REAL(__getdelim);
  for (unsigned i = 0; i < gConfig.nEvents; ++i) {
    if (gConfig.events[i].kind == SourceKind::IoRead) gEvent[0].store(int(i), std::memory_order_relaxed);
    if (gConfig.events[i].kind == SourceKind::IoWrite) gEvent[1].store(int(i), std::memory_order_relaxed);
  }
}

}  // namespace hpc::rt

using namespace hpc::rt;

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

HPC_EXPORT size_t fread(void* buf, size_t size, size_t n, FILE* f) {
  return counted(0, REAL(fread)(buf, size, n, f), size);
}

HPC_EXPORT size_t fwrite(const void* buf, size_t size, size_t n, FILE* f) {
  return counted(1, REAL(fwrite)(buf, size, n, f), size);
}

HPC_EXPORT size_t fread_unlocked(void* buf, size_t size, size_t n, FILE* f) {
  return counted(0, REAL(fread_unlocked)(buf, size, n, f), size);
}

HPC_EXPORT size_t fwrite_unlocked(const void* buf, size_t size, size_t n, FILE* f) {
  return counted(1, REAL(fwrite_unlocked)(buf, size, n, f), size);
}

HPC_EXPORT size_t __fread_chk(void* buf, size_t room, size_t size, size_t n, FILE* f) {
  return counted(0, REAL(__fread_chk)(buf, room, size, n, f), size);
}

HPC_EXPORT size_t __fread_unlocked_chk(void* buf, size_t room, size_t size, size_t n, FILE* f) {
  return counted(0, REAL(__fread_unlocked_chk)(buf, room, size, n, f), size);
}

// The printf family: the characters written (its result). fputc, putc and putchar, fgetc and
// getc (a byte a call), and the scanf family (no byte count to return) are not counted.
HPC_EXPORT int vfprintf(FILE* f, const char* fmt, va_list ap) { return counted(1, REAL(vfprintf)(f, fmt, ap)); }
HPC_EXPORT int vprintf(const char* fmt, va_list ap) { return counted(1, REAL(vprintf)(fmt, ap)); }
HPC_EXPORT int vdprintf(int fd, const char* fmt, va_list ap) { return counted(1, REAL(vdprintf)(fd, fmt, ap)); }

HPC_EXPORT int __vfprintf_chk(FILE* f, int flag, const char* fmt, va_list ap) {
  return counted(1, REAL(__vfprintf_chk)(f, flag, fmt, ap));
}

HPC_EXPORT int __vprintf_chk(int flag, const char* fmt, va_list ap) {
  return counted(1, REAL(__vprintf_chk)(flag, fmt, ap));
}

HPC_EXPORT int __vdprintf_chk(int fd, int flag, const char* fmt, va_list ap) {
  return counted(1, REAL(__vdprintf_chk)(fd, flag, fmt, ap));
}

// The variadic forms, through the v-forms above (each a call of the application's here).
#define HPC_VARIADIC(call)  \
  va_list ap;               \
  va_start(ap, fmt);        \
  const int r = (call);     \
  va_end(ap);               \
  return counted(1, r)

HPC_EXPORT int fprintf(FILE* f, const char* fmt, ...) { HPC_VARIADIC(REAL(vfprintf)(f, fmt, ap)); }
HPC_EXPORT int printf(const char* fmt, ...) { HPC_VARIADIC(REAL(vprintf)(fmt, ap)); }
HPC_EXPORT int dprintf(int fd, const char* fmt, ...) { HPC_VARIADIC(REAL(vdprintf)(fd, fmt, ap)); }
HPC_EXPORT int __fprintf_chk(FILE* f, int flag, const char* fmt, ...) { HPC_VARIADIC(REAL(__vfprintf_chk)(f, flag, fmt, ap)); }
HPC_EXPORT int __printf_chk(int flag, const char* fmt, ...) { HPC_VARIADIC(REAL(__vprintf_chk)(flag, fmt, ap)); }
HPC_EXPORT int __dprintf_chk(int fd, int flag, const char* fmt, ...) { HPC_VARIADIC(REAL(__vdprintf_chk)(fd, flag, fmt, ap)); }
#undef HPC_VARIADIC

HPC_EXPORT int fputs(const char* s, FILE* f) {
  const int r = REAL(fputs)(s, f);
  return countedText(1, r, r >= 0, s);
}

HPC_EXPORT int fputs_unlocked(const char* s, FILE* f) {
  const int r = REAL(fputs_unlocked)(s, f);
  return countedText(1, r, r >= 0, s);
}

HPC_EXPORT int puts(const char* s) {
  const int r = REAL(puts)(s);
  return countedText(1, r, r >= 0, s, 1);
}

// fgets: the line read (a line holding a NUL counts up to it).
HPC_EXPORT char* fgets(char* s, int n, FILE* f) {
  char* r = REAL(fgets)(s, n, f);
  return countedText(0, r, r != nullptr, s);
}

HPC_EXPORT char* fgets_unlocked(char* s, int n, FILE* f) {
  char* r = REAL(fgets_unlocked)(s, n, f);
  return countedText(0, r, r != nullptr, s);
}

HPC_EXPORT char* __fgets_chk(char* s, size_t room, int n, FILE* f) {
  char* r = REAL(__fgets_chk)(s, room, n, f);
  return countedText(0, r, r != nullptr, s);
}

HPC_EXPORT char* __fgets_unlocked_chk(char* s, size_t room, int n, FILE* f) {
  char* r = REAL(__fgets_unlocked_chk)(s, room, n, f);
  return countedText(0, r, r != nullptr, s);
}

HPC_EXPORT ssize_t getline(char** line, size_t* cap, FILE* f) { return counted(0, REAL(getline)(line, cap, f)); }

HPC_EXPORT ssize_t getdelim(char** line, size_t* cap, int delim, FILE* f) {
  return counted(0, REAL(getdelim)(line, cap, delim, f));
}

HPC_EXPORT ssize_t __getdelim(char** line, size_t* cap, int delim, FILE* f) {
  return counted(0, REAL(__getdelim)(line, cap, delim, f));
}
