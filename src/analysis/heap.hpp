// The malloc heap of hpcprof and hpcprof-mpi: set up once, first thing in main().
#pragma once

namespace hpc::analysis {

// Allocations up to 32 MiB stay in the heap (per-profile buffers of a few hundred KB come
// and go thousands of times: no fresh mapping each, with its page faults and a TLB flush per
// unmap), on transparent huge pages where the kernel gives them on request, and all threads
// share one heap. HPCPROF_NO_HUGEPAGES=1 keeps 4 KiB pages.
void setUpHeap();

}  // namespace hpc::analysis
