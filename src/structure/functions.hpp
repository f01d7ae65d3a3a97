// Which procedures a binary has and where each one's code lies.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hpc::structure {

class ElfImage;
class DebugInfo;

struct FunctionSpec {
  std::string name;       // pretty name
  std::string link_name;  // as in the symbol table
  uint64_t begin = 0, end = 0;
  bool plt = false;
};

// Symbols and PLT slots first; where they are missing (stripped code), .eh_frame FDEs
// and DWARF subprograms bound the procedures. A symbol without a size extends to the
// next procedure or the end of its section. Sorted by address, no overlaps at entry.
std::vector<FunctionSpec> discover_functions(const ElfImage& image, const DebugInfo& debug);

// "targ401a2c": the name of a procedure known only by its address.
std::string address_name(uint64_t addr);

}  // namespace hpc::structure
