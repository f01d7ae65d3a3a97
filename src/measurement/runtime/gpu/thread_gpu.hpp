// A launching thread's GPU state, in its arena (ThreadState::gpu).
// MT: inbox is MPSC (any thread enqueues, the owner dequeues); the rest is owner-only.
#pragma once

#include <cstdint>

#include "measurement/runtime/gpu/activity.hpp"

namespace hpc::rt::gpu {

struct ThreadGpu {
  MpscQueue inbox;                    // records coming back for attribution
  Activity* free = nullptr;           // recycled records
  Activity* pendingRelease = nullptr; // attributed in a signal handler, event not yet released
  uint64_t launched = 0, returned = 0;
  uint64_t allocated = 0;             // records taken from the arena (the others were reused)
  uint32_t seq = 0;
  bool mayRelease = true;             // false once the GPU runtime may be gone (process exit)
};

// Waits (bounded) for the thread's operations in flight, attributing them.
void threadFinishWith(ThreadState& ts, uint64_t waitNs, bool mayRelease);

}  // namespace hpc::rt::gpu
