#include "analysis/expand.hpp"

#include <mutex>
#include <string>
#include <vector>

namespace hpc::analysis {

// Sharded open-addressing table; entries are never removed.
struct Expander::Cache {
  struct Entry {
    const Context* site = nullptr;  // nullptr: empty slot
    const Module* module = nullptr;
    uint64_t offset = 0;
    Context* leaf = nullptr;
  };
  struct Shard {
    std::mutex mu;
    std::vector<Entry> slots = std::vector<Entry>(64);
    size_t used = 0;
  };
  static constexpr size_t kShards = 64;
  Shard shards[kShards];

  static uint64_t hash(const Context* site, const Module* module, uint64_t offset) {
    uint64_t h = reinterpret_cast<uintptr_t>(site) * 0x9e3779b97f4a7c15ULL +
                 reinterpret_cast<uintptr_t>(module) * 0xc2b2ae3d27d4eb4fULL + offset;
    h ^= h >> 33;  // murmur3's finalizer: every input bit reaches the low bits
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 33);
  }
  static Context* probe(const Shard& s, uint64_t h, const Context* site, const Module* module, uint64_t offset) {
    const size_t mask = s.slots.size() - 1;
    for (size_t i = (h >> 6) & mask;; i = (i + 1) & mask) {
      const Entry& e = s.slots[i];
      if (!e.site) return nullptr;
      if (e.site == site && e.module == module && e.offset == offset) return e.leaf;
    }
  }
  static void put(Shard& s, uint64_t h, const Entry& in) {
    const size_t mask = s.slots.size() - 1;
    for (size_t i = (h >> 6) & mask;; i = (i + 1) & mask) {
      Entry& e = s.slots[i];
      if (e.site == in.site && e.module == in.module && e.offset == in.offset) return;
      if (!e.site) {
        e = in;
        ++s.used;
        return;
      }
    }
  }
  // MT: unlocked; only while no insert() runs (pass 2).
  Context* find(const Context* site, const Module* module, uint64_t offset) const {
    uint64_t h = hash(site, module, offset);
    return probe(shards[h % kShards], h, site, module, offset);
  }
  // MT: thread-safe.
  Context* findLocked(const Context* site, const Module* module, uint64_t offset) {
    uint64_t h = hash(site, module, offset);
    Shard& s = shards[h % kShards];
    std::lock_guard lock(s.mu);
    return probe(s, h, site, module, offset);
  }
  void insert(const Context* site, const Module* module, uint64_t offset, Context* leaf) {
    uint64_t h = hash(site, module, offset);
    Shard& s = shards[h % kShards];
    std::lock_guard lock(s.mu);
    if (2 * (s.used + 1) > s.slots.size()) {
      std::vector<Entry> old(s.slots.size() * 2);
      old.swap(s.slots);
      s.used = 0;
      for (const Entry& e : old)
        if (e.site) put(s, hash(e.site, e.module, e.offset), e);
    }
    put(s, h, {site, module, offset, leaf});
  }
};

Expander::Expander(Cct& cct, Names& names, const StructureSource* structure)
    : cct_(cct), names_(names), structure_(structure), cache_(std::make_unique<Cache>()) {}
Expander::~Expander() = default;

