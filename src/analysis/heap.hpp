// The malloc heap of hpcprof and hpcprof-mpi: set up once, first thing in main().
#pragma once

namespace hpc::analysis {

// Allocations up to 32 MiB stay in the heap (per-profile buffers of a few hundred KB come
// and go thousands of times: no fresh mapping each, with its page faults and a TLB flush per
// unmap), its first kHugeHeapBytes on transparent huge pages where the kernel gives them on
// request (the rest advised MADV_NOHUGEPAGE), and one arena until setHeapThreads().
// HPCPROF_NO_HUGEPAGES=1 keeps 4 KiB pages.
void setUpHeap();
// After the command line, before the analysis threads start: an arena for each of `threads`
// (the first is the main heap above).
void setHeapThreads(unsigned threads);

// How much of the heap asks for huge pages. A small run's heap is on huge pages whole (fewer
// faults: 500 profiles of 20,000 nodes at -j2 0.109 s against 0.131 s on 4 KiB pages, best of
// 12); beyond it, 4 KiB pages: where a virtual machine's host has taken back the memory the
// guest freed (free page reporting hands back whole huge blocks), a new huge page costs the
// host's faults, about 3 ms a MiB against 0.5 for 4 KiB pages, which the guest still has.
inline constexpr unsigned long kHugeHeapBytes = 64ul << 20;

}  // namespace hpc::analysis
