#include "analysis/cct.hpp"

#include <algorithm>
#include <atomic>
#include <functional>
#include <new>
#include <type_traits>

namespace hpc::analysis {

int compare(const ContextKey& a, const ContextKey& b) {
  if (int c = cmp3(int(a.kind), int(b.kind))) return c;
  if (int c = cmp3(int(a.entry), int(b.entry))) return c;
  if (int c = cmp3(int(a.relation), int(b.relation))) return c;
  if (int c = cmp3(int(a.type), int(b.type))) return c;
  if (int c = compare(a.module, b.module)) return c;
  if (int c = cmp3(a.offset, b.offset)) return c;
  if (int c = compare(a.file, b.file)) return c;
  if (int c = cmp3(a.line, b.line)) return c;
  if (int c = compare(a.function, b.function)) return c;
  return cmp3(a.hidden, b.hidden);
}

size_t ContextKeyHash::operator()(const ContextKey& k) const {
  size_t h = std::hash<uint64_t>()(k.offset);
  auto mix = [&h](size_t v) { h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2); };
  mix(std::hash<const void*>()(k.function));
  mix(std::hash<const void*>()(k.file));
  mix(std::hash<const void*>()(k.module));
  mix(k.line);
  mix((size_t(k.kind) << 24) | (size_t(k.entry) << 16) | (size_t(k.relation) << 8) |
      size_t(k.type) | (size_t(k.hidden) << 32));
  return h;
}

Context* Context::child(const ContextKey& key) { return owner_->child(this, key); }

Context* Context::findChild(const ContextKey& key) { return owner_->findChild(this, key); }

