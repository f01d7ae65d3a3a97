#include "analysis/heap.hpp"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace hpc::analysis {
namespace {

// Touching fresh memory costs hpcprof much of its time in page faults (one trap per 4 KiB
// page, a dear one on a virtual machine: it was a quarter of the CPU time on the benchmark's
// VM). Where the kernel gives transparent huge pages on request, the malloc heap asks for
// them: it is given a large reserve (address space only, backed as it is touched) whose first
// kHugeHeapBytes are advised MADV_HUGEPAGE (the rest, and a heap that outgrows the 1 GiB
// reserve, has 4 KiB pages: see heap.hpp). Allocations stay in the heap up to 32 MiB (glibc's
// most), so they get huge pages too. (glibc's tunable glibc.malloc.hugetlb=1 advises the whole
// heap, and only in a process started with it: hpcprof restarted itself, which cost an exec.)
// HPCPROF_NO_HUGEPAGES=1 keeps 4 KiB pages.
void heapOnHugePages() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
  if (std::getenv("HPCPROF_NO_HUGEPAGES")) return;
  std::FILE* f = std::fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (!f) return;
  char mode[128] = {};
  const bool read = std::fgets(mode, sizeof mode, f) != nullptr;
  std::fclose(f);
  if (!read || std::strstr(mode, "[never]")) return;
  // The heap never shrinks (growing again would add memory the advice does not cover), and
  // grows by the reserve now: one allocation larger than what it holds. (Where the kernel
  // refuses the reserve, malloc maps memory elsewhere and nothing is advised.)
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
  mallopt(M_TOP_PAD, 1 << 30);
  void* probe = std::malloc(1 << 20);
  mallopt(M_TOP_PAD, 128 << 10);  // glibc's default again, for growth beyond the reserve
  if (!probe) return;
  const uintptr_t start = (reinterpret_cast<uintptr_t>(probe) + 4095) & ~uintptr_t(4095);
  const uintptr_t end = reinterpret_cast<uintptr_t>(::sbrk(0)) & ~uintptr_t(4095);
  std::free(probe);  // its memory stays in the heap
  if (end <= start) return;
  const uintptr_t huge = std::min<uintptr_t>(end - start, kHugeHeapBytes);
  ::madvise(reinterpret_cast<void*>(start), huge, MADV_HUGEPAGE);
  // The rest on 4 KiB pages also where the kernel gives huge pages to all memory ("always").
  if (end - start > huge) ::madvise(reinterpret_cast<void*>(start + huge), end - start - huge, MADV_NOHUGEPAGE);
}

}  // namespace

void setUpHeap() {
  heapOnHugePages();
  // One heap until the thread count is known (setHeapThreads).
  mallopt(M_ARENA_MAX, 1);
}

void setHeapThreads(unsigned threads) {
  // An arena a thread. A thread's own arena is mapped apart from the main heap, grows by
  // mprotect a few pages at a time and gets no huge pages, so its fresh pages fault one by
  // one (an early pipeline's unify at -j2 took 0.11 s against 0.05 s with one arena). But one
  // arena's lock is held while a fresh huge page is faulted inside malloc, milliseconds on
  // a virtual machine, with the other threads waiting, and more threads wait more: measuring
  // real programs' binaries allocates throughout (the g++ measurement at -j2, interleaved
  // runs, two rounds: median 0.813 -> 0.733 s and 0.779 -> 0.738 s). The synthetic shapes of
  // 20,000 nodes move by -12 to +6 % either way between rounds, the 400,000-node tree by -18
  // and 0 %; peak memory grows by 2-3 MiB (6-14 with the large trees).
  mallopt(M_ARENA_MAX, int(threads < 1 ? 1 : threads));
}

}  // namespace hpc::analysis
