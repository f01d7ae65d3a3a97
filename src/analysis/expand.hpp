// Unification of one profile's call-path tree into the global CCT, expanding each
// instruction into its function, inlined-call, loop and line contexts.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analysis/cct.hpp"
#include "analysis/input.hpp"
#include "analysis/model.hpp"

namespace hpc::analysis {

// One profile's nodes and the contexts unify() gave them. Reused from profile to profile
// (one per thread), so its tables keep their capacity. MT: const after unify().
class NodeContexts {
public:
  // The context of node `id`: nullptr when the id is unknown or attributed to no context
  // (idle placeholder).
  Context* find(uint32_t id) const {
    int64_t p = posOf(id);
    return p < 0 ? nullptr : ctx_[size_t(p)];
  }
  // Takes `other`'s templates (positional and keyed) and node contexts, as if this one had
  // unified the tree `other` unified last: a thread's first profile then matches like its
  // later ones. (Its reader's buffers must hold that tree too: ProfileData.)
  void seedFrom(const NodeContexts& other);

private:
  friend class Expander;
  int64_t posOf(uint32_t id) const {
    if (dense_) return id < posTable_.size() ? posTable_[id] : -1;
    auto it = posHash_.find(id);
    return it == posHash_.end() ? -1 : int64_t(it->second);
  }
  bool dense_ = true;
  std::vector<int32_t> posTable_;  // node id -> position in tree.nodes (dense ids)
  std::vector<int32_t> prevPosTable_;  // the same for the template tree, where its ids were dense
  std::unordered_map<uint32_t, uint32_t> posHash_;  // the same for sparse ids
  std::vector<Context*> ctx_;      // by position
  std::vector<uint8_t> done_;      // by position: 0 to do, 1 done, 2 done as in the template
  // The template: the tree unified last (ProfileTree::nodesId), its load map and the
  // contexts of its nodes (ctx_ until the next tree, then prevCtx_). Threads of one program
  // list mostly the same nodes in the same order; a node equal to the template's at its
  // position, under a parent that matched, has the template's context: no lookup in the
  // shared tree. A tree with the template's nodes has all its contexts.
  uint64_t templateId_ = 0;
  std::vector<Context*> prevCtx_;
  // The keyed template, for profiles that list their nodes in orders of their own (hpcrun
  // numbers a thread's nodes in the order it reaches them): a tree unified before, its
  // contexts, and each node's children by key. A node whose parent matched a template node
  // and whose key (module, offset, kind) is that of one of its children has that child's
  // context. Kept while it serves (rebuilt from a profile on which it matched under half).
  struct KeyedChild {
    uint64_t offset;
    uint16_t module;
    Placeholder placeholder;
    bool unwound;
    uint32_t pos;  // in the template
  };
  bool keyed_ = false;
  std::vector<std::pair<uint16_t, std::string>> keyedLoadMap_;
  std::vector<Context*> keyedCtx_;      // by template position
  std::vector<uint32_t> keyedStart_;    // children of template position p: [start[p], start[p+1]); the last entry is the roots'
  std::vector<KeyedChild> keyedChild_;
  std::vector<uint32_t> keyedTag_;  // by keyedChild_ index (3 more at the end): a hash of each key, compared 4 at once
  std::vector<int32_t> keyedOf_;        // this profile: position -> template position, -1 when unmatched
  // The template tree's keyedOf_: a node matched by position has its template node's match
  // (no search), where that was made against the same keyed template (its generation).
  std::vector<int32_t> prevKeyedOf_;
  uint64_t keyedGen_ = 0;     // bumped whenever the keyed template is rebuilt
  uint64_t keyedOfGen_ = 0;   // the generation keyedOf_ was made against; 0: none
  std::vector<std::pair<uint16_t, std::string>> prevLoadMap_;
  std::vector<uint32_t> chain_;
  struct Lm {
    const std::string* path = nullptr;
    const Module* module = nullptr;
    bool structured = false;  // the structure may cover it (StructureSource::mayCover)
  };
  std::vector<Lm> lm_;  // by load-map id (small ids, as hpcrun writes them)
  std::vector<std::pair<uint16_t, Lm>> lmSparse_;
  std::vector<std::unique_ptr<std::string>> unknown_;
};

class Expander {
public:
  // structure may be null (no structure files, or --ignore-structs).
  Expander(Cct& cct, Names& names, const StructureSource* structure);
  ~Expander();

  // Merges one profile's tree into the CCT; out.find(id) then gives each node's context.
  // The tree's nodes (or its previousNodes, by nodesId) may be out's template.
  // MT: thread-safe (the CCT, names and the instruction cache are concurrent).
  Status unify(const ProfileTree& tree, NodeContexts& out) const;

private:
  struct Cache;
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
  // `structured`: the structure may cover the module; else the instruction is placed directly
  // (one lookup in the tree's table: a cache of it would only double it).
  Context* expandInstruction(Context* callSite, const std::string& modulePath, const Module* module, bool structured,
                             uint64_t offset, Gpu gpu) const;
  Cct& cct_;
  Names& names_;
  const StructureSource* structure_;
  // (call site, module, offset) -> the instruction's leaf context: one entry per distinct
  // instruction context, so its size follows the unified tree, not the profile count.
  std::unique_ptr<Cache> cache_;
};

}  // namespace hpc::analysis
