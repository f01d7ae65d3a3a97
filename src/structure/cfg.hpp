// Control flow graph of one procedure, decoded from x86-64 machine code (Zydis).
// Only code reachable from the entry inside [begin, end) is decoded; jumps that leave
// the range are tail calls and end the path. Indirect jumps through recognised jump
// tables get their table's targets; other indirect jumps get no successors.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <span>
#include <vector>

namespace hpc::structure {

// Block indices, the first few kept inline: most blocks have one or two successors and
// predecessors, and a vector each was most of a binary's allocations (cc1plus: 5.5 of 9
// million calls to malloc).
class IndexList {
public:
  IndexList() = default;
  IndexList(std::initializer_list<uint32_t> values) {
    for (uint32_t v : values) push_back(v);
  }
  IndexList(const IndexList& o) {
    for (uint32_t v : o) push_back(v);
  }
  IndexList(IndexList&& o) noexcept { take(o); }
  IndexList& operator=(const IndexList& o) {
    if (this != &o) {
      size_ = 0;
      for (uint32_t v : o) push_back(v);
    }
    return *this;
  }
  IndexList& operator=(IndexList&& o) noexcept {
    if (this != &o) {
      release();
      take(o);
    }
    return *this;
  }
  ~IndexList() { release(); }

  void push_back(uint32_t v) {
    if (size_ == cap_) grow();
    data()[size_++] = v;
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const uint32_t* begin() const { return data(); }
  const uint32_t* end() const { return data() + size_; }
  uint32_t operator[](size_t i) const { return data()[i]; }
  bool operator==(const IndexList& o) const { return std::equal(begin(), end(), o.begin(), o.end()); }
  std::vector<uint32_t> vector() const { return {begin(), end()}; }

private:
  static constexpr uint32_t kInline = 4;
  uint32_t* data() { return cap_ > kInline ? heap_ : inline_; }
  const uint32_t* data() const { return cap_ > kInline ? heap_ : inline_; }
  void grow() {
    const uint32_t cap = 2 * cap_;
    uint32_t* heap = new uint32_t[cap];
    std::copy(begin(), end(), heap);
    release();
    heap_ = heap;
    cap_ = cap;
  }
  void release() {
    if (cap_ > kInline) delete[] heap_;
    cap_ = kInline;
  }
  void take(IndexList& o) {
    size_ = o.size_;
    cap_ = o.cap_;
    if (cap_ > kInline) heap_ = o.heap_;
    else std::copy(o.inline_, o.inline_ + size_, inline_);
    o.size_ = 0;
    o.cap_ = kInline;
  }
  uint32_t size_ = 0, cap_ = kInline;
  union {
    uint32_t inline_[kInline] = {};
    uint32_t* heap_;
  };
};

struct Block {
  uint64_t begin = 0, end = 0;  // [begin, end), whole instructions
  uint64_t last = 0;            // address of the last instruction
  IndexList succs;              // indices into Cfg::blocks
  IndexList preds;
};

// A call instruction of GPU code, its callee known: written as a call site (<C>).
struct CallSite {
  uint64_t addr = 0, size = 0, target = 0;
};

struct Cfg {
  std::vector<Block> blocks;  // sorted by begin
  uint32_t entry = 0;
  std::vector<uint64_t> calls;  // targets of direct calls in the decoded code, sorted
  std::vector<CallSite> call_sites;  // GPU code (sass.hpp): by address
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
