#pragma once
// Waits a sample must not end (waits.cpp): under REALTIME, the interposed waits block the
// sampling signal over the wait and let it in afterwards.
#include <cstddef>
#include <cstdint>

#include "state.hpp"

namespace hpc::rt {

// For a sample the end of such a wait let in (frames as unwound, frames[0] the interrupted
// pc): true, with `leaf` the function waited in, which the sample records as its leaf.
bool deferredSampleLeaf(const ThreadState& ts, const uintptr_t* frames, size_t n, uintptr_t& leaf);

// For a thread still in such a wait as the process ends (its samples stopped): its REALTIME
// time waited so far, credited to the function waited in below its root.
void waitsCreditUnfinished(ThreadState& t);

}  // namespace hpc::rt
