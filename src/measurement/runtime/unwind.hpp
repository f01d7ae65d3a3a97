// Call-stack unwinding from a signal context with libunwind (DWARF CFI). libunwind is
// dlopen'ed RTLD_LOCAL: its _Unwind_* exports must not replace the application's C++
// exception machinery, and its static archive is not PIC.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hpc::rt {

enum class UnwindEnd {
  Fence,     // reached a runtime trampoline: the path is rooted at main or a thread start
  Bottom,    // libunwind reached the outermost frame
  Failed,    // a step failed: the path is partial
  Truncated  // ran out of frame slots
};

struct UnwindCache;

bool unwindInit();   // at start-up; false when libunwind is missing
void unwindFlushCache();
// Fills frames[0..n) leaf first. frames[0] is the interrupted pc, the rest return addresses.
// MT: async-signal-safe when called from the signal handler of the unwound thread.
// With a cache, frames whose recipe is known are stepped by it, and libunwind's steps teach
// it new ones (unwind_cache.hpp).
UnwindEnd unwindFromSignal(void* ucontext, uintptr_t* frames, size_t cap, size_t& n,
                           UnwindCache* cache = nullptr);
// The same from the caller's own frame (a wrapped GPU API call): frames[0] and the frames
// after it up to the caller lie in libhpcrun.so. MT: the calling thread, samples blocked.
// With sps, sps[k] is frame k's stack pointer for the first spsCap frames (a return address
// frames[k] stepped to by a plain step was read from sps[k] - 8).
UnwindEnd unwindHere(uintptr_t* frames, size_t cap, size_t& n, uintptr_t* sps = nullptr, size_t spsCap = 0);

// The start of the function (its CFI's range, to end) that holds ip; 0 where none is known
// (code without CFI). MT: async-signal-safe as unwindFromSignal (it reads the modules' CFI index;
// callers guard it against a module unmapped meanwhile).
uintptr_t functionStart(uintptr_t ip, uintptr_t& end);

// Code address range of the trampolines (section hpcrun_tramp): a frame whose pc is inside
// is the runtime's main wrapper or thread start, and the unwind stops there.
bool isTrampoline(uintptr_t pc);

}  // namespace hpc::rt
