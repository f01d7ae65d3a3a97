// A thread's calling context tree of (load module, offset) nodes with a fixed number of
// metric slots per node. Insertion is find-or-add through an open-addressing hash table
// keyed by (parent, module, offset); all memory comes from the owning thread's arena.
// MT: externally synchronized (owned by one thread; written from its signal handler).
#pragma once

#include <cstdint>

#include "arena.hpp"

namespace hpc::rt {

// Load module 0 holds the placeholders of the reference format: root and fence nodes.
constexpr uint16_t kPlaceholderModule = 0;
constexpr uint64_t placeholder(const char (&s)[9]) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | uint8_t(s[i]);
  return v;
}
constexpr uint64_t kRootPrimary = placeholder("^Primary");
constexpr uint64_t kRootPartial = placeholder("^Partial");
constexpr uint64_t kFenceMain = placeholder("| Main  ");
constexpr uint64_t kFenceThread = placeholder("| Thread");

struct CctNode {
  CctNode* parent;
  CctNode* next;      // creation order: every parent precedes its children
  uint64_t offset;
  uint32_t id;        // 1, 2, ... in creation order
  uint16_t module;
  uint16_t hasValue;  // some metric slot is non-zero
  double* extra;      // GPU metric slots (gpu::kMetricCount), allocated on first use
  double* metrics() { return reinterpret_cast<double*>(this + 1); }
};

class Cct {
public:
  // withPartial: also the ^Partial root for failed unwinds (thread CCTs; a GPU stream's
  // CCT, copied from complete launch paths, has none, as in the reference).
  bool init(Arena& arena, unsigned nMetrics, bool withPartial = true);
  CctNode* root() const { return root_; }
  CctNode* partialRoot() const { return partial_; }
  // Find or add; nullptr only when out of memory.
  CctNode* child(CctNode* parent, uint16_t module, uint64_t offset);
  CctNode* first() const { return first_; }
  uint32_t size() const { return count_; }
  unsigned metricCount() const { return nMetrics_; }
  Arena* arenaOf() const { return arena_; }

private:
  CctNode* make(CctNode* parent, uint16_t module, uint64_t offset);
  bool grow();

  Arena* arena_ = nullptr;
  unsigned nMetrics_ = 0;
  CctNode** table_ = nullptr;
  uint64_t mask_ = 0;
  uint32_t count_ = 0;
  CctNode* first_ = nullptr;
  CctNode* last_ = nullptr;
  CctNode* root_ = nullptr;
  CctNode* partial_ = nullptr;
};

}  // namespace hpc::rt
