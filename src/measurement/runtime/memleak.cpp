// MEMLEAK (memleak.hpp). The drawn allocations are kept in one table for the process: open
// addressing on the block's address, each entry the block, its size and its context's node;
// lock-free (a slot taken by compare-and-swap, a freed one left as a tombstone that a later
// allocation may take; a block is looked for in 64 slots from its hash at most). The table is
// mapped at the first drawn allocation (6 MiB of address space for 262,144 entries, touched as
// used); once half full, or where a block's 64 slots are taken, an allocation is not drawn. A context's node lies in the allocating thread's arena, which is kept
// after the thread ends while MEMLEAK is measured (process.cpp), so that a later free on
// another thread still finds it; Bytes Freed is added atomically (frees of one context's
// blocks come from any thread). Blocks freed after their thread's profile was written are
// not in it (that thread's Freed stays as it was then); blocks that libc itself frees or
// reallocates (getline's buffer grown by glibc inside) stay counted as allocated.
#include "memleak.hpp"

#include <stdlib.h>
#include <sys/mman.h>

#include <atomic>
#include <cerrno>

#include "process.hpp"
#include "sample.hpp"
#include "state.hpp"

namespace hpc::rt {

namespace {

struct Entry {
  std::atomic<uintptr_t> block;  // 0: never used; 1: freed (a tombstone); 2: being filled
  size_t bytes;
  CctNode* node;
};
constexpr uintptr_t kEmpty = 0, kTombstone = 1, kFilling = 2;
constexpr size_t kEntries = size_t(1) << 18;
// Slots looked at for a block, from its hash: a free of a block never drawn (most of them)
// costs at most this many loads, however many tombstones the table has.
constexpr size_t kProbes = 64;

std::atomic<Entry*> gTable{nullptr};
std::atomic<size_t> gLive{0};
std::atomic<int> gEvent[2] = {-1, -1};  // MEMLEAK::alloc's and ::free's indices
uint64_t gThreshold = 0;                 // a draw below it is tracked (prob * 2^64)
bool gAll = false;                       // -mp 1: every allocation

thread_local uint64_t tlsRandom __attribute__((tls_model("initial-exec"))) = 0;

size_t slotOf(uintptr_t p) { return size_t((p >> 4) * 0x9e3779b97f4a7c15ull >> 46) & (kEntries - 1); }

bool drawn() {
  if (gAll) return true;
  uint64_t x = tlsRandom;
  if (x == 0) x = uint64_t(uintptr_t(&x)) * 0x9e3779b97f4a7c15ull + uint64_t(sysGettid()) + 1;
  x ^= x << 13, x ^= x >> 7, x ^= x << 17;
  tlsRandom = x;
  return x < gThreshold;
}

Entry* table() {
  Entry* t = gTable.load(std::memory_order_acquire);
  if (t) return t;
  void* m = mmap(nullptr, kEntries * sizeof(Entry), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (m == MAP_FAILED) return nullptr;
  Entry* expect = nullptr;
  if (!gTable.compare_exchange_strong(expect, static_cast<Entry*>(m), std::memory_order_acq_rel)) {
    munmap(m, kEntries * sizeof(Entry));
    return expect;
  }
  return static_cast<Entry*>(m);
}

void addTo(CctNode* node, int ev, double bytes) {
  std::atomic_ref<double> slot(node->metrics()[ev]);
  double v = slot.load(std::memory_order_relaxed);
  while (!slot.compare_exchange_weak(v, v + bytes, std::memory_order_relaxed)) {
  }
  node->hasValue = 1;
}

}  // namespace

bool memleakMeasured() { return gEvent[0].load(std::memory_order_relaxed) >= 0; }

void memleakInit() {
  for (unsigned i = 0; i < gConfig.nEvents; ++i) {
    if (gConfig.events[i].kind == SourceKind::MemAlloc) gEvent[0].store(int(i), std::memory_order_relaxed);
    if (gConfig.events[i].kind == SourceKind::MemFree) gEvent[1].store(int(i), std::memory_order_relaxed);
  }
  double p = 0.1;
  if (const char* s = getenv("HPCRUN_MEMLEAK_PROB"); s && *s) p = strtod(s, nullptr);
  gAll = p >= 1;
  gThreshold = p <= 0 ? 0 : p >= 1 ? UINT64_MAX : uint64_t(p * 18446744073709551616.0);
}

}  // namespace hpc::rt

using namespace hpc::rt;

HPC_EXPORT void hpcrun_memleak_alloc(void* p, size_t bytes) {
  const int ev = gEvent[0].load(std::memory_order_relaxed);
  if (!p || ev < 0 || !gSampling.load(std::memory_order_acquire) || !gConfig.selected) return;
  ThreadState* ts = currentThread();
  if (!ts || ts->suspend > 0 || ts->inHandler.load(std::memory_order_relaxed) ||
      ts->phase.load(std::memory_order_acquire) != ThreadPhase::Running || !drawn())
    return;
  if (gLive.load(std::memory_order_relaxed) >= kEntries / 2) return;  // full enough: not drawn
  const int saved = errno;
  {
    SuspendSampling guard;  // contextHere's own allocations (none expected) are not drawn
    Entry* t = table();
    const uintptr_t key = uintptr_t(p);
    Entry* e = nullptr;
    for (size_t i = t ? slotOf(key) : 0, n = 0; t && n < kProbes; ++n, i = (i + 1) & (kEntries - 1)) {
      uintptr_t cur = t[i].block.load(std::memory_order_relaxed);
      if ((cur == kEmpty || cur == kTombstone) &&
          t[i].block.compare_exchange_strong(cur, kFilling, std::memory_order_acquire)) {
        e = &t[i];
        break;
      }
    }
    // A slot first: a block counted as allocated is always found again at its free.
    if (e) {
      if (CctNode* node = contextHere(*ts)) {
        addTo(node, ev, double(bytes));
        e->bytes = bytes;
        e->node = node;
        e->block.store(key, std::memory_order_release);
        gLive.fetch_add(1, std::memory_order_relaxed);
      } else {
        e->block.store(kTombstone, std::memory_order_release);  // not empty: probes went past it
      }
    }
  }
  errno = saved;
}

HPC_EXPORT void hpcrun_memleak_free(void* p) {
  Entry* t = gTable.load(std::memory_order_acquire);
  if (!p || !t) return;
  const uintptr_t key = uintptr_t(p);
  for (size_t i = slotOf(key), n = 0; n < kProbes; ++n, i = (i + 1) & (kEntries - 1)) {
    uintptr_t cur = t[i].block.load(std::memory_order_acquire);
    if (cur == kEmpty) return;  // never drawn
    if (cur != key) continue;   // another block, a tombstone, or one being filled
    const size_t bytes = t[i].bytes;
    CctNode* node = t[i].node;
    if (!t[i].block.compare_exchange_strong(cur, kTombstone, std::memory_order_acq_rel)) return;
    gLive.fetch_sub(1, std::memory_order_relaxed);
    const int ev = gEvent[1].load(std::memory_order_relaxed);
    if (ev >= 0 && node) addTo(node, ev, double(bytes));
    return;
  }
}
