#include "unwind_cache.hpp"

#include <new>

namespace hpc::rt {

bool FrameRecipes::init(Arena& arena, size_t slots) {
  slots_ = static_cast<Slot*>(arena.alloc(slots * sizeof(Slot)));
  mask_ = slots - 1;
  return slots_ != nullptr;
}

void FrameRecipes::set(uintptr_t ip, Recipe recipe) {
  if (!ip) return;
  size_t h = hash(ip);
  while (slots_[h].ip && slots_[h].ip != ip) h = (h + 1) & mask_;
  if (!slots_[h].ip) {
    if (full()) return;
    ++count_;
  }
  slots_[h].recipe = recipe;
  slots_[h].ip = ip;
}

void FrameRecipes::syncWith(uintptr_t loadGeneration) {
  if (loadGeneration == generation_) return;
  for (size_t i = 0; i <= mask_; ++i) slots_[i] = Slot{0, Recipe{}};
  count_ = 0;
  generation_ = loadGeneration;
}

UnwindCache* UnwindCache::create(Arena& arena, size_t maxFrames, bool verify, UnwindCacheStats& stats) {
  void* self = arena.alloc(sizeof(UnwindCache));
  if (!self) return nullptr;
  auto* c = new (self) UnwindCache;
  c->stats = &stats;
  c->path.ip = static_cast<uintptr_t*>(arena.alloc(maxFrames * sizeof(uintptr_t)));
  c->path.node = static_cast<CctNode**>(arena.alloc(maxFrames * sizeof(CctNode*)));
  if (verify) c->verifyFrames = static_cast<uintptr_t*>(arena.alloc(maxFrames * sizeof(uintptr_t)));
  if (!c->recipes.init(arena, 4096) || !c->path.ip || !c->path.node || (verify && !c->verifyFrames)) return nullptr;
  return c;
}

}  // namespace hpc::rt
