#include "loadmap.hpp"

#include <elf.h>
#include <link.h>
#include <sched.h>
#include <unistd.h>

#include <atomic>

#include "arena.hpp"
#include "sys.hpp"

namespace hpc::rt {

namespace {

struct Range {
  uintptr_t lo, hi, bias;
  uint16_t id;
};

struct Snapshot {
  uint32_t n;
  uint32_t cap;
  Range r[1];
};

char (*gPaths)[kModulePathMax] = nullptr;   // id -> path, append-only
std::atomic<uint16_t> gCount{0};
std::atomic<Snapshot*> gSnap{nullptr};
std::atomic<bool> gLock{false};
char gVdsoPath[kModulePathMax];
char gPseudoPath[kPseudoModules][kModulePathMax];
std::atomic<uint16_t> gPseudoId[kPseudoModules];
char gExePath[kModulePathMax];
uintptr_t gSelfLo = 0, gSelfHi = 0;
// The code of the runtime's helper libraries, its own too: libhpcrun_io.so (-e IO's stdio
// wrappers) and libhpcrun_memleak.so (-e MEMLEAK's malloc family).
std::atomic<uintptr_t> gHelperLo[2] = {0, 0}, gHelperHi[2] = {0, 0};

int helperLibrary(const char* path) {
  static constexpr const char* kNames[2] = {"/libhpcrun_io.so", "/libhpcrun_memleak.so"};
  const size_t n = strLen(path);
  for (int i = 0; i < 2; ++i) {
    const size_t k = strLen(kNames[i]);
    if (n >= k && strEq(path + n - k, kNames[i])) return i;
  }
  return -1;
}

uint16_t internPath(const char* path) {
  uint16_t n = gCount.load(std::memory_order_relaxed);
  for (uint16_t i = 1; i <= n; ++i)
    if (strEq(gPaths[i], path)) return i;
  if (n + 1u >= kMaxModules) return 0;
  Text t(gPaths[n + 1], kModulePathMax);
  t.str(path);
  gCount.store(uint16_t(n + 1), std::memory_order_release);
  return uint16_t(n + 1);
}

struct Collect {
  Snapshot* snap;
};

int onObject(dl_phdr_info* info, size_t, void* data) {
  auto* c = static_cast<Collect*>(data);
  const char* name = info->dlpi_name;
  if (!name || !*name) name = gExePath;
  else if (strStartsWith(name, "linux-vdso") || strStartsWith(name, "linux-gate")) {
    if (!gVdsoPath[0]) return 0;
    name = gVdsoPath;
  }
  uint16_t id = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
    if (!id) id = internPath(name);
    if (!id) return 0;
    Snapshot* s = c->snap;
    if (s->n == s->cap) return 0;
    uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    s->r[s->n++] = Range{lo, lo + ph.p_memsz, info->dlpi_addr, id};
    if (const int h = helperLibrary(name); h >= 0) {
      gHelperHi[h].store(lo + ph.p_memsz, std::memory_order_relaxed);
      gHelperLo[h].store(lo, std::memory_order_release);
    }
  }
  return 0;
}

}  // namespace

void loadmapSetVdsoPath(const char* path) {
  Text t(gVdsoPath, sizeof gVdsoPath);
  t.str(path);
}

