// Unification of one profile's call-path tree into the global CCT, expanding each
// instruction into its function, inlined-call, loop and line contexts.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analysis/cct.hpp"
#include "analysis/input.hpp"
#include "analysis/model.hpp"

namespace hpc::analysis {

// hpcrun node id -> the context that receives its values and parents its callees.
// Lives for one pass over one profile: a table by id when ids are dense (as hpcrun writes
// them), else a sorted array. MT: const after construction.
class NodeMap {
public:
  NodeMap() = default;
  // nullptr when the node is unknown or attributed to no context (idle placeholder).
  Context* find(uint32_t id) const {
    if (!sparse_) return id < dense_.size() ? dense_[id] : nullptr;
    auto it = std::lower_bound(pairs_.begin(), pairs_.end(), id, [](const auto& e, uint32_t k) { return e.first < k; });
    return it != pairs_.end() && it->first == id ? it->second : nullptr;
  }

private:
  friend class Expander;
  bool sparse_ = false;
  std::vector<Context*> dense_;
  std::vector<std::pair<uint32_t, Context*>> pairs_;
};

class Expander {
public:
  // structure may be null (no structure files, or --ignore-structs).
  Expander(Cct& cct, Names& names, const StructureSource* structure);
  ~Expander();

  // Pass 1. MT: thread-safe (the CCT, names and the instruction cache are concurrent).
  Expected<NodeMap> unify(const ProfileTree& tree) const { return map(tree, true, nullptr); }
  // Pass 2: the contexts of the nodes `wanted` (and of their ancestors) of a tree unify() has
  // merged, found without creating any, so that no per-profile map is kept between the
  // passes. Other nodes, and nodes not found, map to nullptr.
  // MT: thread-safe among themselves; must not overlap unify() calls.
  Expected<NodeMap> find(const ProfileTree& tree, std::span<const uint32_t> wanted) const {
    return map(tree, false, &wanted);
  }

private:
  struct Cache;
  Expected<NodeMap> map(const ProfileTree& tree, bool create, const std::span<const uint32_t>* wanted) const;
  // The named function context of a GPU operation below its CPU launch context.
  Context* gpuOperation(Context* launch, Placeholder p, bool create) const;
  // How an instruction hangs on a GPU-operation placeholder.
  enum class Gpu : uint8_t {
    No,
    // The kernel launch: where it is its function's entry, the reference gives its values
    // and trace records to the function context; the line and instruction stay, empty.
    Entry,
    // A PC sample (not unwound): without structure its function is unknown, so it hangs
    // on an unnamed function context below the operation.
    Sample,
  };
  Context* expandInstruction(Context* callSite, const std::string& modulePath, const Module* module,
                             uint64_t offset, Gpu gpu, bool create) const;
  Cct& cct_;
  Names& names_;
  const StructureSource* structure_;
  // (call site, module, offset) -> the instruction's leaf context: one entry per distinct
  // instruction context, so its size follows the unified tree, not the profile count.
  std::unique_ptr<Cache> cache_;
};

}  // namespace hpc::analysis
