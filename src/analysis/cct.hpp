// The global calling context tree: one per analysis, shared by all profile tasks.
// Profiles unify into it concurrently (class 1 work in DESIGN.md); finalize() then gives
// every context an id that depends only on the tree's content, never on thread timing.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "analysis/model.hpp"

namespace hpc::analysis {

enum class Relation : uint8_t { Lexical = 0, Call = 1, InlinedCall = 2 };
enum class LexType : uint8_t { Function = 0, Loop = 1, Line = 2, Instruction = 3 };
enum class EntryKind : uint16_t { Unknown = 0, MainThread = 1, ApplicationThread = 2 };
enum class NodeKind : uint8_t { Root, Entry, Scope };

// What a context is, independent of where it hangs. Siblings never share a key.
struct ContextKey {
  NodeKind kind = NodeKind::Scope;
  EntryKind entry = EntryKind::Unknown;
  Relation relation = Relation::Lexical;
  LexType type = LexType::Function;
  const Function* function = nullptr;
  const File* file = nullptr;
  uint32_t line = 0;
  const Module* module = nullptr;
  uint64_t offset = 0;
  // An instruction expanded below a line from structure: it carries values but is not
  // listed in meta.db (its children hang on its parent there), as the reference does.
  bool hidden = false;

  bool operator==(const ContextKey&) const = default;
  bool hasFunction() const { return function != nullptr; }
  bool hasSrcLoc() const { return file != nullptr; }
  bool hasPoint() const { return module != nullptr; }
};
int compare(const ContextKey& a, const ContextKey& b);

struct ContextKeyHash {
  size_t operator()(const ContextKey& k) const;
};

class Context {
public:
  Context(Context* parent, const ContextKey& key) : parent_(parent), key_(key) {}
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // MT: thread-safe. Finds or creates the child with this key.
  Context* child(const ContextKey& key);
  // MT: thread-safe. The child with this key, nullptr when there is none.
  Context* findChild(const ContextKey& key);

  const ContextKey& key() const { return key_; }
  Context* parent() const { return parent_; }
  // Valid after Cct::finalize(): sorted children, id, nearest listed ancestor-or-self.
  const std::vector<Context*>& children() const { return sorted_; }
  uint32_t id() const { return id_; }
  const Context* listed() const { return listed_; }

private:
  friend class Cct;
  Context* parent_;
  ContextKey key_;
  std::mutex mu_;
  std::unordered_map<ContextKey, std::unique_ptr<Context>, ContextKeyHash> kids_;
  std::vector<Context*> sorted_;
  uint32_t id_ = 0;
  const Context* listed_ = nullptr;
};

class Cct {
public:
  Cct();
  // Frees the tree without recursion: deep recursion in an application makes call chains of
  // hundreds of thousands of contexts, whose nested destruction overflowed the stack.
  ~Cct();
  Cct(const Cct&) = delete;
  Cct& operator=(const Cct&) = delete;

  Context* root() { return root_.get(); }
  const Context* root() const { return root_.get(); }

  // MT: externally synchronized; call once after all unification. Ids are a pre-order
  // walk with siblings in content order, root = 0.
  void finalize();
  uint32_t size() const { return uint32_t(byId_.size()); }
  const Context* byId(uint32_t id) const { return byId_[id]; }

  // Flat per-id facts used by propagation (valid after finalize()).
  const std::vector<uint32_t>& parents() const { return parent_; }

private:
  std::unique_ptr<Context> root_;
  std::vector<const Context*> byId_;
  std::vector<uint32_t> parent_;
};

}  // namespace hpc::analysis
