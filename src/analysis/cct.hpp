// The global calling context tree: one per analysis, shared by all profile tasks.
// Profiles unify into it concurrently (class 1 work in DESIGN.md); finalize() then gives
// every context an id that depends only on the tree's content, never on thread timing.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include <oneapi/tbb/spin_mutex.h>

#include "analysis/model.hpp"

namespace hpc::analysis {

enum class Relation : uint8_t { Lexical = 0, Call = 1, InlinedCall = 2 };
enum class LexType : uint8_t { Function = 0, Loop = 1, Line = 2, Instruction = 3 };
enum class EntryKind : uint16_t { Unknown = 0, MainThread = 1, ApplicationThread = 2 };
enum class NodeKind : uint8_t { Root, Entry, Scope };

// What a context is, independent of where it hangs. Siblings never share a key. (Fields
// ordered to pack: 48 bytes; compare() fixes the content order.)
struct ContextKey {
  uint32_t line = 0;
  EntryKind entry = EntryKind::Unknown;
  NodeKind kind = NodeKind::Scope;
  Relation relation = Relation::Lexical;
  LexType type = LexType::Function;
  // An instruction expanded below a line from structure: it carries values but is not
  // listed in meta.db (its children hang on its parent there), as the reference does.
  bool hidden = false;
  const Function* function = nullptr;
  const File* file = nullptr;
  const Module* module = nullptr;
  uint64_t offset = 0;

  bool operator==(const ContextKey&) const = default;
  bool hasFunction() const { return function != nullptr; }
  bool hasSrcLoc() const { return file != nullptr; }
  bool hasPoint() const { return module != nullptr; }
};
int compare(const ContextKey& a, const ContextKey& b);

struct ContextKeyHash {
  size_t operator()(const ContextKey& k) const;
};

class Cct;
class Context;

// Contexts' ids and listed ids found by where the contexts lie, not in them (Cct::ids()): a
// table of 4 bytes a context against a context's 88, so that the passes after finalization
// that meet contexts scattered in memory (a profile's spilled values and the nodes its trace
// names) read the table, mostly in the caches, rather than the contexts, mostly not.
// Valid while its tree lives and is not finalized again. MT: read only.
class ContextIds {
public:
  inline uint32_t id(const Context* c) const;
  inline uint32_t listedId(const Context* c) const;

private:
  friend class Cct;
  // The slot of c in the tree's region, or `slots` where c lies elsewhere (the root; a
  // tree that outgrew its region).
  inline size_t slotOf(const Context* c) const;
  const std::byte* base_ = nullptr;
  size_t slots_ = 0;
  const uint32_t* id_ = nullptr;
  const uint32_t* listed_ = nullptr;
};

// A context is small (88 bytes) and holds no lock or table of its own: a tree of a million
// contexts is mostly these, and every fresh page of it is dear. Children are found through
// the tree's sharded table; the sorted lists exist after Cct::finalize().
class Context {
public:
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // MT: thread-safe. Finds or creates the child with this key.
  Context* child(const ContextKey& key);
  // MT: thread-safe. The child with this key, nullptr when there is none.
  Context* findChild(const ContextKey& key);

  const ContextKey& key() const { return key_; }
  Context* parent() const { return parent_; }
  // Valid after Cct::finalize(): sorted children, id, nearest listed ancestor-or-self.
  std::span<Context* const> children() const;
  uint32_t id() const { return id_; }
  const Context* listed() const { return listed_; }
  uint32_t listedId() const { return listedId_; }  // listed()->id(), without the second load

private:
  friend class Cct;
  Context(Cct* owner, Context* parent, const ContextKey& key) : owner_(owner), parent_(parent), key_(key) {}
  Cct* owner_;
  Context* parent_;
  ContextKey key_;
  const Context* listed_ = nullptr;
  uint32_t id_ = 0;
  uint32_t listedId_ = 0;  // beside id_: one aligned word, in one cache line
  uint32_t firstChild_ = 0, numChildren_ = 0;  // in the tree's list of children
};

class Cct {
public:
  // `regionBytes`: the address space reserved for the contexts (ContextIds); past it, and
  // where the system refuses it, contexts are allocated from the heap.
  explicit Cct(size_t regionBytes = size_t(16) << 30);
  ~Cct();
  Cct(const Cct&) = delete;
  Cct& operator=(const Cct&) = delete;

  Context* root() { return root_; }
  const Context* root() const { return root_; }

  // MT: thread-safe. Finds or creates parent's child with this key (Context::child).
  Context* child(Context* parent, const ContextKey& key);
  Context* findChild(const Context* parent, const ContextKey& key);
  // A hint: child(parent, key) comes soon; its slot of the table is fetched now (a tree made
  // by one profile looks up every context in a table far larger than the caches).
  // MT: thread-safe.
  void prefetchChild(const Context* parent, const ContextKey& key) const;

