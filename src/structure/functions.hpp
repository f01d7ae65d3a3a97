// Which procedures a binary has and where each one's code lies.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.hpp"

namespace hpc::structure {

class ElfImage;
class DebugInfo;

struct FunctionSpec {
  std::string name;       // pretty name (see `mangled`)
  std::string link_name;  // as in the symbol table
  uint64_t begin = 0, end = 0;
  bool plt = false;
  bool sized = false;     // `end` came from a symbol size, an FDE or DWARF, not from the next procedure
  bool mangled = false;   // `name` is still the symbol's: demangled when the procedure is analysed
};

// Symbols and PLT slots first; where they are missing (stripped code), .eh_frame FDEs
// and DWARF subprograms bound the procedures. A symbol without a size extends to the
// next procedure or the end of its section. Sorted by address, no overlaps at entry.
std::vector<FunctionSpec> discover_functions(const ElfImage& image, const DebugInfo& debug);

// Stripped code with neither symbol nor unwind entry, reached by direct calls from known
// procedures, becomes procedures "targ<addr>", searched again in what they call until no
// call finds another. `calls(fns, todo)` gives the direct call targets of each procedure
// fns[todo[k]]. Only runs on binaries without .symtab where some code is covered by no
// sized procedure.
using CallTargets = std::function<std::vector<std::vector<uint64_t>>(const std::vector<FunctionSpec>&,
                                                                     const std::vector<size_t>&)>;
// `each(n, f)` calls f(0) ... f(n - 1), in any order or at once (the first pass over the
// code); the result does not depend on it.
using ForEachIndex = std::function<void(size_t, const std::function<void(size_t)>&)>;
void add_called_procedures(std::vector<FunctionSpec>& fns, const ElfImage& image, const CallTargets& calls,
                           const ForEachIndex& each = {});

// The procedures once discovery is done, kept for the whole analysis: 16 bytes each plus
// their names, one after the other in one buffer (a FunctionSpec takes 88 bytes, and more
// for names longer than std::string's inline buffer). MT: const methods are thread-safe.
class ProcedureTable {
public:
  ProcedureTable() = default;
  // Fails only past 4 GiB of names.
  static Expected<ProcedureTable> make(const std::vector<FunctionSpec>& fns);
  ProcedureTable(ProcedureTable&&) = default;
  ProcedureTable& operator=(ProcedureTable&&) = default;

  size_t size() const { return entries_.size(); }
  uint64_t begin(size_t i) const { return entries_[i].begin; }
  uint64_t end(size_t i) const;
  FunctionSpec at(size_t i) const;  // the FunctionSpec it was made from

private:
  struct Entry {
    uint64_t begin;
    uint32_t length;  // end - begin; kLong: an 8-byte end follows the names
    uint32_t record;  // offset in names_: flags, name, its NUL, link name and its NUL unless the same
  };
  static constexpr uint32_t kLong = UINT32_MAX;
  enum : uint8_t { kPlt = 1, kSized = 2, kMangled = 4, kOwnLink = 8 };
  std::vector<Entry> entries_;
  std::vector<char> names_;
};

// "targ401a2c": the name of a procedure known only by its address.
std::string address_name(uint64_t addr);

}  // namespace hpc::structure
