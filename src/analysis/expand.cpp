#include "analysis/expand.hpp"

#include <oneapi/tbb/parallel_for.h>

#include <atomic>
#include <bit>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace hpc::analysis {

// Sharded open-addressing table; entries are never removed. Lookups take no lock: an entry
// is published by storing its `site` last (release), and a shard's table, once replaced by a
// bigger one, is kept until the end, so a reader holding the old one reads valid (if stale)
// entries. A miss is confirmed under the shard's lock before anything is created.
struct Expander::Cache {
  struct Entry {
    std::atomic<const Context*> site{nullptr};  // nullptr: empty slot
    const Module* module = nullptr;
    uint64_t offset = 0;
    Context* leaf = nullptr;
  };
  struct Table {
    explicit Table(size_t n) : mask(n - 1), slots(new Entry[n]) {}
    size_t mask;
    std::unique_ptr<Entry[]> slots;
  };
  struct alignas(64) Shard {
    std::mutex mu;
    std::atomic<Table*> table{nullptr};
    size_t used = 0;
    std::vector<std::unique_ptr<Table>> tables;  // the current one last
  };
  static constexpr size_t kShards = 64;
  Shard shards[kShards];

  Cache() {
    for (Shard& s : shards) {
      s.tables.push_back(std::make_unique<Table>(64));
      s.table.store(s.tables.back().get(), std::memory_order_release);
    }
  }

  static uint64_t hash(const Context* site, const Module* module, uint64_t offset) {
    uint64_t h = reinterpret_cast<uintptr_t>(site) * 0x9e3779b97f4a7c15ULL +
                 reinterpret_cast<uintptr_t>(module) * 0xc2b2ae3d27d4eb4fULL + offset;
    h ^= h >> 33;  // murmur3's finalizer: every input bit reaches the low bits
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 33);
  }
  static Context* probe(const Table& t, uint64_t h, const Context* site, const Module* module, uint64_t offset) {
    for (size_t i = (h >> 6) & t.mask;; i = (i + 1) & t.mask) {
      const Entry& e = t.slots[i];
      const Context* s = e.site.load(std::memory_order_acquire);
      if (!s) return nullptr;
      if (s == site && e.module == module && e.offset == offset) return e.leaf;
    }
  }
  // Under the shard's lock.
  static void put(Table& t, uint64_t h, const Context* site, const Module* module, uint64_t offset, Context* leaf) {
    for (size_t i = (h >> 6) & t.mask;; i = (i + 1) & t.mask) {
      Entry& e = t.slots[i];
      const Context* s = e.site.load(std::memory_order_relaxed);
      if (s == site && e.module == module && e.offset == offset) return;
      if (!s) {
        e.module = module;
        e.offset = offset;
        e.leaf = leaf;
        e.site.store(site, std::memory_order_release);
        return;
      }
    }
  }
  // MT: thread-safe, lock-free. A hint: the slot of hash h is looked up soon.
  void prefetch(uint64_t h) const {
    const Table* t = shards[h % kShards].table.load(std::memory_order_acquire);
    __builtin_prefetch(&t->slots[(h >> 6) & t->mask]);
  }
  // MT: thread-safe, lock-free.
  Context* find(uint64_t h, const Context* site, const Module* module, uint64_t offset) const {
    const Table* t = shards[h % kShards].table.load(std::memory_order_acquire);
    return probe(*t, h, site, module, offset);
  }
  // MT: thread-safe.
  Context* findLocked(uint64_t h, const Context* site, const Module* module, uint64_t offset) {
    Shard& s = shards[h % kShards];
    std::lock_guard lock(s.mu);
    return probe(*s.tables.back(), h, site, module, offset);
  }
  void insert(uint64_t h, const Context* site, const Module* module, uint64_t offset, Context* leaf) {
    Shard& s = shards[h % kShards];
    std::lock_guard lock(s.mu);
    Table* t = s.tables.back().get();
    if (probe(*t, h, site, module, offset)) return;
    if (2 * (s.used + 1) > t->mask + 1) {
      auto bigger = std::make_unique<Table>(2 * (t->mask + 1));
      for (size_t i = 0; i <= t->mask; ++i) {
        const Entry& e = t->slots[i];
        if (const Context* site0 = e.site.load(std::memory_order_relaxed))
          put(*bigger, hash(site0, e.module, e.offset), site0, e.module, e.offset, e.leaf);
      }
      t = bigger.get();
      s.tables.push_back(std::move(bigger));
      s.table.store(t, std::memory_order_release);
    }
    put(*t, h, site, module, offset, leaf);
    ++s.used;
  }
};

// The call graphs of GPU modules, each made once (nullptr: none).
struct Expander::GpuGraphs {
  std::mutex mu;
  std::map<const Module*, std::unique_ptr<GpuCallGraph>> byModule;
  const uint64_t serial = nextSerial();  // never 0
  static uint64_t nextSerial() {
    static std::atomic<uint64_t> next{0};
    return next.fetch_add(1, std::memory_order_relaxed) + 1;
  }
};

Expander::Expander(Cct& cct, Names& names, const StructureSource* structure)
    : cct_(cct), names_(names), structure_(structure), cache_(std::make_unique<Cache>()),
      gpuGraphs_(std::make_unique<GpuGraphs>()) {}
Expander::~Expander() = default;

