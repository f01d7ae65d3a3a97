// read_line_table against libdw's dwarf_getsrclines, unit by unit: the same rows in the
// same order and the same file names, or a refusal (then libdw is asked). HPC_LINE_TABLE_CHECK=bin1:bin2 checks more binaries.
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "structure/elf_image.hpp"
#include "structure/line_table.hpp"

namespace hpc::structure {
namespace {

struct Checked {
  size_t units = 0, read = 0, rows = 0;
};

void check_binary(const std::string& path, Checked& c) {
  auto img = ElfImage::open(path);
  EXPECT_TRUE(img.ok()) << path;
  if (!img.ok()) return;
  const ElfImage& image = **img;
  auto section = [&](const char* name) {
    const Section* s = image.section_named(name);
    return s && s->type != SHT_NOBITS ? image.file_bytes().subspan(s->offset, s->size) : std::span<const uint8_t>();
  };
  LineTableSections secs{section(".debug_line"), section(".debug_line_str"), section(".debug_str")};
  Dwarf* dw = dwarf_begin_elf(image.elf(), DWARF_C_READ, nullptr);
  if (!dw) return;
  Dwarf_CU* cu = nullptr;
  Dwarf_Die cudie, subdie;
  uint8_t unitType = 0;
  while (dwarf_get_units(dw, cu, &cu, nullptr, &unitType, &cudie, &subdie) == 0) {
    if (unitType == DW_UT_skeleton || unitType == DW_UT_type || unitType == DW_UT_split_type) continue;
    Dwarf_Attribute a;
    Dwarf_Word offset = 0;
    if (!dwarf_attr(&cudie, DW_AT_stmt_list, &a) || dwarf_formudata(&a, &offset) != 0) continue;
    ++c.units;
    const char* compDir = dwarf_attr(&cudie, DW_AT_comp_dir, &a) ? dwarf_formstring(&a) : nullptr;
    uint8_t addressSize = 0;
    Dwarf_Die top;
    dwarf_diecu(&cudie, &top, &addressSize, nullptr);
    LineTable t;
    if (!read_line_table(secs, offset, compDir, addressSize, t)) continue;
    ++c.read;
    Dwarf_Lines* lines = nullptr;
    size_t n = 0;
    ASSERT_EQ(dwarf_getsrclines(&cudie, &lines, &n), 0) << path << ": unit at " << dwarf_dieoffset(&cudie);
    Dwarf_Files* files = nullptr;
    size_t nfiles = 0;
    ASSERT_EQ(dwarf_getsrcfiles(&cudie, &files, &nfiles), 0);
    ASSERT_EQ(t.files.size(), nfiles) << path << ": unit at " << dwarf_dieoffset(&cudie);
    for (size_t k = 0; k < nfiles; ++k) {
      const char* name = dwarf_filesrc(files, k, nullptr, nullptr);
      EXPECT_EQ(t.files[k], name ? name : "") << path << ": file " << k;
    }
    ASSERT_EQ(t.rows.size(), n) << path << ": unit at " << dwarf_dieoffset(&cudie);
    for (size_t k = 0; k < n; ++k) {
      Dwarf_Line* l = dwarf_onesrcline(lines, k);
      Dwarf_Addr addr = 0;
      int line = 0;
      bool end = false;
      dwarf_lineaddr(l, &addr);
      dwarf_lineno(l, &line);
      dwarf_lineendsequence(l, &end);
      const char* f = dwarf_linesrc(l, nullptr, nullptr);
      const LineTable::Row& r = t.rows[k];
      ASSERT_TRUE(r.addr == addr && r.line == line && r.end == end)
          << path << ": row " << k << " at " << std::hex << addr << " vs " << r.addr;
      std::string mine = r.file < t.files.size() ? t.files[r.file] : "";
      ASSERT_EQ(mine, f ? f : "") << path << ": row " << k;
    }
    c.rows += n;
  }
  dwarf_end(dw);
}

TEST(LineTable, SameAsLibdw) {
  std::vector<std::string> bins;
  for (const char* name : {"nest3", "inline_loops", "same_line", "switch_loop", "stripped"})
    bins.push_back(std::string(HPC_STRUCTURE_TESTLIBS) + "/lib" + name + ".so");
  bins.push_back("/proc/self/exe");
  if (const char* more = std::getenv("HPC_LINE_TABLE_CHECK")) {
    std::stringstream list(more);
    for (std::string b; std::getline(list, b, ':');)
      if (!b.empty()) bins.push_back(b);
  }
  for (const auto& b : bins) {
    Checked c;
    check_binary(b, c);
    std::printf("%s: %zu units, %zu read here, %zu rows\n", b.c_str(), c.units, c.read, c.rows);
    EXPECT_EQ(c.read, c.units) << b << ": tables left to libdw";
  }
}

}  // namespace
}  // namespace hpc::structure
