// The MEMLEAK source's wrappers (memleak.hpp), in libhpcrun_memleak.so, which the launcher
// preloads beside libhpcrun.so only with -e MEMLEAK: malloc, calloc, realloc, reallocarray,
// free, posix_memalign, aligned_alloc, memalign, valloc and pvalloc (C++'s new and delete call
// these), each passing
// its block to libhpcrun.so's hooks. The real functions are looked up at their first call;
// dlsym may allocate meanwhile, served from a static buffer of this library's (its blocks
// are never freed to the real free).
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>

#include "interpose.hpp"
#include "memleak.hpp"

namespace {

void* (*real_malloc)(size_t);
void* (*real_calloc)(size_t, size_t);
void* (*real_realloc)(void*, size_t);
void (*real_free)(void*);
int (*real_posix_memalign)(void**, size_t, size_t);
void* (*real_aligned_alloc)(size_t, size_t);
void* (*real_memalign)(size_t, size_t);
void* (*real_valloc)(size_t);
void* (*real_pvalloc)(size_t);

alignas(16) char gBoot[64 << 10];
std::atomic<size_t> gBootUsed{0};
thread_local bool tlsResolving __attribute__((tls_model("initial-exec"))) = false;

bool inBoot(const void* p) { return p >= gBoot && p < gBoot + sizeof gBoot; }

void* bootAlloc(size_t n) {  // zeroed: static storage never handed out twice
  n = (n + 15) & ~size_t{15};
  const size_t at = gBootUsed.fetch_add(n, std::memory_order_relaxed);
  if (at + n > sizeof gBoot || at + n < at) {
    errno = ENOMEM;
    return nullptr;
  }
  return gBoot + at;
}

template <class Fn> Fn resolve(Fn& slot, const char* name) {
  if (!slot) {
    tlsResolving = true;
    slot = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
    tlsResolving = false;
  }
  return slot;
}

void* tracked(void* p, size_t n) {
  if (p) hpcrun_memleak_alloc(p, n);
  return p;
}

}  // namespace

HPC_EXPORT void* malloc(size_t n) {
  if (tlsResolving) return bootAlloc(n);
  return tracked(resolve(real_malloc, "malloc")(n), n);
}

HPC_EXPORT void* calloc(size_t k, size_t n) {
  size_t bytes = 0;
  if (__builtin_mul_overflow(k, n, &bytes)) {
    errno = ENOMEM;
    return nullptr;
  }
  if (tlsResolving) return bootAlloc(bytes);
  return tracked(resolve(real_calloc, "calloc")(k, n), bytes);
}

HPC_EXPORT void free(void* p) {
  if (!p || inBoot(p)) return;
  hpcrun_memleak_free(p);
  resolve(real_free, "free")(p);
}

HPC_EXPORT void* realloc(void* p, size_t n) {
  if (inBoot(p)) {  // a dlsym block grown: copied out (its size unknown: what fits before the buffer's end)
    void* q = malloc(n);
    if (q) memcpy(q, p, n < size_t(gBoot + sizeof gBoot - static_cast<char*>(p)) ? n : size_t(gBoot + sizeof gBoot - static_cast<char*>(p)));
    return q;
  }
  if (tlsResolving) return bootAlloc(n);
  if (p) hpcrun_memleak_free(p);  // the old block is gone (or the same address, new size)
  return tracked(resolve(real_realloc, "realloc")(p, n), n);
}

HPC_EXPORT int posix_memalign(void** out, size_t align, size_t n) {
  const int rc = resolve(real_posix_memalign, "posix_memalign")(out, align, n);
  if (rc == 0) tracked(*out, n);
  return rc;
}

HPC_EXPORT void* aligned_alloc(size_t align, size_t n) {
  return tracked(resolve(real_aligned_alloc, "aligned_alloc")(align, n), n);
}

HPC_EXPORT void* memalign(size_t align, size_t n) { return tracked(resolve(real_memalign, "memalign")(align, n), n); }

HPC_EXPORT void* valloc(size_t n) { return tracked(resolve(real_valloc, "valloc")(n), n); }

HPC_EXPORT void* pvalloc(size_t n) { return tracked(resolve(real_pvalloc, "pvalloc")(n), n); }

// glibc's reallocarray calls its realloc inside, past this library: through ours instead, so
// that the block's old address is let go of.
HPC_EXPORT void* reallocarray(void* p, size_t k, size_t n) {
  size_t bytes = 0;
  if (__builtin_mul_overflow(k, n, &bytes)) {
    errno = ENOMEM;
    return nullptr;
  }
  return realloc(p, bytes);
}
