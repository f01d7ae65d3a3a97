// A compilation unit's line table read straight from .debug_line. libdw keeps every table
// it has read (rows of some 48 bytes) until its handle ends, so bounding its memory meant
// renewing the handle, and each new handle reads the unit headers again from the start of
// .debug_info. Read here, nothing stays behind.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace hpc::structure {

struct LineTableSections {
  std::span<const uint8_t> line, line_str, str;  // .debug_line, .debug_line_str, .debug_str
};

struct LineTable {
  struct Row {
    uint64_t addr;
    uint64_t file;  // index into files
    int64_t line;
    bool end;
  };
  std::vector<Row> rows;           // in libdw's order (see read_line_table)
  std::vector<std::string> files;  // by file index, named as libdw's dwarf_filesrc names them
};

// The table at `offset` for a unit whose DW_AT_comp_dir is `comp_dir` (nullptr: none) and
// whose addresses take `address_size` bytes. Returns false, leaving `out` unspecified, for
// anything this reader does not follow exactly as libdw 0.188's dwarf_getsrclines does
// (malformed data, forms or opcodes it does not know, lengths it reads differently): the
// caller then asks libdw, so the rows and names are libdw's either way.
bool read_line_table(const LineTableSections& s, uint64_t offset, const char* comp_dir, uint8_t address_size,
                     LineTable& out);

}  // namespace hpc::structure
