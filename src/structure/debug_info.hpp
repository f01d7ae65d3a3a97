// What DWARF says about a binary, read once through libdw and then immutable (so
// const methods are safe from any thread): the line map, and each subprogram with
// its tree of inlined calls.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <mutex>
#include <vector>

#include "common/status.hpp"
#include "structure/dwp.hpp"

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

// The line rows and subprograms (with their inline trees) of one compilation unit, or of
// everything read at once (cubins).
struct DebugUnit {
  struct Row {
    uint64_t addr;
    uint32_t file, line;
    bool end;
  };
  struct Span {
    uint64_t lo, hi;
    const SubprogramInfo* sub;
  };
  std::vector<Row> rows;  // sorted by address, end-of-sequence rows first among equals
  std::vector<std::unique_ptr<SubprogramInfo>> subprograms;
  std::vector<Span> spans;  // sorted by lo
  uint64_t max_span = 0;
  size_t bytes = 0;         // estimate of the memory held
  void finish();            // sorts rows, builds spans, estimates bytes
};

class DebugInfo {
public:
  // A binary without DWARF gives an empty DebugInfo, not an error. CPU binaries are only
  // indexed here (units and their address ranges, subprogram names): a unit's line table
  // and inline trees are read when a view first needs them and kept in a cache: the units
  // and libdw's own caches together stay within about `cache_bytes` (three quarters and a
  // quarter), so memory does not grow with the debug information. Cubins are read
  // whole. `image` must outlive every call to view() and lines_at().
  // `package`: the binary's DWARF package (.dwp), whose split units are read where libdw
  // finds no .dwo file.
  static Expected<std::unique_ptr<DebugInfo>> load(const ElfImage& image, size_t cache_bytes = size_t(256) << 20,
                                                   std::unique_ptr<DwarfPackage> package = nullptr);
  ~DebugInfo();

  // What DWARF says about an address range: the units covering it, held while the View
  // lives. MT: a View is const and may be used from any thread.
  class View {
  public:
    SourceLoc line_at(uint64_t addr) const;
    // The next address after `addr` where the line map may say something else.
    uint64_t next_row_after(uint64_t addr) const;
    // Subprograms whose ranges meet [lo, hi), lowest first.
    std::vector<const SubprogramInfo*> subprograms_in(uint64_t lo, uint64_t hi) const;

  private:
    friend class DebugInfo;
    std::vector<std::shared_ptr<const DebugUnit>> units_;
    std::vector<DebugUnit::Row> merged_;  // rows of several units, when there are several
    std::span<const DebugUnit::Row> rows_;  // into units_ or merged_ (whose buffer a move keeps)
  };
  // MT: thread-safe (units are read under a lock).
  View view(uint64_t lo, uint64_t hi) const;
  // The compilation unit a procedure over [lo, hi) belongs to: the first in .debug_info
  // order covering lo, else [lo, hi); UINT32_MAX if none does. Units come in .debug_info
  // order. MT: thread-safe.
  uint32_t unit_of(uint64_t lo, uint64_t hi) const;
  // line_at of each address, reading one unit's line table at a time. MT: thread-safe.
  std::vector<SourceLoc> lines_at(const std::vector<uint64_t>& addrs) const;
  // Every subprogram with code: names and ranges only (inline trees are in views). Lowest first.
  std::vector<const SubprogramInfo*> all_subprograms() const;

  // MT: thread-safe; names are interned as units are read.
  std::string file_name(uint32_t id) const;
  uint32_t intern_file(const std::string& name);
  // Units read so far, counting re-reads after eviction (for tests and the bench).
  size_t units_read() const;
  // Split DWARF: the skeleton units, and those whose .dwo file was not found (their lines
  // are read, their inlined calls not), with the first missing one's name.
  struct SplitUnits {
    uint32_t units = 0, missing = 0;
    std::string first_missing;
  };
  SplitUnits split_units() const;

private:
  friend class DebugLoader;
  static void merge_rows(View& v, uint64_t lo, uint64_t hi);
  struct Impl;
  std::unique_ptr<Impl> impl_;
  DebugInfo();
};

// The inlined calls nvcc writes into .debug_line with a vendor opcode (nv_inline.cpp):
// one synthetic subprogram per line sequence that has any. Sections as laid out for
// analysis (relocations applied); file names are interned in `d`.
std::vector<std::unique_ptr<SubprogramInfo>> nv_inlined_calls(std::span<const uint8_t> debugLine,
                                                              std::span<const uint8_t> debugStr, DebugInfo& d);

// "_Z3fooi" -> "foo(int)"; other names unchanged.
std::string demangle(const std::string& name);

}  // namespace hpc::structure
