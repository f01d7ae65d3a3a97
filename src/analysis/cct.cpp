#include "analysis/cct.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <functional>
#include <new>
#include <type_traits>

#include <sys/mman.h>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

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

Cct::Cct(size_t regionBytes)
    : shards_(new Shard[size_t(1) << kShardBits]), serial_(nextCctSerial.fetch_add(1)),
      regionBytes_(regionBytes / sizeof(Context) * sizeof(Context)) {
  ContextKey k;
  k.kind = NodeKind::Root;
  rootStorage_.reset(new std::byte[sizeof(Context)]);
  root_ = new (rootStorage_.get()) Context(this, nullptr, k);
  // Address space only: pages are backed as blocks touch them (MAP_NORESERVE: not charged
  // to the commit limit where the system honours that; where it refuses the reservation,
  // the blocks come from the heap).
  void* r = regionBytes_ ? ::mmap(nullptr, regionBytes_, PROT_READ | PROT_WRITE,
                                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
                        : MAP_FAILED;
  if (r != MAP_FAILED) region_ = static_cast<std::byte*>(r);
  // A large tree's contexts on huge pages (where the kernel gives them on request), as they
  // were in the heap: lookups and walks reach them all over (100 profiles of 400,000 nodes:
  // 35 MB of contexts). The first 8 MiB on small pages: a tree of tens of thousands of
  // contexts, made by several threads at once (their blocks interleaved), touches only the
  // pages it fills, not whole huge pages (500 profiles in their own orders at -j2, the first
  // 2 MiB small: peak 3 MiB more, median 5 % slower).
  if (region_ && regionBytes_ > kSmallPagesBytes && !std::getenv("HPCPROF_NO_HUGEPAGES"))
    ::madvise(region_ + kSmallPagesBytes, std::min(regionBytes_, kHugePagesBytes) - kSmallPagesBytes, MADV_HUGEPAGE);
}

Cct::~Cct() {
  // Contexts are trivially destructible: their blocks go whole.
  if (region_) ::munmap(region_, regionBytes_);
}

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

void Cct::addBlock(Arena& a) {
  const size_t bytes = a.nextBlock * sizeof(Context);
  Block b;
  b.size = a.nextBlock;
  const size_t at = region_ ? regionUsed_.fetch_add(bytes, std::memory_order_relaxed) : regionBytes_;
  if (bytes <= regionBytes_ && at <= regionBytes_ - bytes) {
    b.memory = region_ + at;
  } else {
    b.owned.reset(new std::byte[bytes]);
    b.memory = b.owned.get();
  }
  a.blocks.push_back(std::move(b));
  a.next = a.blocks.back().memory;
  a.left = a.nextBlock;
  a.nextBlock = std::min<size_t>(a.nextBlock * 2, 4096);
  // Its pages touched here, outside any shard's lock: the faults of fresh memory (up to a
  // few ms a MiB on a virtual machine) held the lock, and every other thread soon needed
  // that shard (64 of them, and thousands of lookups a millisecond).
  for (size_t at = 0; at < bytes; at += 4096) reinterpret_cast<volatile std::byte*>(a.next)[at] = std::byte{0};
}

Context* Cct::make(Arena& a, Context* parent, const ContextKey& key) {
  static_assert(std::is_trivially_destructible_v<Context>);
  Context* c = new (a.next) Context(this, parent, key);
  a.next += sizeof(Context);
  --a.left;
  return c;
}

template <typename F>
void Cct::eachContext(F&& f) const {
  for (const auto& a : arenas_)
    for (size_t b = 0; b < a->blocks.size(); ++b) {
      const size_t n = b + 1 == a->blocks.size() ? a->blocks[b].size - a->left : a->blocks[b].size;
      auto* first = reinterpret_cast<Context*>(a->blocks[b].memory);
      for (size_t i = 0; i < n; ++i) f(first + i);
    }
}

void Cct::releaseLookup() {
  for (size_t k = 0; k < (size_t(1) << kShardBits); ++k) {
    Shard& s = shards_[k];
    std::vector<Slot>().swap(s.table);
    s.slots.store(nullptr, std::memory_order_relaxed);
    s.mask.store(0, std::memory_order_relaxed);
  }
  released_.store(true, std::memory_order_release);
}

void Cct::restoreLookup() {
  std::lock_guard arenas(arenasMu_);
  if (!released_.load(std::memory_order_acquire)) return;  // another thread did it
  for (size_t k = 0; k < (size_t(1) << kShardBits); ++k) {
    Shard& s = shards_[k];
    std::lock_guard lock(s.mu);
    s.table.assign(std::bit_ceil(std::max<size_t>(64, 2 * s.used + 2)), Slot{});
    s.slots.store(s.table.data(), std::memory_order_relaxed);
    s.mask.store(s.table.size() - 1, std::memory_order_relaxed);
  }
  eachContext([&](Context* c) {
    const uint64_t h = hashOf(c->parent_, c->key_);
    Shard& s = shards_[h >> (64 - kShardBits)];
    std::lock_guard lock(s.mu);
    const size_t mask = s.table.size() - 1;
    size_t at = h & mask;
    while (s.table[at].ctx) at = (at + 1) & mask;
    s.table[at] = {h, c};
  });
  released_.store(false, std::memory_order_release);
}

Context* Cct::child(Context* parent, const ContextKey& key) {
  if (released_.load(std::memory_order_acquire)) [[unlikely]] restoreLookup();
  const uint64_t h = hashOf(parent, key);
  Shard& s = shards_[h >> (64 - kShardBits)];
  std::unique_lock lock(s.mu);
  size_t i = 0;  // the free slot the search ended on
  Arena* room = nullptr;  // this thread's arena, with room for a context
  for (;;) {
    if (!s.table.empty()) {
      const size_t mask = s.table.size() - 1;
      for (i = h & mask; s.table[i].ctx; i = (i + 1) & mask) {
        const Slot& e = s.table[i];
        if (e.hash == h && e.ctx->parent_ == parent && e.ctx->key_ == key) return e.ctx;
      }
    }
    // A new context: where this thread's arena is full, its next block is made with the lock
    // released (the faults of its fresh pages held the lock, and soon every other thread
    // needed this shard), then the shard is searched again.
    Arena& a = arena();
    if (a.left != 0) {
      room = &a;
      break;
    }
    lock.unlock();
    addBlock(a);
    lock.lock();
  }
  if (2 * (s.used + 1) > s.table.size()) {
    // Grow: twice the slots, every entry placed again by its kept hash.
    std::vector<Slot> old = std::move(s.table);
    s.table.assign(std::max<size_t>(64, 2 * old.size()), Slot{});
    const size_t mask = s.table.size() - 1;
    for (const Slot& e : old) {
      if (!e.ctx) continue;
      size_t j = e.hash & mask;
      while (s.table[j].ctx) j = (j + 1) & mask;
      s.table[j] = e;
    }
    s.slots.store(s.table.data(), std::memory_order_relaxed);
    s.mask.store(mask, std::memory_order_relaxed);
    i = h & mask;
    while (s.table[i].ctx) i = (i + 1) & mask;
  }
  Context* c = make(*room, parent, key);
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
  if (released_.load(std::memory_order_acquire)) [[unlikely]] restoreLookup();
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
  // The contexts, the root first and then the arenas' blocks in memory order; a context's
  // index is its place here, and rides in its id_ until the ids are set.
  std::vector<Context*> all;
  size_t total = 0;
  for (size_t k = 0; k < (size_t(1) << kShardBits); ++k) total += shards_[k].used;
  all.reserve(total + 1);
  all.push_back(root_);
  eachContext([&](Context* c) { all.push_back(c); });
  const uint32_t count = uint32_t(all.size());
  // Each pass but the walk over the contexts in ranges, on the calling arena's threads where
  // the tree is large (a pass is a few milliseconds a 100,000 contexts).
  constexpr uint32_t kGrain = 16384;
  const bool parallel = count >= 4 * kGrain && tbb::this_task_arena::max_concurrency() > 1;
  auto each = [&](auto&& f) {
    if (!parallel) {
      for (uint32_t i = 0; i < count; ++i) f(i);
      return;
    }
    tbb::parallel_for(tbb::blocked_range<uint32_t>(0, count, kGrain), [&](const tbb::blocked_range<uint32_t>& r) {
      for (uint32_t i = r.begin(); i < r.end(); ++i) f(i);
    });
  };
  each([&](uint32_t i) {
    all[i]->id_ = i;
    all[i]->numChildren_ = 0;
  });
  // Children counted per parent, given ranges of one list, then filled (in any order) and
  // sorted by content: siblings never share a key, so the lists do not depend on the threads.
  // The next place in a context's list of children (atomic only where threads share them).
  auto nextChild = [parallel](Context* c) {
    return parallel ? std::atomic_ref<uint32_t>(c->numChildren_).fetch_add(1, std::memory_order_relaxed)
                    : c->numChildren_++;
  };
  each([&](uint32_t i) {
    if (i) nextChild(all[i]->parent_);
  });
  // What the walk below needs of a context, by index: its range of children and whether it
  // is hidden (the top bit).
  struct Shape {
    uint32_t firstChild, numChildren;
  };
  constexpr uint32_t kHidden = uint32_t(1) << 31;
  std::vector<Shape> shapes(count);
  uint32_t next = 0;
  for (uint32_t i = 0; i < count; ++i) {
    Context* c = all[i];
    shapes[i] = {next, c->numChildren_ | (i && c->key_.hidden ? kHidden : 0)};
    c->firstChild_ = next;
    next += c->numChildren_;
    c->numChildren_ = 0;  // counted again as the list is filled
  }
  // Filled with each child's index beside it, so that the walk finds a child's shape with no
  // look at the child itself.
  struct Kid {
    Context* c;
    uint32_t index;
  };
  std::vector<Kid> kids(next);
  each([&](uint32_t i) {
    if (!i) return;
    Context* p = all[i]->parent_;
    kids[p->firstChild_ + nextChild(p)] = {all[i], i};
  });
  kids_.resize(next);
  std::vector<uint32_t> kidIndex(next);
  each([&](uint32_t i) {
    const Shape sh = shapes[i];
    const uint32_t end = sh.firstChild + (sh.numChildren & ~kHidden);
    if (end - sh.firstChild > 1)
      std::sort(kids.begin() + sh.firstChild, kids.begin() + end,
                [](const Kid& a, const Kid& b) { return compare(a.c->key_, b.c->key_) < 0; });
    for (uint32_t k = sh.firstChild; k < end; ++k) {
      kids_[k] = kids[k].c;
      kidIndex[k] = kids[k].index;
    }
  });
  kids = {};
  // Ids: a pre-order walk with siblings in content order over these compact arrays, not the
  // contexts (a deep tree's walk was a dependent miss a step on them; the arrays are a
  // seventh of their size). Iterative: call chains can be deep (recursion in the application).
  byId_.resize(count);
  parent_.resize(count);
  std::vector<uint32_t> idOf(count), listedOf(count);
  struct Visit {
    uint32_t index, parentId, parentListedId;
  };
  std::vector<Visit> stack{{0, 0, 0}};
  uint32_t nextId = 0;
  while (!stack.empty()) {
    const Visit v = stack.back();
    stack.pop_back();
    const uint32_t id = nextId++;
    const Shape sh = shapes[v.index];
    const uint32_t listed = sh.numChildren & kHidden ? v.parentListedId : id;
    idOf[v.index] = id;
    listedOf[v.index] = listed;
    byId_[id] = all[v.index];
    parent_[id] = v.parentId;
    for (uint32_t k = (sh.numChildren & ~kHidden); k-- > 0;) {
      const uint32_t kid = kidIndex[sh.firstChild + k];
      __builtin_prefetch(&shapes[kid]);
      stack.push_back({kid, id, listed});
    }
  }
  // The same by place in the region (the slots of a block's unused end stay 0).
  const size_t slots = region_ ? std::min(regionUsed_.load(std::memory_order_relaxed), regionBytes_) / sizeof(Context) : 0;
  idBySlot_.assign(slots, 0);
  listedBySlot_.assign(slots, 0);
  const ContextIds view = ids();
  each([&](uint32_t i) {
    Context* c = all[i];
    c->id_ = idOf[i];
    c->listedId_ = listedOf[i];
    c->listed_ = byId_[listedOf[i]];
    c->numChildren_ = shapes[i].numChildren & ~kHidden;
    if (const size_t k = view.slotOf(c); k < slots) {
      idBySlot_[k] = idOf[i];
      listedBySlot_[k] = listedOf[i];
    }
  });
}

ContextIds Cct::ids() const {
  ContextIds v;
  v.base_ = region_;
  v.slots_ = idBySlot_.size();
  v.id_ = idBySlot_.data();
  v.listed_ = listedBySlot_.data();
  return v;
}

}  // namespace hpc::analysis
