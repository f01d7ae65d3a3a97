// Test shim (LD_PRELOAD): opening a trace (*.hpctrace) first sleeps SLOW_OPEN_SECONDS
// (default 30), so that a test can interrupt a tool at a known point of its run: hpcprof
// reads traces only once its temporary database exists.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static void maybe_sleep(const char* path) {
  const size_t n = strlen(path), k = strlen(".hpctrace");
  if (n < k || strcmp(path + n - k, ".hpctrace") != 0) return;
  const char* s = getenv("SLOW_OPEN_SECONDS");
  sleep(s ? (unsigned)atoi(s) : 30u);
}

static mode_t mode_of(int flags, va_list ap) {
  return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}
// The mode argument, where the flags say there is one.
#define TAKE_MODE(flags, mode) \
  do {                         \
    va_list ap;                \
    va_start(ap, flags);       \
    mode = mode_of(flags, ap); \
    va_end(ap);                \
  } while (0)

static int open_as(const char* symbol, const char* path, int flags, mode_t mode) {
  maybe_sleep(path);
  int (*real)(const char*, int, ...) = (int (*)(const char*, int, ...))dlsym(RTLD_NEXT, symbol);
  return real(path, flags, mode);
}

int open(const char* path, int flags, ...) {
  mode_t mode;
  TAKE_MODE(flags, mode);
  return open_as("open", path, flags, mode);
}

int open64(const char* path, int flags, ...) {
  mode_t mode;
  TAKE_MODE(flags, mode);
  return open_as("open64", path, flags, mode);
}

int openat(int dir, const char* path, int flags, ...) {
  mode_t mode;
  TAKE_MODE(flags, mode);
  maybe_sleep(path);
  int (*real)(int, const char*, int, ...) = (int (*)(int, const char*, int, ...))dlsym(RTLD_NEXT, "openat");
  return real(dir, path, flags, mode);
}
