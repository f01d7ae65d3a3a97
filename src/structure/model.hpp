// Our own picture of a binary's structure, independent of the file format: a list of
// procedures, each a tree of inlined calls, loops and statements with address ranges.
// emit.cpp turns it into a structure file through src/formats/structfile.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "structure/debug_info.hpp"

namespace hpc::structure {

// Sorted, coalesced list of [lo, hi) ranges.
class RangeSet {
public:
  void add(uint64_t lo, uint64_t hi);
  const std::vector<Range>& ranges() const { return r_; }
  bool empty() const { return r_.empty(); }
  uint64_t min() const { return r_.empty() ? 0 : r_.front().first; }

private:
  std::vector<Range> r_;
};

struct Scope {
  enum class Kind {
    Procedure,  // the root
    Inline,     // an inlined call: rendered as a call-site alien holding the callee's alien
    Guard,      // code of the procedure outside its source range (reference: "<inline>" alien)
    Loop,
  };
  Kind kind = Kind::Procedure;
  // Inline: call site and callee; Guard and Loop: file and line.
  uint32_t file = 0, line = 0;
  uint32_t callee_file = 0, callee_line = 0;
  std::string callee;
  uint64_t loop_header = 0;  // Loop: address of the header block
  int loop_id = -1;          // Loop: index in the procedure's loop forest

  std::map<uint32_t, RangeSet> stmts;  // line -> addresses
  // GPU code: call instructions whose callee is known, each a call site of its own.
  struct Call {
    uint32_t line = 0;
    uint64_t begin = 0, end = 0, target = 0;
  };
  std::vector<Call> calls;
  std::vector<std::unique_ptr<Scope>> children;
};

struct Procedure {
  std::string name;       // pretty (demangled) name
  std::string link_name;  // symbol name
  uint64_t entry = 0;
  uint32_t file = 0, line = 0;
  std::string device;  // GPU code with call sites: "NVIDIA sm_75", their d attribute
  Scope root;
};

struct Structure {
  std::string binary_path;
  std::vector<Procedure> procedures;         // sorted by entry
  std::shared_ptr<const DebugInfo> debug;    // names the file ids
  bool gpu = false;                          // a GPU binary (CUDA cubin)
  bool gpu_cfg = false;                      // its control flow came from nvdisasm
  // "[binary]": stands for a file or a line where no debug information says one.
  std::string unknown_file() const;
  std::string file_name(uint32_t id) const { return id ? debug->file_name(id) : unknown_file(); }
};

}  // namespace hpc::structure
