#include "sys.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

namespace hpc::rt {

pid_t sysGettid() { return pid_t(syscall(SYS_gettid)); }

uint64_t nowNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

uint64_t monotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

uint64_t threadCpuNs(int tid) {
  // The kernel's clock id of a thread's CPU time (its scheduler's: CPUCLOCK_SCHED, per thread).
  const clockid_t clock = clockid_t((~unsigned(tid)) << 3) | 6;
  timespec t;
  if (clock_gettime(clock, &t) != 0) return 0;
  return uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_nsec);
}

bool writeAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= size_t(w);
  }
  return true;
}

namespace {

// The lowest number a kept descriptor moves to: three quarters of the way to the soft limit
// on open files, at most 768 (an fd table that large costs the kernel 6 KiB; a limit of a
// million would cost megabytes). 0: not known yet.
int gHighBase = 0;

KeptFile* gSpare = nullptr;

bool sameFile(int fd, const KeptFile& f) {
  struct stat st;
  return fstat(fd, &st) == 0 && uint64_t(st.st_dev) == f.dev && uint64_t(st.st_ino) == f.ino;
}

bool adopt(KeptFile& f, int fd) {
  if (fd < 0) return false;
  fd = keptMoveHigh(fd);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return false;
  }
  f.fd = fd;
  f.dev = uint64_t(st.st_dev);
  f.ino = uint64_t(st.st_ino);
  return true;
}

}  // namespace

int keptHighBase() {
  if (gHighBase == 0) {
    rlimit lim{};
    uint64_t soft = getrlimit(RLIMIT_NOFILE, &lim) == 0 ? uint64_t(lim.rlim_cur) : 1024;
    uint64_t base = soft / 4 * 3;
    gHighBase = int(base > 768 ? 768 : base < 3 ? 3 : base);
  }
  return gHighBase;
}

int keptMoveHigh(int fd) {
  if (fd < 0 || fd >= keptHighBase()) return fd;
  int high = fcntl(fd, F_DUPFD_CLOEXEC, gHighBase);
  if (high < 0) return fd;  // none free up there: the number it has
  close(fd);
  return high;
}

void keptSetSpare(KeptFile* f) { gSpare = f; }

int openOutput(const char* path, int flags) {
  int fd = open(path, flags | O_CLOEXEC, 0644);
  if (fd >= 0 || errno != EMFILE || !gSpare || gSpare->fd < 0) return fd;
  // Every number the application may have is taken (an application leaking descriptors, or
  // a server out of them): the spare's is given up for this file, and the spare opened
  // again by its path at its next use, once a number is free.
  if (sameFile(gSpare->fd, *gSpare)) close(gSpare->fd);
  gSpare->fd = -1;
  return open(path, flags | O_CLOEXEC, 0644);
}

bool keptOpen(KeptFile& f, const char* path, int flags) {
  f.fd = -1;
  f.path = adopt(f, openOutput(path, flags)) ? path : nullptr;
  return f.path != nullptr;
}

int keptFd(KeptFile& f) {
  if (!f.path) return -1;
  if (f.fd >= 0 && sameFile(f.fd, f)) return f.fd;
  // The number is the application's now (or nobody's): left alone, the file opened again
  // (tried again at the next use where that fails: the application may have run out of
  // descriptors for a while).
  f.fd = -1;
  adopt(f, &f == gSpare ? open(f.path, O_WRONLY | O_APPEND | O_CLOEXEC) : openOutput(f.path, O_WRONLY | O_APPEND));
  return f.fd;
}

void keptClose(KeptFile& f) {
  if (f.fd >= 0 && sameFile(f.fd, f)) close(f.fd);
  f.fd = -1;
  f.path = nullptr;
}

size_t strLen(const char* s) {
  size_t n = 0;
  while (s[n]) ++n;
  return n;
}

void memCopy(void* dst, const void* src, size_t n) {
  auto* d = static_cast<char*>(dst);
  auto* s = static_cast<const char*>(src);
  for (size_t i = 0; i < n; ++i) d[i] = s[i];
}

void memZero(void* dst, size_t n) {
  auto* d = static_cast<volatile char*>(dst);
  for (size_t i = 0; i < n; ++i) d[i] = 0;
}

bool strEq(const char* a, const char* b) {
  while (*a && *a == *b) ++a, ++b;
  return *a == *b;
}

bool strStartsWith(const char* s, const char* prefix) {
  while (*prefix)
    if (*s++ != *prefix++) return false;
  return true;
}

Text& Text::str(const char* s) { return str(s, strLen(s)); }

Text& Text::str(const char* s, size_t n) {
  for (size_t i = 0; i < n && len_ + 1 < cap_; ++i) buf_[len_++] = s[i];
  buf_[len_] = 0;
  return *this;
}

Text& Text::ch(char c) { return str(&c, 1); }

Text& Text::dec(uint64_t v, int width) {
  char tmp[24];
  int n = 0;
  do {
    tmp[n++] = char('0' + v % 10);
    v /= 10;
  } while (v);
  while (n < width && n < 24) tmp[n++] = '0';
  while (n) ch(tmp[--n]);
  return *this;
}

Text& Text::sdec(int64_t v) {
  if (v < 0) {
    ch('-');
    return dec(uint64_t(-(v + 1)) + 1);
  }
  return dec(uint64_t(v));
}

Text& Text::hex(uint64_t v, int width) {
  char tmp[20];
  int n = 0;
  do {
    tmp[n++] = "0123456789abcdef"[v & 15];
    v >>= 4;
  } while (v);
  while (n < width && n < 20) tmp[n++] = '0';
  while (n) ch(tmp[--n]);
  return *this;
}

void complain(const char* msg) {
  char buf[512];
  Text t(buf, sizeof buf);
  t.str("hpcrun: ").str(msg).ch('\n');
  writeAll(2, t.c_str(), t.size());
}

}  // namespace hpc::rt