namespace {

ContextKey entryKey(EntryKind k) {
  ContextKey key;
  key.kind = NodeKind::Entry;
  key.entry = k;
  return key;
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

Context* Expander::gpuOperation(Context* launch, Placeholder p, bool create) const {
  // Each placeholder kind is a Function of its own, even where two share a name (a kernel
  // and the stream trace path): the reference lists them apart. `site` tells them apart.
  ContextKey k;
  k.type = LexType::Function;
  k.relation = Relation::Call;
  k.function = names_.function(gpuPlaceholderName(p), nullptr, 0, nullptr, 0, uint64_t(p));
  return create ? launch->child(k) : launch->findChild(k);
}

Context* Expander::expandInstruction(Context* callSite, const std::string& modulePath,
                                     const Module* module, uint64_t offset, Gpu gpu, bool create) const {
  // GPU code below an operation placeholder is rare and placed by its own rules: uncached.
  const bool cached = gpu == Gpu::No;
  if (cached)
    if (Context* leaf = create ? cache_->findLocked(callSite, module, offset) : cache_->find(callSite, module, offset))
      return leaf;
  auto step = [create](Context* at, const ContextKey& k) { return create ? at->child(k) : at->findChild(k); };
  Context* leafCtx = nullptr;
  thread_local std::vector<ScopeStep> steps;
  steps.clear();
  // hpcrun already records a return address minus one for callers, so the offset
  // itself lies in the calling instruction.
  if (structure_ && structure_->lookup(modulePath, offset, steps) && !steps.empty()) {
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
        k.function = names_.function(s.name, module, s.kind == ScopeStep::Kind::Procedure ? s.offset : 0,
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
      at = step(at, k);
      if (!at) return nullptr;
      if (first && gpu == Gpu::Entry && s.kind == ScopeStep::Kind::Procedure && s.offset == offset) entry = at;
      first = false;
    }
    ContextKey leaf;
    leaf.type = LexType::Instruction;
    leaf.relation = Relation::Lexical;
    leaf.module = module;
    leaf.offset = offset;
    leaf.hidden = true;
    leafCtx = step(at, leaf);
    if (entry && leafCtx) leafCtx = entry;
  } else {
    // No structure: the instruction stands for its whole (unknown) function.
    if (gpu == Gpu::Sample) {
      ContextKey unknown;
      unknown.type = LexType::Function;
      unknown.relation = Relation::Call;
      callSite = step(callSite, unknown);
      if (!callSite) return nullptr;
    }
    ContextKey k;
    k.type = LexType::Instruction;
    k.relation = Relation::Call;
    k.module = module;
    k.offset = offset;
    leafCtx = step(callSite, k);
  }
  if (cached && create && leafCtx) cache_->insert(callSite, module, offset, leafCtx);
  return leafCtx;
}

Expected<NodeMap> Expander::map(const ProfileTree& tree, bool create,
                                const std::span<const uint32_t>* wanted) const {
  // Load modules are interned on first use, so that unused ones never reach meta.db.
  struct Lm {
    const std::string* path = nullptr;
    const Module* module = nullptr;
  };
  std::vector<std::pair<uint16_t, Lm>> modules;
  for (const auto& [id, path] : tree.loadMap) modules.push_back({id, {&path, nullptr}});
  std::vector<std::pair<uint16_t, std::pair<std::string, const Module*>>> unknownModules;
  auto moduleOf = [&](uint16_t id) -> std::pair<const std::string*, const Module*> {
    for (auto& [mid, lm] : modules)
      if (mid == id) {
        if (!lm.module) lm.module = names_.module(*lm.path);
        return {lm.path, lm.module};
      }
    for (auto& [mid, u] : unknownModules)
      if (mid == id) return {&u.first, u.second};
    std::string unknown = "<unknown load module " + std::to_string(id) + ">";
    const Module* m = names_.module(unknown);
    unknownModules.push_back({id, {std::move(unknown), m}});
    return {&unknownModules.back().second.first, m};
  };

  // Node id -> position in tree.nodes: a table when ids are dense, else a hash map.
  const size_t n = tree.nodes.size();
  uint32_t maxId = 0;
  for (const TreeNode& t : tree.nodes) maxId = std::max(maxId, t.id);
  const bool dense = maxId <= 2 * n + 1024;
  std::vector<int32_t> posTable;
  std::unordered_map<uint32_t, uint32_t> posHash;
  auto duplicate = [](uint32_t id) { return Status::error("duplicate cct node id " + std::to_string(id)); };
  if (dense) {
    posTable.assign(size_t(maxId) + 1, -1);
    for (size_t i = 0; i < n; ++i) {
      int32_t& slot = posTable[tree.nodes[i].id];
      if (slot >= 0) return duplicate(tree.nodes[i].id);
      slot = int32_t(i);
    }
  } else {
    posHash.reserve(n);
    for (size_t i = 0; i < n; ++i)
      if (!posHash.emplace(tree.nodes[i].id, uint32_t(i)).second) return duplicate(tree.nodes[i].id);
  }
  auto posOf = [&](uint32_t id) -> int64_t {
    if (dense) return id < posTable.size() ? posTable[id] : -1;
    auto it = posHash.find(id);
    return it == posHash.end() ? -1 : int64_t(it->second);
  };

  std::vector<Context*> ctx(n, nullptr);
  std::vector<uint8_t> done(n, 0);
  Context* root = cct_.root();
  auto entry = [&](EntryKind k) { return create ? root->child(entryKey(k)) : root->findChild(entryKey(k)); };
  std::vector<uint32_t> chain;
  const size_t starts = wanted ? wanted->size() : n;
  for (size_t k = 0; k < starts; ++k) {
    int64_t w = wanted ? posOf((*wanted)[k]) : int64_t(k);
    if (w < 0 || done[size_t(w)]) continue;
    const size_t s = size_t(w);
    // Resolve the unmapped ancestors first, outermost first; the file need not list
    // parents before children.
    chain.clear();
    for (int64_t at = int64_t(s); at >= 0 && !done[size_t(at)];) {
      chain.push_back(uint32_t(at));
      if (chain.size() > n)
        return Status::error("calling-context tree has a cycle at node " + std::to_string(tree.nodes[size_t(at)].id));
      const TreeNode& t = tree.nodes[size_t(at)];
      at = t.parent ? posOf(t.parent) : -1;
    }
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      const TreeNode& node = tree.nodes[*it];
      Context* parent = nullptr;
      bool orphan = true;
      if (node.parent) {
        int64_t pp = posOf(node.parent);
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
        self = parent ? gpuOperation(parent, node.placeholder, create) : nullptr;
        break;
      case Placeholder::None: {
        // Code reached without a known entry (partial unwind) hangs on "unknown entry".
        Gpu gpu = Gpu::No;
        if (!orphan && isGpuPlaceholder(tree.nodes[size_t(posOf(node.parent))].placeholder))
          gpu = node.unwound ? Gpu::Entry : Gpu::Sample;
        if (orphan || !parent || parent == root) parent = entry(EntryKind::Unknown);
        auto [path, module] = moduleOf(node.module);
        self = parent ? expandInstruction(parent, *path, module, node.offset, gpu, create) : nullptr;
        break;
      }
      }
      ctx[*it] = self;
      done[*it] = 1;
    }
  }

  NodeMap out;
  out.sparse_ = !dense;
  if (dense) {
    out.dense_.assign(size_t(maxId) + 1, nullptr);
    for (size_t i = 0; i < n; ++i) out.dense_[tree.nodes[i].id] = ctx[i];
  } else {
    out.pairs_.reserve(n);
    for (size_t i = 0; i < n; ++i)
      if (ctx[i]) out.pairs_.emplace_back(tree.nodes[i].id, ctx[i]);
    std::sort(out.pairs_.begin(), out.pairs_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  }
  return out;
}

}  // namespace hpc::analysis
