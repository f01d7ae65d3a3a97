// Where a loop goes in the procedure's inline tree, and which source line names it.
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "structure/cfg.hpp"
#include "structure/debug_info.hpp"
#include "structure/loops.hpp"

namespace hpc::structure {

using Chain = std::vector<const InlineCall*>;  // outermost call first

// Calls compare by what they are (call site and callee), not by DWARF entry: copies
// of one inlined call made by the optimiser are one call in the structure.
bool same_call(const InlineCall* a, const InlineCall* b);

// A run of bytes with one source line, one inline chain and one innermost loop.
struct Piece {
  uint64_t begin, end;
  SourceLoc loc;
  Chain chain;
  int loop;  // innermost loop, -1 for none
  const CallSite* call = nullptr;  // GPU code: the piece is this call instruction
};

struct LoopPlace {
  Chain path;      // the inlined calls the loop sits in
  SourceLoc loc;   // its line
  uint64_t header; // entry address of its header block
};

using Locate = std::function<std::pair<SourceLoc, Chain>(uint64_t)>;

// A loop sits as deep in the inline tree as all of its code does (the longest common
// prefix of its pieces' chains). Its line is that of its test: a conditional branch
// leaving the loop, preferring one that closes a back edge, then the header's; seen
// at the loop's depth (a branch in a deeper inlined call counts as its call site).
std::vector<LoopPlace> place_loops(const Cfg& cfg, const LoopForest& forest, const std::vector<Piece>& pieces,
                                   const Locate& locate);

}  // namespace hpc::structure
