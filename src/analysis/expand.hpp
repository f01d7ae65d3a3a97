// Unification of one profile's call-path tree into the global CCT, expanding each
// instruction into its function, inlined-call, loop and line contexts.
#pragma once

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analysis/cct.hpp"
#include "analysis/input.hpp"
#include "analysis/model.hpp"

namespace hpc::analysis {

// hpcrun node id -> the context that receives its values and parents its callees.
// Kept for every profile between the two passes, so it is a sorted array (16 bytes a node)
// rather than a hash map. MT: const after construction.
class NodeMap {
public:
  NodeMap() = default;
  explicit NodeMap(const std::unordered_map<uint32_t, Context*>& m) : v_(m.begin(), m.end()) {
    std::sort(v_.begin(), v_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  }
  // nullptr when the node is unknown or attributed to no context (idle placeholder).
  Context* find(uint32_t id) const {
    auto it = std::lower_bound(v_.begin(), v_.end(), id, [](const auto& e, uint32_t k) { return e.first < k; });
    return it != v_.end() && it->first == id ? it->second : nullptr;
  }

private:
  std::vector<std::pair<uint32_t, Context*>> v_;
};

class Expander {
public:
  // structure may be null (no structure files, or --ignore-structs).
  Expander(Cct& cct, Names& names, const StructureSource* structure)
      : cct_(cct), names_(names), structure_(structure) {}

  // MT: thread-safe (the CCT and names are concurrent).
  Expected<NodeMap> unify(const ProfileTree& tree) const;

private:
  // The named function context of a GPU operation below its CPU launch context.
  Context* gpuOperation(Context* launch, Placeholder p) const;
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
  Context* expandInstruction(Context* callSite, const std::string& modulePath,
                             uint64_t offset, Gpu gpu) const;
  Cct& cct_;
  Names& names_;
  const StructureSource* structure_;
};

}  // namespace hpc::analysis