const GpuCallGraph* Expander::gpuGraph(const Module* module) const {
  if (!structure_) return nullptr;
  // The thread's last answer, without the lock: a profile's samples are mostly in one module
  // (named by this expander's serial: another expander may live at the same address later).
  thread_local struct {
    uint64_t serial = 0;
    const Module* module = nullptr;
    const GpuCallGraph* graph = nullptr;
  } last;
  if (last.serial == gpuGraphs_->serial && last.module == module) return last.graph;
  {
    std::lock_guard lock(gpuGraphs_->mu);
    auto it = gpuGraphs_->byModule.find(module);
    if (it != gpuGraphs_->byModule.end()) {
      last = {gpuGraphs_->serial, module, it->second.get()};
      return it->second.get();
    }
  }
  // Made outside the lock: the structure may analyse the binary's procedures in parallel,
  // and this thread may meanwhile run another profile's task that asks for a graph too.
  std::vector<CallSite> sites;
  structure_->callSites(module->path, sites);
  std::unique_ptr<GpuCallGraph> graph = sites.empty() ? nullptr : std::make_unique<GpuCallGraph>(std::move(sites));
  std::lock_guard lock(gpuGraphs_->mu);
  const GpuCallGraph* g = gpuGraphs_->byModule.emplace(module, std::move(graph)).first->second.get();
  last = {gpuGraphs_->serial, module, g};
  return g;
}

size_t Expander::reconstructGpu(const NodeContexts& nodes, std::span<const PointValue> values, int weightMetric,
                                const GpuEmit& emit) const {
  const std::vector<GpuSample>& samples = nodes.gpuSamples();
  if (samples.empty()) return 0;
  std::unordered_map<uint32_t, uint32_t> byNode;
  byNode.reserve(samples.size());
  for (uint32_t i = 0; i < samples.size(); ++i) byNode.emplace(samples[i].node, i);
  std::vector<double> weights(samples.size(), 0.0);
  std::vector<GpuSampleValue> mine;
  for (const PointValue& p : values) {
    auto it = byNode.find(p.node);
    if (it == byNode.end()) continue;
    mine.push_back({it->second, p.metric, p.value});
    if (weightMetric < 0 || p.metric == weightMetric) weights[it->second] += p.value;
  }
  if (mine.empty()) return 0;
  const GpuPlace place = [this](Context* parent, const Module* m, uint64_t addr) {
    const bool structured = structure_ && structure_->mayCover(m->path);
    return expandInstruction(parent, m->path, m, structured, addr, Gpu::Placed);
  };
  return reconstructGpuContexts(samples, weights, mine, place, emit);
}

namespace {

ContextKey entryKey(EntryKind k) {
  ContextKey key;
  key.kind = NodeKind::Entry;
  key.entry = k;
  return key;
}

// An instruction without structure: a call to its own (unknown) function.
ContextKey instructionKey(const Module* module, uint64_t offset) {
  ContextKey k;
  k.type = LexType::Instruction;
  k.relation = Relation::Call;
  k.module = module;
  k.offset = offset;
  return k;
}

const char* gpuPlaceholderName(Placeholder p) {
  switch (p) {
  case Placeholder::GpuCopy: return "<gpu copy>";
  case Placeholder::GpuMemset: return "<gpu memset>";
  case Placeholder::GpuSync: return "<gpu sync>";
  case Placeholder::GpuAlloc: return "<gpu alloc>";
  default: return "<gpu kernel>";
  }
}

}  // namespace

Context* Expander::gpuOperation(Context* launch, Placeholder p) const {
  // Each placeholder kind is a Function of its own, even where two share a name (a kernel
  // and the stream trace path): the reference lists them apart. `site` tells them apart.
  ContextKey k;
  k.type = LexType::Function;
  k.relation = Relation::Call;
  k.function = names_.function(gpuPlaceholderName(p), nullptr, 0, nullptr, 0, uint64_t(p));
  return launch->child(k);
}

Context* Expander::expandInstruction(Context* callSite, const std::string& modulePath,
                                     const Module* module, bool structured, uint64_t offset, Gpu gpu) const {
  // GPU code below an operation placeholder is rare and placed by its own rules: uncached.
  // Without structure an instruction is one lookup in the tree's table, which is what the
  // cache would be: uncached too (the cache took a third of the tree's memory).
  const bool cached = gpu == Gpu::No && structured;
  const uint64_t h = Cache::hash(callSite, module, offset);
  if (cached) {
    if (Context* leaf = cache_->find(h, callSite, module, offset)) return leaf;
    if (Context* leaf = cache_->findLocked(h, callSite, module, offset)) return leaf;
  }
  Context* leafCtx = nullptr;
  thread_local std::vector<ScopeStep> steps;
  steps.clear();
  // hpcrun already records a return address minus one for callers, so the offset
  // itself lies in the calling instruction.
  if (structured && structure_ && structure_->lookup(modulePath, offset, steps) && !steps.empty()) {
    // A PC sample in a device function that some call site calls: its call paths, and its
    // values' shares of them, are the profile's to reconstruct (reconstructGpu).
    if (gpu == Gpu::Sample && steps.front().kind == ScopeStep::Kind::Procedure)
      if (const GpuCallGraph* g = gpuGraph(module); g && g->hasCallers(steps.front().offset)) {
        gpuDeferred_.store(true, std::memory_order_release);
        return nullptr;
      }
    Context* at = callSite;
    Context* entry = nullptr;
    bool first = true;
    for (const ScopeStep& s : steps) {
      ContextKey k;
      const File* file = s.file.empty() ? nullptr : names_.file(s.file);
      switch (s.kind) {
      case ScopeStep::Kind::Procedure:
      case ScopeStep::Kind::Inline:
        k.type = LexType::Function;
        k.relation = s.kind == ScopeStep::Kind::Procedure ? Relation::Call : Relation::InlinedCall;
        k.function = s.moduleless ? names_.function(s.name, nullptr, 0, file, s.line, 0)
                                  : names_.function(s.name, module, s.kind == ScopeStep::Kind::Procedure ? s.offset : 0,
                                                    file, s.line, s.site);
        break;
      case ScopeStep::Kind::Loop:
        k.type = LexType::Loop;
        k.relation = first ? Relation::Call : Relation::Lexical;
        k.file = file;
        k.line = s.line;
        k.module = module;
        k.offset = s.offset;
        break;
      case ScopeStep::Kind::Line:
        k.type = LexType::Line;
        k.relation = first ? Relation::Call : Relation::Lexical;
        k.file = file;
        k.line = s.line;
        break;
      }
      at = at->child(k);
      if (first && gpu == Gpu::Entry && s.kind == ScopeStep::Kind::Procedure && s.offset == offset) entry = at;
      first = false;
    }
    ContextKey leaf;
    leaf.type = LexType::Instruction;
    leaf.relation = Relation::Lexical;
    leaf.module = module;
    leaf.offset = offset;
    leaf.hidden = true;
    leafCtx = at->child(leaf);
    if (entry) leafCtx = entry;
  } else {
    // No structure: the instruction stands for its whole (unknown) function.
    if (gpu == Gpu::Sample || gpu == Gpu::Placed) {
      ContextKey unknown;
      unknown.type = LexType::Function;
      unknown.relation = Relation::Call;
      callSite = callSite->child(unknown);
    }
    leafCtx = callSite->child(instructionKey(module, offset));
  }
  if (cached) cache_->insert(h, callSite, module, offset, leafCtx);
  return leafCtx;
}

