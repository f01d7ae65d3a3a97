#include "analysis/cct.hpp"

#include <algorithm>
#include <functional>

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

Context* Context::child(const ContextKey& key) {
  std::lock_guard lock(mu_);
  auto& slot = kids_[key];
  if (!slot) slot = std::make_unique<Context>(this, key);
  return slot.get();
}

Context* Context::findChild(const ContextKey& key) {
  std::lock_guard lock(mu_);
  auto it = kids_.find(key);
  return it == kids_.end() ? nullptr : it->second.get();
}

Cct::Cct() {
  ContextKey k;
  k.kind = NodeKind::Root;
  root_ = std::make_unique<Context>(nullptr, k);
}

Cct::~Cct() {
  std::vector<std::unique_ptr<Context>> pending;
  pending.push_back(std::move(root_));
  while (!pending.empty()) {
    std::unique_ptr<Context> c = std::move(pending.back());
    pending.pop_back();
    for (auto& kid : c->kids_) pending.push_back(std::move(kid.second));
    c->kids_.clear();  // moved from: c goes with nothing below it
  }
}

void Cct::finalize() {
  byId_.clear();
  parent_.clear();
  // Iterative pre-order walk: call chains can be deep (recursion in the application).
  std::vector<Context*> stack{root_.get()};
  while (!stack.empty()) {
    Context* c = stack.back();
    stack.pop_back();
    c->id_ = uint32_t(byId_.size());
    byId_.push_back(c);
    parent_.push_back(c->parent_ ? c->parent_->id_ : c->id_);
    c->listed_ = (c->key_.hidden && c->parent_) ? c->parent_->listed_ : c;
    c->sorted_.clear();
    for (auto& [k, v] : c->kids_) c->sorted_.push_back(v.get());
    std::sort(c->sorted_.begin(), c->sorted_.end(),
              [](const Context* a, const Context* b) { return compare(a->key_, b->key_) < 0; });
    for (auto it = c->sorted_.rbegin(); it != c->sorted_.rend(); ++it) stack.push_back(*it);
  }
}

}  // namespace hpc::analysis