  // MT: externally synchronized. Frees the table that finds a context's child by key (a
  // large tree's is tens of MB), for a tree that is done growing: its memory then serves the
  // later passes. child() and findChild() make it again if called after.
  void releaseLookup();

  // MT: externally synchronized; call after all unification (again after more). Ids are a
  // pre-order walk with siblings in content order, root = 0. A large tree's passes but the
  // walk run on the calling task arena's threads.
  void finalize();
  uint32_t size() const { return uint32_t(byId_.size()); }
  const Context* byId(uint32_t id) const { return byId_[id]; }

  // Flat per-id facts used by propagation (valid after finalize()).
  const std::vector<uint32_t>& parents() const { return parent_; }
  // Every context's id and listed id by where it lies (valid after finalize()).
  ContextIds ids() const;

private:
  friend class Context;
  // Contexts by (parent, key), in shards with a lock each; a shard's contexts live in blocks
  // it allocates (freed whole: a context needs no destructor, so a deep tree frees in no
  // recursion).
  struct Slot {
    uint64_t hash = 0;
    Context* ctx = nullptr;
  };
  struct Shard {
    // Held for a probe and the making of a context, a few hundred ns: a waiter spins, then
    // yields (a mutex put it to sleep in the kernel and woke it: the g++ measurement with
    // structure at -j2, 297 -> 113 context switches, median 0.412 -> 0.397 s).
    tbb::spin_mutex mu;
    std::vector<Slot> table;  // open addressing, a power of two, at most half full
    size_t used = 0;
    // The table's slots and mask as prefetchChild() reads them without the lock (a stale
    // value only fetches the wrong line).
    std::atomic<const Slot*> slots{nullptr};
    std::atomic<size_t> mask{0};
  };
  // Contexts are allocated in blocks of the creating thread's arena, so that they lie in the
  // order a thread made them (a profile's nodes' order: parents before children), which the
  // later walks over the tree follow more or less (finalize, meta.db, pass 2's lookups).
  // Blocks are cut from one region of address space the tree reserves (backed as it is
  // touched), so that a context's place there numbers it (ContextIds); a tree that outgrows
  // it, or a system that refuses the reservation, has its next blocks from the heap.
  struct Block {
    std::byte* memory = nullptr;
    std::unique_ptr<std::byte[]> owned;  // a block from the heap
    size_t size = 0;  // contexts it holds room for
  };
  struct Arena {
    std::vector<Block> blocks;
    std::byte* next = nullptr;
    size_t left = 0;         // contexts that still fit in the last block, from next
    size_t nextBlock = 64;   // contexts in the next block (doubling, up to a bound)
  };
  // MT: thread-safe; the calling thread's arena.
  Arena& arena();
  static constexpr unsigned kShardBits = 6;
  static uint64_t hashOf(const Context* parent, const ContextKey& key);
  // The table again after releaseLookup(), from the contexts (once, whichever thread asks).
  void restoreLookup();
  // f(Context*) for every context but the root, arena by arena, in memory order.
  template <typename F> void eachContext(F&& f) const;
  // A new context in `a`, which has room for it (child() made sure, outside the lock).
  Context* make(Arena& a, Context* parent, const ContextKey& key);
  // A's next block, its pages touched.
  void addBlock(Arena& a);
  static constexpr size_t kSmallPagesBytes = size_t(8) << 20, kHugePagesBytes = size_t(64) << 20;

  std::unique_ptr<Shard[]> shards_;
  std::atomic<bool> released_{false};
  const uint64_t serial_;  // tells this tree's arenas from another's in a thread's cache
  std::mutex arenasMu_;
  std::vector<std::unique_ptr<Arena>> arenas_;
  std::unique_ptr<std::byte[]> rootStorage_;
  Context* root_;
  std::vector<Context*> kids_;  // every context's sorted children, each a range (finalize())
  std::vector<const Context*> byId_;
  std::vector<uint32_t> parent_;
  const size_t regionBytes_;
  std::byte* region_ = nullptr;  // regionBytes_ reserved, or none
  std::atomic<size_t> regionUsed_{0};  // bytes cut into blocks (may pass the end: then none is)
  std::vector<uint32_t> idBySlot_, listedBySlot_;  // finalize(): by a context's slot in the region
};

inline size_t ContextIds::slotOf(const Context* c) const {
  const size_t at = size_t(reinterpret_cast<const std::byte*>(c) - base_);
  return base_ && at < slots_ * sizeof(Context) ? at / sizeof(Context) : slots_;
}
inline uint32_t ContextIds::id(const Context* c) const {
  const size_t k = slotOf(c);
  return k < slots_ ? id_[k] : c->id();
}
inline uint32_t ContextIds::listedId(const Context* c) const {
  const size_t k = slotOf(c);
  return k < slots_ ? listed_[k] : c->listedId();
}

inline std::span<Context* const> Context::children() const {
  return {owner_->kids_.data() + firstChild_, numChildren_};
}

}  // namespace hpc::analysis
