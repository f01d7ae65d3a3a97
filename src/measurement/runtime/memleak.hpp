// The MEMLEAK source (`-e MEMLEAK`: events MEMLEAK::alloc and MEMLEAK::free, metrics Bytes
// Allocated and Bytes Freed): the application's heap allocations, a share of them drawn
// (hpcrun -mp, default 0.1), each drawn one's bytes added at its allocating context, and the
// same bytes as Freed at that context when it is freed, on whatever thread: what is
// allocated and never freed at a context is what leaked there. The malloc family's wrappers
// are libhpcrun_memleak.so's (memleak_malloc.cpp), preloaded with -e MEMLEAK only.
#pragma once

#include <cstddef>

#include "interpose.hpp"

// The wrappers' hooks, exported for libhpcrun_memleak.so. memleak_alloc: `p`, `bytes` long,
// just allocated by the application's call being wrapped (drawn or not here). memleak_free:
// `p` about to be freed (or reallocated).
HPC_EXPORT void hpcrun_memleak_alloc(void* p, size_t bytes);
HPC_EXPORT void hpcrun_memleak_free(void* p);

namespace hpc::rt {

void memleakInit();  // at start-up, after the event list is known
bool memleakMeasured();  // -e MEMLEAK: threads' arenas are kept (their nodes' Bytes Freed)

}  // namespace hpc::rt
