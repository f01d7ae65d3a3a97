// Unification of one profile's call-path tree into the global CCT, expanding each
// instruction into its function, inlined-call, loop and line contexts.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "analysis/cct.hpp"
#include "analysis/input.hpp"
#include "analysis/model.hpp"

namespace hpc::analysis {

// hpcrun node id -> the context that receives its values and parents its callees.
// nullptr: the node is attributed to no context (idle placeholder).
using NodeMap = std::unordered_map<uint32_t, Context*>;

class Expander {
public:
  // structure may be null (no structure files, or --ignore-structs).
  Expander(Cct& cct, Names& names, const StructureSource* structure)
      : cct_(cct), names_(names), structure_(structure) {}

  // MT: thread-safe (the CCT and names are concurrent).
  Expected<NodeMap> unify(const ProfileTree& tree) const;

private:
  Context* expandInstruction(Context* callSite, const std::string& modulePath,
                             uint64_t offset) const;
  Cct& cct_;
  Names& names_;
  const StructureSource* structure_;
};

}  // namespace hpc::analysis
