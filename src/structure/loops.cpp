#include "structure/loops.hpp"

#include <algorithm>
#include <functional>

namespace hpc::structure {
namespace {

constexpr uint32_t kUnvisited = UINT32_MAX;

struct UnionFind {
  std::vector<uint32_t> up;
  explicit UnionFind(size_t n) : up(n) {
    for (size_t i = 0; i < n; ++i) up[i] = static_cast<uint32_t>(i);
  }
  uint32_t find(uint32_t x) {
    while (up[x] != x) x = up[x] = up[up[x]];
    return x;
  }
};

}  // namespace

LoopForest find_loops(const Cfg& cfg) {
  LoopForest out;
  const size_t n = cfg.blocks.size();
  out.innermost.assign(n, -1);
  if (n == 0) return out;

  // Depth-first preorder numbers; last[i] is the highest number in i's subtree.
  std::vector<uint32_t> number(n, kUnvisited), node;  // node[preorder] = block
  std::vector<uint32_t> last;
  {
    std::vector<std::pair<uint32_t, size_t>> stack{{cfg.entry, 0}};
    number[cfg.entry] = 0;
    node.push_back(cfg.entry);
    last.push_back(0);
    while (!stack.empty()) {
      auto& [b, k] = stack.back();
      const auto& succs = cfg.blocks[b].succs;
      if (k < succs.size()) {
        uint32_t s = succs[k++];
        if (number[s] == kUnvisited) {
          number[s] = static_cast<uint32_t>(node.size());
          node.push_back(s);
          last.push_back(0);
          stack.push_back({s, 0});
        }
      } else {
        last[number[b]] = static_cast<uint32_t>(node.size() - 1);
        stack.pop_back();
      }
    }
  }
  const size_t m = node.size();
  auto ancestor = [&](uint32_t w, uint32_t v) { return w <= v && v <= last[w]; };  // preorder numbers

  std::vector<IndexList> backPreds(m), nonBackPreds(m);
  for (uint32_t w = 0; w < m; ++w)
    for (uint32_t p : cfg.blocks[node[w]].preds) {
      if (number[p] == kUnvisited) continue;
      uint32_t v = number[p];
      (ancestor(w, v) ? backPreds[w] : nonBackPreds[w]).push_back(v);
    }

  UnionFind uf(m);
  std::vector<int> loopOf(m, -1);     // loop headed by preorder node
  std::vector<int> header(m, -1);     // innermost enclosing header (preorder) per node
  std::vector<Loop> found;            // in creation order: inner loops first
  for (int64_t wi = static_cast<int64_t>(m) - 1; wi >= 0; --wi) {
    uint32_t w = static_cast<uint32_t>(wi);
    std::vector<uint32_t> pool;
    bool self = false, irreducible = false;
    for (uint32_t v : backPreds[w]) {
      if (v == w) self = true;
      else if (uint32_t r = uf.find(v); std::find(pool.begin(), pool.end(), r) == pool.end()) pool.push_back(r);
    }
    for (size_t k = 0; k < pool.size(); ++k) {
      uint32_t x = pool[k];
      for (uint32_t y : nonBackPreds[x]) {
        uint32_t yd = uf.find(y);
        if (!ancestor(w, yd)) {
          irreducible = true;
          nonBackPreds[w].push_back(yd);
        } else if (yd != w && std::find(pool.begin(), pool.end(), yd) == pool.end()) {
          pool.push_back(yd);
        }
      }
    }
    if (pool.empty() && !self) continue;
    Loop loop;
    loop.header = node[w];
    loop.irreducible = irreducible;
    loop.own.push_back(node[w]);
    int id = static_cast<int>(found.size());
    for (uint32_t x : pool) {
      header[x] = static_cast<int>(w);
      uf.up[x] = w;
      if (loopOf[x] >= 0) found[loopOf[x]].parent = id;
      else loop.own.push_back(node[x]);
    }
    for (uint32_t v : backPreds[w]) loop.latches.push_back(node[v]);
    loopOf[w] = id;
    found.push_back(std::move(loop));
  }

  // Renumber so parents come before children (reverse creation order), blocks sorted.
  const int k = static_cast<int>(found.size());
  out.loops.resize(k);
  for (int i = 0; i < k; ++i) {
    Loop& l = out.loops[k - 1 - i];
    l = std::move(found[i]);
    if (l.parent >= 0) l.parent = k - 1 - l.parent;
    std::sort(l.own.begin(), l.own.end());
    std::sort(l.latches.begin(), l.latches.end());
  }
  for (int i = 0; i < k; ++i) {
    if (out.loops[i].parent >= 0) out.loops[out.loops[i].parent].children.push_back(i);
    for (uint32_t b : out.loops[i].own) out.innermost[b] = i;
  }
  return out;
}

}  // namespace hpc::structure
