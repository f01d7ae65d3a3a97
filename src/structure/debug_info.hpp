// What DWARF says about a binary, read once through libdw and then immutable (so
// const methods are safe from any thread): the line map, and each subprogram with
// its tree of inlined calls.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.hpp"

namespace hpc::structure {

class ElfImage;

using Range = std::pair<uint64_t, uint64_t>;  // [first, second)

// File ids index DebugInfo::file_name(); 0 is "no file".
struct SourceLoc {
  uint32_t file = 0;
  uint32_t line = 0;
  bool operator==(const SourceLoc&) const = default;
};

struct InlineCall {
  std::vector<Range> ranges;
  int parent = -1;          // index into SubprogramInfo::inlines, -1: the subprogram
  uint32_t call_file = 0;   // where the call was written
  uint32_t call_line = 0;
  uint32_t callee_file = 0; // where the callee was declared
  std::string callee;       // its (demangled) name
  int blocks = 0;           // lexical blocks between it and its parent scope
  bool contains(uint64_t a) const;
};

struct SubprogramInfo {
  std::vector<Range> ranges;
  std::string name, link_name;
  uint32_t decl_file = 0, decl_line = 0;
  std::vector<InlineCall> inlines;  // parents before children
  bool synthetic = false;           // no DWARF entry: nvcc's inlined calls from the line table
};

class DebugInfo {
public:
  // A binary without DWARF gives an empty DebugInfo, not an error.
  static Expected<std::unique_ptr<DebugInfo>> load(const ElfImage& image);

  bool has_lines() const { return !rows_.empty(); }
  const std::string& file_name(uint32_t id) const { return files_[id]; }
  SourceLoc line_at(uint64_t addr) const;
  // The next address after `addr` where the line map may say something else.
  uint64_t next_row_after(uint64_t addr) const;
  // Subprograms whose ranges meet [lo, hi), lowest first.
  std::vector<const SubprogramInfo*> subprograms_in(uint64_t lo, uint64_t hi) const;

  // Used while loading.
  uint32_t intern_file(const std::string& name);

private:
  friend class DebugLoader;
  struct Row {
    uint64_t addr;
    uint32_t file, line;
    bool end;
  };
  std::vector<std::string> files_{""};
  std::unordered_map<std::string, uint32_t> fileIds_;
  std::vector<Row> rows_;
  std::vector<std::unique_ptr<SubprogramInfo>> subprograms_;
  struct Span {
    uint64_t lo, hi;
    const SubprogramInfo* sub;
  };
  std::vector<Span> spans_;  // sorted by lo
  uint64_t maxSpan_ = 0;
};

// The inlined calls nvcc writes into .debug_line with a vendor opcode (nv_inline.cpp):
// one synthetic subprogram per line sequence that has any. Sections as laid out for
// analysis (relocations applied); file names are interned in `d`.
std::vector<std::unique_ptr<SubprogramInfo>> nv_inlined_calls(std::span<const uint8_t> debugLine,
                                                              std::span<const uint8_t> debugStr, DebugInfo& d);

// "_Z3fooi" -> "foo(int)"; other names unchanged.
std::string demangle(const std::string& name);

}  // namespace hpc::structure
