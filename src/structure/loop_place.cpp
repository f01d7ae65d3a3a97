#include "structure/loop_place.hpp"

namespace hpc::structure {

std::vector<LoopPlace> place_loops(const Cfg& cfg, const LoopForest& forest, const std::vector<Piece>& pieces,
                                   const Locate& locate) {
  const size_t n = forest.loops.size();
  std::vector<LoopPlace> places(n);
  std::vector<bool> seen(n, false);
  for (const auto& p : pieces)
    for (int l = p.loop; l >= 0; l = forest.loops[l].parent) {
      auto& path = places[l].path;
      if (!seen[l]) {
        path = p.chain;
        seen[l] = true;
        continue;
      }
      size_t k = 0;
      while (k < path.size() && k < p.chain.size() && same_call(path[k], p.chain[k])) ++k;
      path.resize(k);
    }
  auto inLoop = [&](uint32_t block, size_t l) {
    for (int x = forest.innermost[block]; x >= 0; x = forest.loops[x].parent)
      if (static_cast<size_t>(x) == l) return true;
    return false;
  };
  auto exits = [&](uint32_t block, size_t l) {
    const auto& succs = cfg.blocks[block].succs;
    if (succs.size() < 2) return false;
    for (uint32_t s : succs)
      if (!inLoop(s, l)) return true;
    return false;
  };
  for (size_t l = 0; l < n; ++l) {
    const Loop& loop = forest.loops[l];
    LoopPlace& lp = places[l];
    lp.header = cfg.blocks[loop.header].begin;
    // The loop's test: a conditional branch that leaves the loop, preferably one that
    // also closes it (a bottom-tested loop), else the header's, else the first one.
    std::vector<uint32_t> order;
    for (uint32_t latch : loop.latches)
      if (exits(latch, l)) order.push_back(latch);
    if (exits(loop.header, l)) order.push_back(loop.header);
    for (uint32_t b = 0; b < cfg.blocks.size(); ++b)
      if (inLoop(b, l) && exits(b, l)) order.push_back(b);
    for (uint32_t latch : loop.latches) order.push_back(latch);
    bool found = false;
    for (uint32_t b : order) {
      auto [loc, chain] = locate(cfg.blocks[b].last);
      if (chain.size() < lp.path.size()) continue;
      if (chain.size() == lp.path.size()) lp.loc = loc;
      else lp.loc = {chain[lp.path.size()]->call_file, chain[lp.path.size()]->call_line};
      found = true;
      break;
    }
    if (!found) lp.loc = locate(lp.header).first;
  }
  return places;
}

}  // namespace hpc::structure
