// What a thread with a deep stack remembers between samples, so that a sample does not cost
// a libunwind step and a CCT lookup for each of thousands of frames (deep recursion). No
// return address of the application is rewritten, as a trampoline would.
// - FrameRecipes: for a return address whose caller's frame libunwind steps over by the stack
//   pointer alone (CFA = sp + size, the return address just below the CFA: -O2 code without a
//   frame pointer), that size and where the frame saved the caller's rbp, if it did; for a
//   frame-pointer frame (CFA = rbp + 16, the caller's rbp at rbp), that it is one. Learnt from
//   libunwind by stepping the same frame again from a changed state: the callee-saved
//   registers cleared (a rule that reads them gives another answer, or fails), or for a
//   frame-pointer frame the stack pointer moved. Such frames are stepped by a load or two.
// - PathCache: the last complete path's return addresses and CCT nodes, outermost first. The
//   nodes of the frames a new path shares from the outside are taken from it.
// MT: externally synchronized (owned by one thread; used from its signal handler).
#pragma once

#include <cstddef>
#include <cstdint>

#include "arena.hpp"

namespace hpc::rt {

struct CctNode;

// HPCRUN_UNWIND_CACHE=0 (off), 1 (default), verify (every fast unwind checked against a full
// libunwind walk; the log counts disagreements).
enum class UnwindCacheMode : uint8_t { Off, On, Verify };

// How a return address's frame is stepped.
struct Recipe {
  static constexpr int32_t kUnknown = INT32_MIN;  // not learnt yet
  static constexpr int32_t kLibunwind = -1;       // neither kind below: libunwind steps it
  static constexpr int32_t kFramePointer = -2;    // CFA = rbp + 16, caller's rbp at rbp
  static constexpr int32_t kRbpUnknown = -1;      // rbpAt: where the caller's rbp is, not known
  // size >= 0: CFA = sp + size (the return address just below it either way); then rbpAt is
  // where the frame saved the caller's rbp, that many bytes below the CFA (0: rbp is the
  // caller's, the frame left it alone; kRbpUnknown).
  int32_t size = kUnknown;
  int32_t rbpAt = 0;
};

class FrameRecipes {
public:
  bool init(Arena& arena, size_t slots);  // slots: a power of two
  Recipe find(uintptr_t ip) const {
    for (size_t h = hash(ip);; h = (h + 1) & mask_) {
      const Slot& s = slots_[h];
      if (s.ip == ip) return s.recipe;
      if (!s.ip) return Recipe{};
    }
  }
  // Sets how a return address's frame is stepped; full: nothing learnt.
  void set(uintptr_t ip, Recipe recipe);
  // Half the slots taken: no more is learnt (lookups stay short, and a walk stops probing).
  bool full() const { return (count_ + 1) * 2 > mask_ + 1; }
  // Forgets everything when the load map changed since (code may now lie where other was).
  void syncWith(uintptr_t loadGeneration);

private:
  struct Slot {
    uintptr_t ip;
    Recipe recipe;
  };
  size_t hash(uintptr_t ip) const { return size_t((ip * 0x9E3779B97F4A7C15ull) >> 20) & mask_; }
  Slot* slots_ = nullptr;
  size_t mask_ = 0, count_ = 0;
  uintptr_t generation_ = 0;
};

struct PathCache {
  uintptr_t* ip = nullptr;  // outermost first; frame index > 0 (return addresses) only
  CctNode** node = nullptr;
  size_t count = 0;
  uintptr_t generation = 0;
};

// The log's "unwind cache" line. Kept outside the cache, which goes with the thread's arena.
struct UnwindCacheStats {
  uint64_t byRecipes = 0, nodesReused = 0, verified = 0, mismatches = 0;
};

// A thread's unwind cache.
struct UnwindCache {
  FrameRecipes recipes;
  PathCache path;
  uintptr_t* verifyFrames = nullptr;  // HPCRUN_UNWIND_CACHE=verify only
  UnwindCacheStats* stats = nullptr;
  // Unwinds shallower than this use no cache: their walks are cheap already. (Verifying, every
  // unwind uses it, so that the check covers every kind of frame.)
  static constexpr size_t kMinFrames = 64;

  // nullptr when the arena is out of memory.
  static UnwindCache* create(Arena& arena, size_t maxFrames, bool verify, UnwindCacheStats& stats);
};

}  // namespace hpc::rt