namespace {

// A node's key (module, offset, kind) exactly in 63 bits, for the keyed template: offsets
// below 2^42 (any module's), so a key equal to a template child's is that child's key. A node
// whose key does not fit has kNoKey and is never matched in the template (the shared table
// serves it), and the template's slot 0, the roots' parent, has it too.
constexpr uint64_t kNoKey = ~uint64_t(0);
uint64_t packedKey(uint64_t offset, uint16_t module, Placeholder placeholder, bool unwound) {
  if (offset >> 42 || uint8_t(placeholder) >= 16) return kNoKey;
  return offset | uint64_t(module) << 42 | uint64_t(uint8_t(placeholder)) << 58 | uint64_t(unwound ? 1 : 0) << 62;
}
uint64_t packedKey(const TreeNode& t) { return packedKey(t.offset, t.module, t.placeholder, t.unwound); }
// A packed key's bits, all mixed into each (for the keyed template's sibling blocks).
inline uint64_t keyHash(uint64_t k) {
  k ^= k >> 33;
  k *= 0xFF51AFD7ED558CCDull;
  k ^= k >> 33;
  k *= 0xC4CEB9FE1A85EC53ull;
  return k ^ (k >> 33);
}
// A keyed template's block of siblings, in one word: its first slot (bits 0-31) and either
// (bit 63 clear) log2 of its size (bits 32-37) and a rotation (bits 38-43) under which the
// top bits of each sibling's keyHash() are its place in the block, no two alike (a perfect
// hash: a node's match is found with no search, so a child's lookup waits on little more
// than its parent's), or (bit 63 set) the count of its siblings (bits 32-62), sorted by key.
// 0: slot 0 alone, which holds no key: no children.
constexpr uint64_t kSortedBlock = uint64_t(1) << 63;
inline uint32_t blockPlace(uint64_t block, uint64_t hash) {
  const unsigned lg = unsigned(block >> 32) & 63, rot = unsigned(block >> 38) & 63;
  return uint32_t(block) + uint32_t((std::rotl(hash, int(rot)) >> 1) >> (63 - lg));
}

bool sameNode(const TreeNode& a, const TreeNode& b) {
  return a.id == b.id && a.parent == b.parent && a.offset == b.offset && a.module == b.module &&
         a.placeholder == b.placeholder && a.unwound == b.unwound;
}

}  // namespace

void NodeContexts::seedFrom(const NodeContexts& o) {
  dense_ = o.dense_;
  posTable_ = o.posTable_;
  prevPosTable_ = o.prevPosTable_;
  posHash_ = o.posHash_;
  ctx_ = o.ctx_;
  done_ = o.done_;
  templateId_ = o.templateId_;
  prevCtx_ = o.prevCtx_;
  keyed_ = o.keyed_;
  keyedLoadMap_ = o.keyedLoadMap_;
  keyedLoadMapGen_ = o.keyedLoadMapGen_;
  keyedCtx_ = o.keyedCtx_;
  keyedSlot_ = o.keyedSlot_;
  keyedRoots_ = o.keyedRoots_;
  keyedKids_ = o.keyedKids_;
  prevKeyedKids_ = o.prevKeyedKids_;
  keyedGen_ = o.keyedGen_;
  keyedKidsGen_ = o.keyedKidsGen_;
  prevLoadMap_ = o.prevLoadMap_;
  prevLoadMapGen_ = o.prevLoadMapGen_;
  gpuSamples_ = o.gpuSamples_;
  // lm_, lmSparse_ and unknown_ are made again by every unify().
}

