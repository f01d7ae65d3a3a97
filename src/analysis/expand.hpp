// Unification of one profile's call-path tree into the global CCT, expanding each
// instruction into its function, inlined-call, loop and line contexts.
#pragma once

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analysis/cct.hpp"
#include "analysis/gpu_calls.hpp"
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
  // Node `id`'s position (-1: unknown), the context at a position, and how many there are.
  int64_t position(uint32_t id) const { return posOf(id); }
  Context* at(size_t position) const { return ctx_[position]; }
  size_t size() const { return ctx_.size(); }
  // f(id, context) for every node of the tree unified last that has a context.
  template <class F> void forEachNode(F&& f) const {
    if (dense_) {
      for (size_t id = 0; id < posTable_.size(); ++id)
        if (posTable_[id] >= 0 && ctx_[size_t(posTable_[id])]) f(uint32_t(id), ctx_[size_t(posTable_[id])]);
    } else {
      for (const auto& [id, pos] : posHash_)
        if (ctx_[pos]) f(id, ctx_[pos]);
    }
  }
  // Takes `other`'s templates (positional and keyed) and node contexts, as if this one had
  // unified the tree `other` unified last: a thread's first profile then matches like its
  // later ones. (Its reader's buffers must hold that tree too: ProfileData.)
  void seedFrom(const NodeContexts& other);
  // Whether the tree unified last (the template) is the tree named `nodesId` with this load
  // map: unifying that tree again finds every node's context here, its nodes never looked at.
  bool holds(uint64_t nodesId, const std::vector<std::pair<uint16_t, std::string>>& loadMap,
             uint64_t loadMapGen = 0) const {
    return nodesId != 0 && nodesId == templateId_ &&
           ((loadMapGen != 0 && loadMapGen == prevLoadMapGen_) || loadMap == prevLoadMap_);
  }
  // The tree's GPU PC samples in modules with a call graph, where unification left some to
  // GPU calling-context reconstruction (Expander::reconstructGpu); else empty.
  const std::vector<GpuSample>& gpuSamples() const { return gpuSamples_; }
  // Whether a tree of `nodes` nodes with ids up to `maxId` is found by id through a table
  // (else a hash map: ids too sparse for a table of them).
  static bool denseIds(size_t nodes, uint32_t maxId) { return maxId <= 2 * nodes + 1024; }

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
  // Its nodes by slot, in blocks of siblings (a subtree's blocks together), each with its
  // key and the block of its children (see blockPlace() in expand.cpp).
  struct KeyedSlot {
    uint64_t key;   // packedKey(); kNoKey where the slot holds no node
    uint64_t kids;  // its children's block
  };
  bool keyed_ = false;
  std::vector<std::pair<uint16_t, std::string>> keyedLoadMap_;
  uint64_t keyedLoadMapGen_ = 0;  // ProfileTree::loadMapGen of keyedLoadMap_ (0: unnamed)
  std::vector<Context*> keyedCtx_;    // by slot
  std::vector<KeyedSlot> keyedSlot_;  // by slot
  uint64_t keyedRoots_ = 0;           // the block of the roots
  // This profile, by position: the block of the children of the node's match (0: none).
  std::vector<uint64_t> keyedKids_;
  // The template tree's keyedKids_: a node matched by position has its template node's
  // (no search), where those were made against the same keyed template (its generation).
  std::vector<uint64_t> prevKeyedKids_;
  uint64_t keyedGen_ = 0;     // bumped whenever the keyed template is rebuilt
  uint64_t keyedKidsGen_ = 0;   // the generation keyedKids_ was made against; 0: none
  std::vector<std::pair<uint16_t, std::string>> prevLoadMap_;
  uint64_t prevLoadMapGen_ = 0;  // ProfileTree::loadMapGen of prevLoadMap_ (0: unnamed)
  std::vector<GpuSample> gpuSamples_;  // of the tree unified last
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
  // Has the structure source make ready what unify() will ask of it for this tree's
  // instructions, with the idle threads of the caller's task arena helping (the first
  // profile, unified alone, is where a measured binary's procedures are mostly analysed).
  // Changes nothing unify() gives. MT: thread-safe.
  void prepareStructure(const ProfileTree& tree) const;
  // GPU calling contexts (gpu_calls.hpp) for the profile whose tree `nodes` holds: the
  // values of its PC samples in called device functions, which unify() left without a
  // context, each emitted on the contexts of its call paths at its share. `weightMetric`:
  // the local id of the instruction samples (GINS) that weigh a call; -1: a call weighs
  // all its instruction's values. Returns the kernels left unapportioned (kGpuMaxPaths).
  // MT: thread-safe (contexts are made as unify() makes them).
  size_t reconstructGpu(const NodeContexts& nodes, std::span<const PointValue> values, int weightMetric,
                        const GpuEmit& emit) const;

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
    // on an unnamed function context below the operation. With structure, one in a function
    // that the module's call graph says is called gets no context (nullptr): GPU
    // calling-context reconstruction places its values (reconstructGpu).
    Sample,
    // A PC sample placed by reconstruction: as Sample, never left without a context.
    Placed,
  };
  // `structured`: the structure may cover the module; else the instruction is placed directly
  // (one lookup in the tree's table: a cache of it would only double it).
  Context* expandInstruction(Context* callSite, const std::string& modulePath, const Module* module, bool structured,
                             uint64_t offset, Gpu gpu) const;
  // The call graph of a GPU module, made on first use (nullptr: it has no call sites).
  const GpuCallGraph* gpuGraph(const Module* module) const;
  Cct& cct_;
  Names& names_;
  const StructureSource* structure_;
  // Set once unify() has left a PC sample to reconstruction: only then are trees' samples
  // listed (a CPU measurement never pays for it).
  mutable std::atomic<bool> gpuDeferred_{false};
  // (call site, module, offset) -> the instruction's leaf context: one entry per distinct
  // instruction context, so its size follows the unified tree, not the profile count.
  std::unique_ptr<Cache> cache_;
  struct GpuGraphs;
  std::unique_ptr<GpuGraphs> gpuGraphs_;
};

}  // namespace hpc::analysis
