#include "sys.hpp"

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