void Expander::prepareStructure(const ProfileTree& tree) const {
  if (!structure_) return;
  // The modules the structure may cover (the first of duplicate ids, as unify takes): a
  // tree in modules it does not (the benchmark's, or --foreign) costs no pass over its nodes.
  struct Module {
    const std::string* path;
    bool covered = false;
    std::vector<uint64_t> offsets;
  };
  std::vector<Module> modules;  // each path once: a task asks for it once (see below)
  std::map<uint16_t, size_t> index;  // load module id -> modules
  std::map<std::string_view, size_t> byPath;
  // Only the modules its instructions fall in: a program maps many it is never sampled in
  // (the g++ measurement's cc1plus: libisl, libmpfr, libz...), and asking opened each, a pass
  // over all its procedures (that measurement at -j2: 16 binaries opened where 8 were used).
  std::vector<uint64_t> used(size_t(1) << 10, 0);  // a bit per load module id
  for (const TreeNode& node : tree.nodes)
    if (node.placeholder == Placeholder::None) used[node.module / 64] |= uint64_t(1) << (node.module % 64);
  for (const auto& [id, path] : tree.loadMap) {
    if (index.count(id)) continue;
    if (!(used[id / 64] >> (id % 64) & 1)) {
      index[id] = SIZE_MAX;  // the first of duplicate ids, as unify takes: unused
      continue;
    }
    auto [at, added] = byPath.emplace(path, modules.size());
    if (added) modules.push_back({&path, false, {}});
    index[id] = at->second;
  }
  // Asked in parallel: the first question opens a measured binary, tens of ms for a large
  // stripped one (its symbols, unwind tables and the procedures only calls reach), itself
  // on the arena's threads. A thread waiting inside one module's opening may take another
  // module's task, never its own module's again (that would wait on itself).
  tbb::parallel_for(size_t(0), modules.size(),
                    [&](size_t k) { modules[k].covered = structure_->mayCover(*modules[k].path); });
  bool any = false;
  for (const Module& m : modules) any = any || m.covered;
  if (!any) return;
  for (const TreeNode& node : tree.nodes)
    if (node.placeholder == Placeholder::None)
      if (auto it = index.find(node.module); it != index.end() && it->second != SIZE_MAX && modules[it->second].covered)
        modules[it->second].offsets.push_back(node.offset);
  tbb::parallel_for(size_t(0), modules.size(), [&](size_t k) {
    if (modules[k].covered) structure_->prepare(*modules[k].path, modules[k].offsets);
  });
}

