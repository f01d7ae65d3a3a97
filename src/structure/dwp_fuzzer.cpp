// DWARF packages (dwp.hpp) from any bytes: the index read, each unit's image built and
// handed to libdw, and its DIEs walked as hpcstruct reads them (names, ranges, files,
// abstract origins, call sites). Replayed by the test suite over the packages the tests
// build and tests/fuzz/dwp/.
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <libelf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "structure/dwp.hpp"

namespace {

void walk(Dwarf_Die* parent, int depth) {
  Dwarf_Die child;
  if (depth > 64 || dwarf_child(parent, &child) != 0) return;
  do {
    (void)dwarf_tag(&child);
    (void)dwarf_diename(&child);
    Dwarf_Addr base = 0, lo = 0, hi = 0;
    int n = 0;
    for (ptrdiff_t off = 0; n < 64 && (off = dwarf_ranges(&child, off, &base, &lo, &hi)) > 0; ++n) {
    }
    Dwarf_Attribute a;
    Dwarf_Word w = 0;
    for (int attr : {DW_AT_decl_file, DW_AT_decl_line, DW_AT_call_file, DW_AT_call_line})
      if (dwarf_attr_integrate(&child, attr, &a)) (void)dwarf_formudata(&a, &w);
    for (int attr : {DW_AT_linkage_name, DW_AT_name})
      if (dwarf_attr_integrate(&child, attr, &a)) (void)dwarf_formstring(&a);
    Dwarf_Die origin;
    if (dwarf_attr(&child, DW_AT_abstract_origin, &a) && dwarf_formref_die(&a, &origin)) (void)dwarf_diename(&origin);
    walk(&child, depth + 1);
  } while (dwarf_siblingof(&child, &child) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool ready = elf_version(EV_CURRENT) != EV_NONE;
  if (!ready) return 0;
  const int fd = memfd_create("dwp_fuzzer", MFD_CLOEXEC);
  if (fd < 0) return 0;
  for (size_t done = 0; done < size;) {
    const ssize_t n = write(fd, data + done, size - done);
    if (n <= 0) break;
    done += size_t(n);
  }
  std::string why;
  auto p = hpc::structure::DwarfPackage::open("/proc/self/fd/" + std::to_string(fd), &why);
  if (p) {
    // A skeleton's .debug_addr: some addresses for the units' indices.
    std::vector<uint8_t> addr(256);
    for (size_t i = 0; i < addr.size(); ++i) addr[i] = uint8_t(i * 7);
    int units = 0;
    for (uint64_t id : p->ids()) {
      if (++units > 64) break;
      auto u = p->unit(id, addr, addr);
      if (!u) continue;
      Dwarf_CU* cu = nullptr;
      Dwarf_Die die;
      if (dwarf_get_units(u->dwarf(), nullptr, &cu, nullptr, nullptr, &die, nullptr) != 0) continue;
      Dwarf_Files* files = nullptr;
      size_t n = 0;
      if (dwarf_getsrcfiles(&die, &files, &n) == 0)
        for (size_t i = 0; i < n && i < 256; ++i) (void)dwarf_filesrc(files, i, nullptr, nullptr);
      walk(&die, 0);
    }
  }
  close(fd);
  return 0;
}
