#include "cct.hpp"

namespace hpc::rt {

namespace {
uint64_t hashKey(const CctNode* parent, uint16_t module, uint64_t offset) {
  uint64_t h = offset * 0x9E3779B97F4A7C15ull;
  h ^= (uint64_t(parent->id) << 16 | module) * 0xC2B2AE3D27D4EB4Full;
  h ^= h >> 29;
  return h;
}
}  // namespace

bool Cct::init(Arena& arena, unsigned nMetrics, bool withPartial) {
  arena_ = &arena;
  nMetrics_ = nMetrics;
  mask_ = 1023;
  table_ = static_cast<CctNode**>(arena.alloc((mask_ + 1) * sizeof(CctNode*)));
  if (!table_) return false;
  root_ = make(nullptr, kPlaceholderModule, kRootPrimary);
  if (!withPartial) return root_ != nullptr;
  partial_ = root_ ? child(root_, kPlaceholderModule, kRootPartial) : nullptr;
  return partial_ != nullptr;
}

CctNode* Cct::make(CctNode* parent, uint16_t module, uint64_t offset) {
  auto* n = static_cast<CctNode*>(arena_->alloc(sizeof(CctNode) + nMetrics_ * sizeof(double)));
  if (!n) return nullptr;
  n->parent = parent;
  n->offset = offset;
  n->module = module;
  n->id = ++count_;
  if (last_) last_->next = n;
  else first_ = n;
  last_ = n;
  return n;
}

bool Cct::grow() {
  uint64_t newMask = mask_ * 2 + 1;
  auto* t = static_cast<CctNode**>(arena_->alloc((newMask + 1) * sizeof(CctNode*)));
  if (!t) return false;
  for (uint64_t i = 0; i <= mask_; ++i) {
    CctNode* n = table_[i];
    if (!n) continue;
    uint64_t h = hashKey(n->parent, n->module, n->offset) & newMask;
    while (t[h]) h = (h + 1) & newMask;
    t[h] = n;
  }
  table_ = t;  // the old table stays in the arena: freed with the thread
  mask_ = newMask;
  return true;
}

CctNode* Cct::child(CctNode* parent, uint16_t module, uint64_t offset) {
  uint64_t h = hashKey(parent, module, offset) & mask_;
  for (;;) {
    CctNode* n = table_[h];
    if (!n) break;
    if (n->parent == parent && n->offset == offset && n->module == module) return n;
    h = (h + 1) & mask_;
  }
  if ((uint64_t(count_) + 1) * 2 > mask_) {
    if (!grow()) return nullptr;
    h = hashKey(parent, module, offset) & mask_;
    while (table_[h]) h = (h + 1) & mask_;
  }
  CctNode* n = make(parent, module, offset);
  if (n) table_[h] = n;
  return n;
}

}  // namespace hpc::rt