uint64_t Cct::hashOf(const Context* parent, const ContextKey& key) {
  uint64_t h = ContextKeyHash()(key) ^ (reinterpret_cast<uintptr_t>(parent) * 0x9e3779b97f4a7c15ULL);
  // A final mix (murmur3's): the shard comes from the high bits, the slot from the low ones.
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

namespace {
std::atomic<uint64_t> nextCctSerial{1};
}  // namespace

Cct::Cct() : shards_(new Shard[size_t(1) << kShardBits]), serial_(nextCctSerial.fetch_add(1)) {
  ContextKey k;
  k.kind = NodeKind::Root;
  rootStorage_.reset(new std::byte[sizeof(Context)]);
  root_ = new (rootStorage_.get()) Context(this, nullptr, k);
}

Cct::~Cct() = default;  // contexts are trivially destructible: their blocks go whole

Cct::Arena& Cct::arena() {
  // The last tree this thread made contexts in, and its arena there.
  thread_local uint64_t cachedSerial = 0;
  thread_local Arena* cached = nullptr;
  if (cachedSerial == serial_) return *cached;
  std::lock_guard lock(arenasMu_);
  arenas_.push_back(std::make_unique<Arena>());
  cachedSerial = serial_;
  cached = arenas_.back().get();
  return *cached;
}

Context* Cct::make(Context* parent, const ContextKey& key) {
  static_assert(std::is_trivially_destructible_v<Context>);
  Arena& a = arena();
  if (a.left == 0) {
    a.blocks.push_back({std::unique_ptr<std::byte[]>(new std::byte[a.nextBlock * sizeof(Context)]), a.nextBlock});
    a.next = a.blocks.back().memory.get();
    a.left = a.nextBlock;
    a.nextBlock = std::min<size_t>(a.nextBlock * 2, 4096);
  }
  Context* c = new (a.next) Context(this, parent, key);
  a.next += sizeof(Context);
  --a.left;
  return c;
}

Context* Cct::child(Context* parent, const ContextKey& key) {
  const uint64_t h = hashOf(parent, key);
  Shard& s = shards_[h >> (64 - kShardBits)];
  std::lock_guard lock(s.mu);
  if (2 * (s.used + 1) > s.table.size()) {
    // Grow: twice the slots, every entry placed again by its kept hash.
    std::vector<Slot> old = std::move(s.table);
    s.table.assign(std::max<size_t>(64, 2 * old.size()), Slot{});
    const size_t mask = s.table.size() - 1;
    for (const Slot& e : old) {
      if (!e.ctx) continue;
      size_t i = e.hash & mask;
      while (s.table[i].ctx) i = (i + 1) & mask;
      s.table[i] = e;
    }
    s.slots.store(s.table.data(), std::memory_order_relaxed);
    s.mask.store(mask, std::memory_order_relaxed);
  }
  const size_t mask = s.table.size() - 1;
  size_t i = h & mask;
  for (; s.table[i].ctx; i = (i + 1) & mask) {
    const Slot& e = s.table[i];
    if (e.hash == h && e.ctx->parent_ == parent && e.ctx->key_ == key) return e.ctx;
  }
  Context* c = make(parent, key);
  s.table[i] = {h, c};
  ++s.used;
  return c;
}

void Cct::prefetchChild(const Context* parent, const ContextKey& key) const {
  const uint64_t h = hashOf(parent, key);
  const Shard& s = shards_[h >> (64 - kShardBits)];
  if (const Slot* slots = s.slots.load(std::memory_order_relaxed))
    __builtin_prefetch(slots + (h & s.mask.load(std::memory_order_relaxed)));
}

Context* Cct::findChild(const Context* parent, const ContextKey& key) {
  const uint64_t h = hashOf(parent, key);
  Shard& s = shards_[h >> (64 - kShardBits)];
  std::lock_guard lock(s.mu);
  if (s.table.empty()) return nullptr;
  const size_t mask = s.table.size() - 1;
  for (size_t i = h & mask; s.table[i].ctx; i = (i + 1) & mask) {
    const Slot& e = s.table[i];
    if (e.hash == h && e.ctx->parent_ == parent && e.ctx->key_ == key) return e.ctx;
  }
  return nullptr;
}

void Cct::finalize() {
  // Children counted per parent, given ranges of one list, then filled and sorted. The
  // contexts are taken from the arenas' blocks, in memory order.
  std::vector<Context*> all;
  size_t total = 0;
  for (size_t k = 0; k < (size_t(1) << kShardBits); ++k) total += shards_[k].used;
  all.reserve(total);
  for (const auto& a : arenas_) {
    for (size_t b = 0; b < a->blocks.size(); ++b) {
      const size_t n = b + 1 == a->blocks.size() ? a->blocks[b].size - a->left : a->blocks[b].size;
      auto* first = reinterpret_cast<Context*>(a->blocks[b].memory.get());
      for (size_t i = 0; i < n; ++i) all.push_back(first + i);
    }
  }
  root_->numChildren_ = 0;
  for (Context* c : all) c->numChildren_ = 0;
  for (Context* c : all) ++c->parent_->numChildren_;
  uint32_t next = 0;
  auto place = [&next](Context* c) {
    c->firstChild_ = next;
    next += c->numChildren_;
    c->numChildren_ = 0;  // counted again as the list is filled
  };
  place(root_);
  for (Context* c : all) place(c);
  kids_.assign(all.size(), nullptr);
  for (Context* c : all) {
    Context* p = c->parent_;
    kids_[p->firstChild_ + p->numChildren_++] = c;
  }
  auto byContent = [](const Context* a, const Context* b) { return compare(a->key_, b->key_) < 0; };
  auto sortKids = [&](const Context* c) {
    if (c->numChildren_ > 1)
      std::sort(kids_.begin() + c->firstChild_, kids_.begin() + c->firstChild_ + c->numChildren_, byContent);
  };
  sortKids(root_);
  for (const Context* c : all) sortKids(c);

  byId_.clear();
  parent_.clear();
  byId_.reserve(all.size() + 1);
  parent_.reserve(all.size() + 1);
  // Iterative pre-order walk: call chains can be deep (recursion in the application). What a
  // context takes from its parent rides on the stack (the parent's lines may be long gone from
  // the cache when a later sibling comes), and a context's lines are fetched as it is pushed.
  struct Visit {
    Context* c;
    const Context* parentListed;  // null for the root
    uint32_t parentId, parentListedId;
  };
  std::vector<Visit> stack{{root_, nullptr, 0, 0}};
  while (!stack.empty()) {
    const Visit v = stack.back();
    stack.pop_back();
    Context* c = v.c;
    c->id_ = uint32_t(byId_.size());
    byId_.push_back(c);
    parent_.push_back(c->parent_ ? v.parentId : c->id_);
    if (c->key_.hidden && c->parent_) {
      c->listed_ = v.parentListed;
      c->listedId_ = v.parentListedId;
    } else {
      c->listed_ = c;
      c->listedId_ = c->id_;
    }
    for (uint32_t k = c->numChildren_; k-- > 0;) {
      Context* kid = kids_[c->firstChild_ + k];
      __builtin_prefetch(kid);
      __builtin_prefetch(reinterpret_cast<const char*>(kid) + sizeof(Context) - 1);
      stack.push_back({kid, c->listed_, c->id_, c->listedId_});
    }
  }
}

}  // namespace hpc::analysis
