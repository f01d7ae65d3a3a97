// Control flow graph of one procedure, decoded from x86-64 machine code (Zydis).
// Only code reachable from the entry inside [begin, end) is decoded; jumps that leave
// the range are tail calls and end the path. Indirect jumps through recognised jump
// tables get their table's targets; other indirect jumps get no successors.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace hpc::structure {

struct Block {
  uint64_t begin = 0, end = 0;  // [begin, end), whole instructions
  uint64_t last = 0;            // address of the last instruction
  std::vector<uint32_t> succs;  // indices into Cfg::blocks
  std::vector<uint32_t> preds;
};

struct Cfg {
  std::vector<Block> blocks;  // sorted by begin
  uint32_t entry = 0;
  std::vector<uint64_t> calls;  // targets of direct calls in the decoded code, sorted
  bool empty() const { return blocks.empty(); }
  // Index of the block holding `addr`, or -1.
  int block_at(uint64_t addr) const;
};

struct CodeRange {
  uint64_t begin, end;
  std::span<const uint8_t> bytes;  // the bytes of [begin, end)
};

// `noreturn(target)` says whether a call to `target` never returns; `data(addr, n)`
// gives bytes of the image anywhere (for jump tables). Either may be empty.
Cfg build_cfg(const CodeRange& code, uint64_t entry, const std::function<bool(uint64_t)>& noreturn,
              const std::function<std::span<const uint8_t>(uint64_t, uint64_t)>& data);

}  // namespace hpc::structure