void loadmapRefresh() {
  while (gLock.exchange(true, std::memory_order_acquire)) sched_yield();
  if (!gPaths) {
    gPaths = static_cast<char(*)[kModulePathMax]>(pageAlloc(kMaxModules * kModulePathMax));
    ssize_t n = readlink("/proc/self/exe", gExePath, sizeof gExePath - 1);
    gExePath[n > 0 ? n : 0] = 0;
    Dl_info self;
    if (dladdr(reinterpret_cast<void*>(&loadmapRefresh), &self) && self.dli_fname) {
      // Our own text range, so the unwinder can recognise frames of the runtime.
      gSelfLo = reinterpret_cast<uintptr_t>(self.dli_fbase);
    }
  }
  constexpr uint32_t kCap = 8192;
  auto* snap = static_cast<Snapshot*>(pageAlloc(sizeof(Snapshot) + kCap * sizeof(Range)));
  if (gPaths && snap) {
    snap->cap = kCap;
    Collect c{snap};
    dl_iterate_phdr(onObject, &c);
    // Insertion sort: a few hundred ranges at most, and no libc qsort needed.
    for (uint32_t i = 1; i < snap->n; ++i) {
      Range x = snap->r[i];
      uint32_t j = i;
      while (j > 0 && snap->r[j - 1].lo > x.lo) {
        snap->r[j] = snap->r[j - 1];
        --j;
      }
      snap->r[j] = x;
    }
    for (uint32_t i = 0; i < snap->n; ++i)
      if (snap->r[i].bias == gSelfLo && gSelfLo) gSelfHi = snap->r[i].hi > gSelfHi ? snap->r[i].hi : gSelfHi;
    // Old snapshots are never unmapped: a signal handler may still be reading one.
    gSnap.store(snap, std::memory_order_release);
  }
  gLock.store(false, std::memory_order_release);
}

ModuleRef loadmapLookup(uintptr_t addr) {
  Snapshot* s = gSnap.load(std::memory_order_acquire);
  if (!s) return {0, addr};
  uint32_t lo = 0, hi = s->n;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (s->r[mid].lo <= addr) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0) return {0, addr};
  const Range& r = s->r[lo - 1];
  if (addr >= r.hi) return {0, addr};
  return {r.id, addr - r.bias};
}

uintptr_t loadmapGeneration() {
  // Snapshots are never unmapped, so no two have the same address.
  return reinterpret_cast<uintptr_t>(gSnap.load(std::memory_order_acquire));
}

uint16_t loadmapModuleCount() { return gCount.load(std::memory_order_acquire); }

const char* loadmapModulePath(uint16_t id) {
  return id && id <= loadmapModuleCount() ? gPaths[id] : "";
}

bool loadmapIsSelf(uintptr_t addr) {
  if (addr >= gSelfLo && addr < gSelfHi) return true;
  for (int h = 0; h < 2; ++h)
    if (addr >= gHelperLo[h].load(std::memory_order_acquire) && addr < gHelperHi[h].load(std::memory_order_relaxed))
      return true;
  return false;
}

void loadmapSetPseudoPath(Pseudo which, const char* path) {
  const int w = int(which);
  while (gLock.exchange(true, std::memory_order_acquire)) sched_yield();
  Text t(gPseudoPath[w], kModulePathMax);
  t.str(path);
  // A fork's child (one thread) renames the module its parent had already taken.
  if (uint16_t id = gPseudoId[w].load(std::memory_order_acquire)) {
    Text p(gPaths[id], kModulePathMax);
    p.str(path);
  }
  gLock.store(false, std::memory_order_release);
}

uint16_t loadmapPseudoId(Pseudo which) {
  const int w = int(which);
  uint16_t id = gPseudoId[w].load(std::memory_order_acquire);
  if (id || !gPseudoPath[w][0] || !gPaths) return id;
  // One try: the lock may be held by a refresh this handler interrupted.
  if (gLock.exchange(true, std::memory_order_acquire)) return 0;
  id = gPseudoId[w].load(std::memory_order_relaxed);
  if (!id) {
    id = internPath(gPseudoPath[w]);
    gPseudoId[w].store(id, std::memory_order_release);
  }
  gLock.store(false, std::memory_order_release);
  return id;
}

ModuleRef loadmapLookupOrAnonymous(uintptr_t addr) {
  ModuleRef m = loadmapLookup(addr);
  if (!m.id) m = ModuleRef{loadmapAnonymousId(), addr};
  return m;
}

}  // namespace hpc::rt
