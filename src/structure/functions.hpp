// Which procedures a binary has and where each one's code lies.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

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
void add_called_procedures(std::vector<FunctionSpec>& fns, const ElfImage& image, const CallTargets& calls);

// "targ401a2c": the name of a procedure known only by its address.
std::string address_name(uint64_t addr);

}  // namespace hpc::structure
