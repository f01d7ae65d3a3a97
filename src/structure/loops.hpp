// Loop nesting forest of a CFG by Havlak's algorithm (TOPLAS 1997), which also
// recognises irreducible loops (several entries): their header is the entry met
// first in depth-first order.
#pragma once

#include <cstdint>
#include <vector>

#include "structure/cfg.hpp"

namespace hpc::structure {

struct Loop {
  uint32_t header = 0;              // block index
  int parent = -1;                  // enclosing loop, -1 for none
  std::vector<int> children;        // nested loops
  std::vector<uint32_t> own;        // blocks whose innermost loop this is (header included)
  std::vector<uint32_t> latches;    // blocks with an edge back to the header
  bool irreducible = false;
};

struct LoopForest {
  std::vector<Loop> loops;          // parents before children
  std::vector<int> innermost;       // per block: innermost loop, or -1
};

LoopForest find_loops(const Cfg& cfg);

}  // namespace hpc::structure
