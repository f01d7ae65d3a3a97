// Address -> innermost scope: the v ranges of a load module's subtree flattened into
// disjoint segments by a sweep, each owned by the deepest range covering it.
#include <algorithm>
#include <climits>
#include <queue>

#include "formats/structfile/structfile.hpp"

namespace hpc::structfile {

AddressIndex::AddressIndex(const Scope& lm) {
  struct Interval {
    uint64_t begin, end;
    uint32_t node, depth;
  };
  std::vector<Interval> iv;
  std::vector<uint32_t> depth;
  // Explicit stack: preorder, so a larger node index is later in document order.
  std::vector<std::pair<const Scope*, uint32_t>> todo;  // scope, parent index
  for (auto it = lm.children.rbegin(); it != lm.children.rend(); ++it)
    todo.emplace_back(&*it, UINT32_MAX);
  while (!todo.empty()) {
    auto [s, parent] = todo.back();
    todo.pop_back();
    uint32_t idx = uint32_t(nodes_.size());
    uint32_t d = parent == UINT32_MAX ? 0 : depth[parent] + 1;
    nodes_.push_back(s);
    parent_.push_back(parent);
    depth.push_back(d);
    if (s->vranges)
      for (const VRange& r : *s->vranges)
        if (r.begin < r.end) iv.push_back({r.begin, r.end, idx, d});
    for (auto it = s->children.rbegin(); it != s->children.rend(); ++it)
      todo.emplace_back(&*it, idx);
  }

  std::sort(iv.begin(), iv.end(), [](const Interval& a, const Interval& b) { return a.begin < b.begin; });
  std::vector<uint64_t> points;
  points.reserve(iv.size() * 2);
  for (const auto& i : iv) {
    points.push_back(i.begin);
    points.push_back(i.end);
  }
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());

  auto lower = [](const Interval* a, const Interval* b) {
    return a->depth != b->depth ? a->depth < b->depth : a->node < b->node;
  };
  std::priority_queue<const Interval*, std::vector<const Interval*>, decltype(lower)> live(lower);
  size_t next = 0;
  for (size_t p = 0; p + 1 < points.size(); ++p) {
    uint64_t x = points[p];
    while (next < iv.size() && iv[next].begin <= x) live.push(&iv[next++]);
    while (!live.empty() && live.top()->end <= x) live.pop();
    if (live.empty()) continue;
    uint32_t node = live.top()->node;
    if (!segments_.empty() && segments_.back().end == x && segments_.back().node == node)
      segments_.back().end = points[p + 1];
    else
      segments_.push_back({x, points[p + 1], node});
  }
}

std::optional<uint32_t> AddressIndex::find_node(uint64_t addr) const {
  auto it = std::upper_bound(segments_.begin(), segments_.end(), addr,
                             [](uint64_t a, const Segment& s) { return a < s.begin; });
  if (it == segments_.begin()) return std::nullopt;
  --it;
  if (addr >= it->end) return std::nullopt;
  return it->node;
}

const Scope* AddressIndex::find(uint64_t addr) const {
  auto n = find_node(addr);
  return n ? nodes_[*n] : nullptr;
}

std::vector<const Scope*> AddressIndex::path(uint64_t addr) const {
  std::vector<const Scope*> out;
  path(addr, out);
  return out;
}

void AddressIndex::path(uint64_t addr, std::vector<const Scope*>& out) const {
  out.clear();
  for (auto n = find_node(addr); n && *n != UINT32_MAX; n = parent_[*n]) out.push_back(nodes_[*n]);
  std::reverse(out.begin(), out.end());
}

}  // namespace hpc::structfile