Status Expander::unify(const ProfileTree& tree, NodeContexts& out) const {
  // Load modules are interned on first use, so that unused ones never reach meta.db.
  using Lm = NodeContexts::Lm;
  constexpr uint16_t kDenseLm = 4096;
  out.lm_.clear();
  out.lmSparse_.clear();
  out.unknown_.clear();
  for (const auto& [id, path] : tree.loadMap) {
    if (id < kDenseLm) {
      if (out.lm_.size() <= id) out.lm_.resize(size_t(id) + 1);
      if (!out.lm_[id].path) out.lm_[id].path = &path;  // the first of duplicate ids, as before
    } else {
      out.lmSparse_.push_back({id, {&path, nullptr}});
    }
  }
  auto moduleOf = [&](uint16_t id) -> Lm& {
    Lm* lm = nullptr;
    if (id < kDenseLm) {
      if (out.lm_.size() <= id) out.lm_.resize(size_t(id) + 1);
      lm = &out.lm_[id];
    } else {
      for (auto& [mid, l] : out.lmSparse_)
        if (mid == id) lm = &l;
      if (!lm) lm = &out.lmSparse_.emplace_back(id, Lm{}).second;
    }
    if (!lm->module) {
      if (!lm->path) {
        out.unknown_.push_back(std::make_unique<std::string>("<unknown load module " + std::to_string(id) + ">"));
        lm->path = out.unknown_.back().get();
      }
      lm->module = names_.module(*lm->path);
      lm->structured = structure_ && structure_->mayCover(*lm->path);
    }
    return *lm;
  };

  // The template's nodes again: every context is known, and so is every node's position.
  // Load maps compared by their generations where both have one (thousands of modules).
  auto sameMap = [&](const std::vector<std::pair<uint16_t, std::string>>& map, uint64_t gen) {
    return (tree.loadMapGen != 0 && tree.loadMapGen == gen) || tree.loadMap == map;
  };
  const bool sameLoadMap = sameMap(out.prevLoadMap_, out.prevLoadMapGen_);
  if (tree.nodesId != 0 && tree.nodesId == out.templateId_ && sameLoadMap) {
    out.prevLoadMapGen_ = tree.loadMapGen;
    return Status();
  }
  const uint64_t templateId = out.templateId_;
  out.templateId_ = 0;  // until this tree is done
  if (!sameLoadMap) out.prevLoadMap_ = tree.loadMap;
  out.prevLoadMapGen_ = tree.loadMapGen;

  // Node id -> position in tree.nodes: a table when ids are dense, else a hash map.
  const size_t n = tree.nodes.size();
  const uint32_t maxId = maxNodeId(tree);
  // The template tree's table is kept: a node is found in the template by its id (a sparse
  // tree left its table empty).
  std::swap(out.posTable_, out.prevPosTable_);
  out.dense_ = NodeContexts::denseIds(n, maxId);
  out.posTable_.clear();
  out.posHash_.clear();
  auto duplicate = [](uint32_t id) { return Status::error("duplicate cct node id " + std::to_string(id)); };
  if (out.dense_) {
    out.posTable_.assign(size_t(maxId) + 1, -1);
    for (size_t i = 0; i < n; ++i) {
      int32_t& slot = out.posTable_[tree.nodes[i].id];
      if (slot >= 0) return duplicate(tree.nodes[i].id);
      slot = int32_t(i);
    }
  } else {
    out.posHash_.reserve(n);
    for (size_t i = 0; i < n; ++i)
      if (!out.posHash_.emplace(tree.nodes[i].id, uint32_t(i)).second) return duplicate(tree.nodes[i].id);
  }

  // The previous profile's contexts become the template; this profile's go in ctx_.
  std::swap(out.ctx_, out.prevCtx_);
  const std::vector<TreeNode>& prev = tree.previousNodes;
  const std::vector<Context*>& prevCtx = out.prevCtx_;
  // Template positions [0, m); m drops to 0 when the first kProbe nodes show that this
  // profile lists its nodes in an order of its own (then comparing would only cost).
  size_t m = templateId != 0 && tree.previousNodesId == templateId && sameLoadMap
                 ? std::min(prev.size(), prevCtx.size())
                 : 0;
  constexpr size_t kProbe = 256;
  constexpr size_t kLookupsForKeyed = 32;
  size_t hits = 0;
  // Node `at`'s template node: the one at its position, or else the one with its id (a
  // profile that lacks some of the template's nodes or has more lists the rest shifted),
  // where it is the same node (id, parent id, key); -1 where there is none.
  const int32_t* prevPos = out.prevPosTable_.data();
  const size_t prevPosSize = out.prevPosTable_.size();
  // The shift of the last node found by id is tried first (the nodes after one left out).
  int64_t shift = 0;
  auto templateOf = [&](size_t at) -> int64_t {
    const TreeNode& t = tree.nodes[at];
    size_t p = size_t(int64_t(at) + shift);
    if (p >= m || prev[p].id != t.id) {
      if (t.id >= prevPosSize) return -1;
      const int32_t q = prevPos[t.id];
      if (q < 0 || size_t(q) >= m) return -1;
      p = size_t(q);
      shift = int64_t(p) - int64_t(at);
    }
    return sameNode(t, prev[p]) ? int64_t(p) : -1;
  };
  auto matched = [&](size_t at) -> uint8_t {
    if (m == 0) return 1;
    const int64_t t = templateOf(at);
    return t >= 0 && out.ctx_[at] == prevCtx[size_t(t)] ? 2 : 1;
  };
  std::vector<Context*>& ctx = out.ctx_;
  std::vector<uint8_t>& done = out.done_;
  ctx.resize(n);  // every node's is set below, before any is read
  done.assign(n, 0);
  // Sibling blocks up to this many are placed by a perfect hash; more are sorted.
  constexpr uint32_t kPerfectUpTo = 16;
  using KeyedSlot = NodeContexts::KeyedSlot;
  // Makes the keyed template from a tree's nodes, their contexts (by position) and their
  // positions (by id); kidsOf (if any) gets each node's own match (its slot's children).
  auto buildKeyed = [&](const std::vector<TreeNode>& nodes, const std::vector<Context*>& ctxOf, auto&& posOf,
                        std::vector<uint64_t>* kidsOf) {
    const size_t n = nodes.size();
    out.keyed_ = true;
    out.keyedLoadMap_ = tree.loadMap;
    out.keyedLoadMapGen_ = tree.loadMapGen;
    // Children by parent position (roots under the extra position n), by counting.
    std::vector<uint32_t> start(n + 2, 0);
    auto parentPos = [&](const TreeNode& t) -> size_t {
      if (!t.parent) return n;
      const int64_t pp = posOf(t.parent);
      return pp < 0 ? n + 1 : size_t(pp);  // n + 1: orphans, never matched
    };
    for (size_t i = 0; i < n; ++i)
      if (const size_t pp = parentPos(nodes[i]); pp <= n) ++start[pp + 1];
    for (size_t p = 0; p <= n; ++p) start[p + 1] += start[p];
    std::vector<uint32_t> kids(start[n + 1]);
    {
      std::vector<uint32_t> fill(start.begin(), start.end() - 1);
      for (size_t i = 0; i < n; ++i)
        if (const size_t pp = parentPos(nodes[i]); pp <= n) kids[fill[pp]++] = uint32_t(i);
    }
    // Slots in blocks of siblings, each node's block made where a depth-first walk from the
    // roots meets it: a subtree's blocks lie together, as do its nodes in a profile's list.
    // Of siblings with equal keys the first has a slot (the others none: never found).
    // Slot 0 holds no key: the block of a node without children.
    std::vector<uint32_t> order(1, UINT32_MAX);  // slot -> position (UINT32_MAX: none)
    std::vector<KeyedSlot>& slots = out.keyedSlot_;
    slots.assign(1, KeyedSlot{kNoKey, 0});
    std::vector<uint32_t> stack;
    std::vector<uint32_t> unique;
    std::vector<uint64_t> uniqueKeys, uniqueHashes;
    // The children of position p (n: the roots) take the next block; returns it.
    auto block = [&](uint32_t p) -> uint64_t {
      unique.clear();
      uniqueKeys.clear();
      for (uint32_t k = start[p]; k < start[p + 1]; ++k) {
        const uint64_t key = packedKey(nodes[kids[k]]);
        if (key == kNoKey) continue;
        if (start[p + 1] - start[p] <= kPerfectUpTo &&
            std::find(uniqueKeys.begin(), uniqueKeys.end(), key) != uniqueKeys.end())
          continue;
        unique.push_back(kids[k]);
        uniqueKeys.push_back(key);
      }
      const uint32_t count = uint32_t(unique.size());
      if (count == 0) return 0;
      uniqueHashes.resize(count);
      for (uint32_t i = 0; i < count; ++i) uniqueHashes[i] = keyHash(uniqueKeys[i]);
      const uint32_t begin = uint32_t(slots.size());
      uint64_t made = 0;
      if (count <= kPerfectUpTo) {
        // The smallest block (up to 64 slots) and rotation that place the siblings apart.
        unsigned lg = 0;
        while ((1u << lg) < count) ++lg;
        for (; lg <= 6 && !made; ++lg)
          for (unsigned rot = 0; rot < 64 && !made; ++rot) {
            const uint64_t candidate = begin | uint64_t(lg) << 32 | uint64_t(rot) << 38;
            uint64_t taken = 0;
            bool apart = true;
            for (uint32_t i = 0; i < count && apart; ++i) {
              const uint64_t bit = uint64_t(1) << (blockPlace(candidate, uniqueHashes[i]) - begin);
              apart = !(taken & bit);
              taken |= bit;
            }
            if (apart) made = candidate;
          }
      }
      if (made) {
        const unsigned lg = unsigned(made >> 32) & 63;
        slots.resize(begin + (size_t(1) << lg), KeyedSlot{kNoKey, 0});
        order.resize(slots.size(), UINT32_MAX);
        for (uint32_t i = 0; i < count; ++i) order[blockPlace(made, uniqueHashes[i])] = unique[i];
      } else {
        // Sorted (stable: the first of equal keys first), searched by halves.
        std::stable_sort(unique.begin(), unique.end(),
                         [&](uint32_t a, uint32_t b) { return packedKey(nodes[a]) < packedKey(nodes[b]); });
        uint32_t kept = 0;
        for (uint32_t i = 0; i < count; ++i)
          if (kept == 0 || packedKey(nodes[unique[i]]) != packedKey(nodes[unique[kept - 1]])) unique[kept++] = unique[i];
        slots.resize(begin + kept, KeyedSlot{kNoKey, 0});
        order.resize(slots.size(), UINT32_MAX);
        std::copy(unique.begin(), unique.begin() + kept, order.begin() + begin);
        made = begin | uint64_t(kept) << 32 | kSortedBlock;
      }
      for (uint32_t c = uint32_t(slots.size()); c > begin; --c)
        if (order[c - 1] != UINT32_MAX) stack.push_back(c - 1);
      return made;
    };
    out.keyedRoots_ = block(uint32_t(n));
    while (!stack.empty()) {
      const uint32_t c = stack.back();
      stack.pop_back();
      slots[c].key = packedKey(nodes[order[c]]);
      slots[c].kids = block(order[c]);
    }
    // Nodes not reached from the roots (a cycle) have no slot.
    const size_t total = slots.size();
    out.keyedCtx_.assign(total, nullptr);
    // This tree's nodes are the template's, each its own match.
    ++out.keyedGen_;
    if (kidsOf) kidsOf->assign(n, 0);
    for (size_t c = 1; c < total; ++c) {
      if (order[c] == UINT32_MAX) continue;
      out.keyedCtx_[c] = ctxOf[order[c]];
      if (kidsOf) (*kidsOf)[order[c]] = slots[c].kids;
    }
  };
  bool keyedNow = out.keyed_ && sameMap(out.keyedLoadMap_, out.keyedLoadMapGen_);
  // Whether this profile had a positional template to start with.
  const bool positional = m != 0;
  // A keyed template is made when first needed: where the positional one would give up on
  // this profile (under half of the first kProbe nodes are the template's), from the template
  // tree. A program whose threads list their trees alike, as most do, never makes one.
  if (!keyedNow && m != 0 && n >= kProbe && m == prev.size() && out.prevPosTable_.size() > 0) {
    size_t alike = 0;
    for (size_t s = 0; s < kProbe; ++s) alike += templateOf(s) >= 0 ? 1 : 0;
    shift = 0;
    if (2 * alike < kProbe) {
      const std::vector<int32_t>& table = out.prevPosTable_;
      buildKeyed(prev, prevCtx, [&table](uint32_t id) -> int64_t { return id < table.size() ? table[id] : -1; },
                 nullptr);
      keyedNow = true;
      m = 0;
    }
  }
  const bool keyed = keyedNow;
  // The template's matches, where made against this keyed template.
  std::swap(out.keyedKids_, out.prevKeyedKids_);
  const bool keyedFromPrev = keyed && out.keyedKidsGen_ == out.keyedGen_ && m <= out.prevKeyedKids_.size();
  const uint64_t* prevKeyedKids = out.prevKeyedKids_.data();
  out.keyedKidsGen_ = 0;  // until this tree is done
  std::vector<uint64_t>& keyedKids = out.keyedKids_;
  if (keyed) keyedKids.resize(n);  // set with each node's context (0 where unmatched)
  size_t keyedHits = 0;
  size_t lookups = 0;  // nodes given a context by the shared table
  // The slot of a node's match in the block `kids` by its packed key (and keyHash() of it):
  // at its place in a perfect block, else searched by halves; -1 where none is.
  auto search = [](const KeyedSlot* __restrict slots, uint64_t kids, uint64_t key, uint64_t hash) -> int32_t {
    if (kids & kSortedBlock) [[unlikely]] {
      const KeyedSlot* at = slots + uint32_t(kids);
      const uint32_t count = uint32_t(kids >> 32) & 0x7FFFFFFF;
      const KeyedSlot* found =
          std::lower_bound(at, at + count, key, [](const KeyedSlot& k, uint64_t want) { return k.key < want; });
      return found != at + count && found->key == key && key != kNoKey ? int32_t(found - slots) : -1;
    }
    const uint32_t f = blockPlace(kids, hash);
    return (slots[f].key == key) & (key != kNoKey) ? int32_t(f) : -1;
  };
  const KeyedSlot* keyedSlot = out.keyedSlot_.data();
  // Runs of nodes matched in the keyed template under parents that were, in a loop over
  // plain arrays.
  auto keyedRun = [&search](size_t s, size_t n, const TreeNode* __restrict nodes, const int32_t* __restrict pos,
                            size_t posSize, uint8_t* __restrict marks, Context** __restrict contexts,
                            uint64_t* __restrict keyedKids, const KeyedSlot* __restrict keyedSlot,
                            Context* const* __restrict keyedCtx) {
    for (; s < n; ++s) {
      const TreeNode& node = nodes[s];
      if (marks[s] || !node.parent || node.parent >= posSize) break;
      const int32_t pp = pos[node.parent];
      if (pp < 0 || !marks[pp]) break;
      const uint64_t key = packedKey(node);
      const int32_t f = search(keyedSlot, keyedKids[pp], key, keyHash(key));
      if (f < 0) break;
      contexts[s] = keyedCtx[f];
      keyedKids[s] = keyedSlot[f].kids;
      marks[s] = 1;
    }
    return s;
  };
  Context* root = cct_.root();
  auto entry = [&](EntryKind k) { return root->child(entryKey(k)); };
  std::vector<uint32_t>& chain = out.chain_;
  // Without a template every node is looked up in the tree's table (the first profile makes
  // most of the tree): the slot of a node a few ahead is fetched early where its parent is
  // known already (hpcrun lists parents first, mostly close before their children).
  const bool lookAhead = m == 0 && !keyed;
  constexpr size_t kAhead = 8;
  auto prefetchNode = [&](size_t a) {
    const TreeNode& node = tree.nodes[a];
    if (node.placeholder != Placeholder::None || !node.parent) return;
    const int64_t pp = out.posOf(node.parent);
    if (pp < 0 || !done[size_t(pp)]) return;
    const Context* parent = ctx[size_t(pp)];
    if (!parent || parent == root || node.module >= out.lm_.size() || !out.lm_[node.module].module) return;
    const Lm& lm = out.lm_[node.module];
    if (lm.structured) cache_->prefetch(Cache::hash(parent, lm.module, node.offset));
    else cct_.prefetchChild(parent, instructionKey(lm.module, node.offset));
  };
  // Runs of nodes equal to the template's at the same shift, under parents that are: the
  // template's contexts, in a loop over plain arrays (up to the probe, which it must not skip).
  const bool runs = m != 0 && out.dense_ && (!keyed || keyedFromPrev);
  auto run = [](size_t s, size_t end, int64_t shift, size_t m, const TreeNode* __restrict nodes,
                const TreeNode* __restrict prevNodes, const int32_t* __restrict pos, size_t posSize,
                uint8_t* __restrict marks, Context** __restrict contexts, Context* const* __restrict prevContexts,
                uint64_t* __restrict keyedKids, const uint64_t* __restrict prevKeyedKids) {
    for (; s < end; ++s) {
      const size_t p = size_t(int64_t(s) + shift);
      const TreeNode& node = nodes[s];
      if (p >= m || marks[s] || !node.parent || node.parent >= posSize || !sameNode(node, prevNodes[p])) break;
      const int32_t pp = pos[node.parent];
      if (pp < 0 || marks[pp] != 2) break;
      contexts[s] = prevContexts[p];
      marks[s] = 2;
      if (keyedKids) keyedKids[s] = prevKeyedKids[p];
    }
    return s;
  };
  for (size_t s = 0; s < n; ++s) {
    if (s == kProbe && 2 * hits < kProbe) m = 0;
    if (runs && m != 0) {
      const size_t from = s;
      s = run(s, s < kProbe ? kProbe : n, shift, m, tree.nodes.data(), prev.data(), out.posTable_.data(),
              out.posTable_.size(), done.data(), ctx.data(), prevCtx.data(), keyed ? keyedKids.data() : nullptr,
              prevKeyedKids);
      hits += s - from;
      if (s == n) break;
      if (s == kProbe && 2 * hits < kProbe) m = 0;
    }
    if (m == 0 && keyed && out.dense_) {
      const size_t from = s;
      s = keyedRun(s, n, tree.nodes.data(), out.posTable_.data(), out.posTable_.size(), done.data(), ctx.data(),
                   keyedKids.data(), keyedSlot, out.keyedCtx_.data());
      keyedHits += s - from;
      if (s == n) break;
    }
    if (lookAhead && s + kAhead < n) prefetchNode(s + kAhead);
    if (done[s]) continue;
    const TreeNode& node = tree.nodes[s];
    // As in the template, under a parent that is: the template's context.
    if (const int64_t t = m != 0 && node.parent ? templateOf(s) : -1; t >= 0) {
      const int64_t pp = out.posOf(node.parent);
      if (pp >= 0 && done[size_t(pp)] == 2) {
        ctx[s] = prevCtx[size_t(t)];
        done[s] = 2;
        ++hits;
        if (keyedFromPrev) {
          keyedKids[s] = prevKeyedKids[t];  // the same node, the same match
        } else if (keyed) {
          const uint64_t key = packedKey(node);
          const int32_t f = search(keyedSlot, keyedKids[size_t(pp)], key, keyHash(key));
          keyedKids[s] = f < 0 ? 0 : keyedSlot[f].kids;
        }
        continue;
      }
    }
    // Keyed template: the parent matched a template node, this node one of its children.
    if (keyed) {
      uint64_t kids = 0;
      if (!node.parent) {
        kids = out.keyedRoots_;
      } else {
        const int64_t pp = out.posOf(node.parent);
        if (pp >= 0 && done[size_t(pp)]) kids = keyedKids[size_t(pp)];
      }
      const uint64_t key = packedKey(node);
      if (const int32_t f = search(keyedSlot, kids, key, keyHash(key)); f >= 0) {
        ctx[s] = out.keyedCtx_[size_t(f)];
        keyedKids[s] = keyedSlot[f].kids;
        done[s] = matched(s);
        ++keyedHits;
        continue;
      }
    }
    // The common case, handled as below but without the chain: an instruction whose parent
    // is resolved (hpcrun lists parents first) to a context that is not the root and not a
    // GPU operation.
    if (node.placeholder == Placeholder::None && node.parent) {
      const int64_t pp = out.posOf(node.parent);
      if (pp >= 0 && done[size_t(pp)]) {
        Context* parent = ctx[size_t(pp)];
        if (parent && parent != root && !isGpuPlaceholder(tree.nodes[size_t(pp)].placeholder)) {
          // Inline: the module already met in this profile, the instruction already known.
          const Lm* lm = node.module < out.lm_.size() && out.lm_[node.module].module ? &out.lm_[node.module]
                                                                                      : &moduleOf(node.module);
          Context* leaf =
              lm->structured ? cache_->find(Cache::hash(parent, lm->module, node.offset), parent, lm->module, node.offset)
                             : nullptr;
          ctx[s] = leaf ? leaf : expandInstruction(parent, *lm->path, lm->module, lm->structured, node.offset, Gpu::No);
          ++lookups;
          if (keyed) keyedKids[s] = 0;
          done[s] = matched(s);
          continue;
        }
      }
    }
    // Resolve the unmapped ancestors first, outermost first; the file need not list
    // parents before children.
    chain.clear();
    for (int64_t at = int64_t(s); at >= 0 && !done[size_t(at)];) {
      chain.push_back(uint32_t(at));
      if (chain.size() > n)
        return Status::error("calling-context tree has a cycle at node " +
                             std::to_string(tree.nodes[size_t(at)].id));
      const TreeNode& t = tree.nodes[size_t(at)];
      at = t.parent ? out.posOf(t.parent) : -1;
    }
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      const TreeNode& node = tree.nodes[*it];
      Context* parent = nullptr;
      bool orphan = true;
      int64_t pp = -1;
      if (node.parent) {
        pp = out.posOf(node.parent);
        if (pp >= 0 && done[size_t(pp)]) {
          parent = ctx[size_t(pp)];
          orphan = false;
        }
      }
      Context* self = nullptr;
      switch (node.placeholder) {
      case Placeholder::Root: self = root; break;
      case Placeholder::NoActivity: self = nullptr; break;
      case Placeholder::MainThread: self = entry(EntryKind::MainThread); break;
      case Placeholder::Thread: self = entry(EntryKind::ApplicationThread); break;
      case Placeholder::Other: self = parent ? parent : root; break;
      case Placeholder::GpuKernel:
      case Placeholder::GpuCopy:
      case Placeholder::GpuMemset:
      case Placeholder::GpuSync:
      case Placeholder::GpuAlloc:
      case Placeholder::GpuTrace:
        if (orphan || !parent || parent == root) parent = entry(EntryKind::Unknown);
        self = gpuOperation(parent, node.placeholder);
        break;
      case Placeholder::None: {
        // Code reached without a known entry (partial unwind) hangs on "unknown entry".
        Gpu gpu = Gpu::No;
        if (!orphan && isGpuPlaceholder(tree.nodes[size_t(pp)].placeholder))
          gpu = node.unwound ? Gpu::Entry : Gpu::Sample;
        if (orphan || !parent || parent == root) parent = entry(EntryKind::Unknown);
        const Lm& lm = moduleOf(node.module);
        self = expandInstruction(parent, *lm.path, lm.module, lm.structured, node.offset, gpu);
        ++lookups;
        break;
      }
      }
      ctx[*it] = self;
      if (keyed) keyedKids[*it] = 0;
      done[*it] = matched(*it);
    }
  }
  // The PC samples of kernels in modules with call graphs, once some sample was left to
  // reconstruction (by this tree or one before it: its contexts may be a template's).
  out.gpuSamples_.clear();
  if (gpuDeferred_.load(std::memory_order_acquire)) {
    thread_local std::vector<ScopeStep> steps;
    for (size_t i = 0; i < n; ++i) {
      const TreeNode& node = tree.nodes[i];
      if (node.unwound || node.placeholder != Placeholder::None || !node.parent) continue;
      const int64_t pp = out.posOf(node.parent);
      if (pp < 0 || tree.nodes[size_t(pp)].placeholder != Placeholder::GpuKernel || !ctx[size_t(pp)]) continue;
      const Lm& lm = moduleOf(node.module);
      if (!lm.structured) continue;
      const GpuCallGraph* g = gpuGraph(lm.module);
      if (!g || !structure_->lookup(*lm.path, node.offset, steps) || steps.empty() ||
          steps.front().kind != ScopeStep::Kind::Procedure)
        continue;
      out.gpuSamples_.push_back(
          {node.id, node.parent, ctx[size_t(pp)], lm.module, g, node.offset, steps.front().offset, ctx[i]});
    }
  }
  out.templateId_ = tree.nodesId;  // the next tree's template
  if (keyed) out.keyedKidsGen_ = out.keyedGen_;
  // A new keyed template from this tree when the positional one gave up on it and the keyed
  // one (if any) matched under half of it; or, where there is none, when the positional one
  // served but left many nodes to the shared table (threads that reach not quite the same
  // code: each profile has nodes its template lacks, a miss in the shared table each, where
  // the keyed template, made from a third profile, mostly has them).
  const bool missedMany = m != 0 && !keyed && lookups >= kLookupsForKeyed;
  if (n >= kProbe && ((m == 0 && 2 * keyedHits < n && (positional || !out.dense_)) || missedMany)) {
    buildKeyed(tree.nodes, ctx, [&](uint32_t id) { return out.posOf(id); }, &keyedKids);
    out.keyedKidsGen_ = out.keyedGen_;
  }
  return Status();
}

}  // namespace hpc::analysis
