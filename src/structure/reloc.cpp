// Relocations of debug sections in relocatable code (CUDA cubins): DWARF there holds
// section-relative addresses which only make sense once the sections are placed.
#include <gelf.h>

#include <algorithm>
#include <cstring>

#include "structure/elf_image.hpp"

namespace hpc::structure {

std::vector<uint8_t> ElfImage::relocated_debug_copy() const {
  if (!relocatable_) return {};
  std::vector<uint8_t> out(file_->bytes().begin(), file_->bytes().end());
  bool changed = false;
  for (Elf_Scn* scn = elf_nextscn(elf_, nullptr); scn; scn = elf_nextscn(elf_, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_REL && sh.sh_type != SHT_RELA) || sh.sh_entsize == 0) continue;
    if (sh.sh_info == 0 || sh.sh_info > sections_.size()) continue;
    const Section& target = sections_[sh.sh_info - 1];
    if (target.flags & SHF_ALLOC) continue;  // only debug sections matter here
    Elf_Scn* symscn = elf_getscn(elf_, sh.sh_link);
    Elf_Data* data = elf_getdata(scn, nullptr);
    Elf_Data* syms = symscn ? elf_getdata(symscn, nullptr) : nullptr;
    if (!data || !syms) continue;
    for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; ++i) {
      GElf_Rela r{};
      if (sh.sh_type == SHT_RELA) {
        if (!gelf_getrela(data, static_cast<int>(i), &r)) break;
      } else {
        GElf_Rel rel;
        if (!gelf_getrel(data, static_cast<int>(i), &rel)) break;
        r.r_offset = rel.r_offset;
        r.r_info = rel.r_info;
      }
      GElf_Sym sym;
      if (!gelf_getsym(syms, static_cast<int>(GELF_R_SYM(r.r_info)), &sym)) continue;
      uint64_t value = sym.st_value;
      if (sym.st_shndx != SHN_UNDEF && sym.st_shndx <= sections_.size()) value += sections_[sym.st_shndx - 1].addr;
      // Types 1 and 2 are the 32- and 64-bit absolute relocations (R_CUDA_32/64).
      int width = GELF_R_TYPE(r.r_info) == 2 ? 8 : GELF_R_TYPE(r.r_info) == 1 ? 4 : 0;
      if (!width || r.r_offset + width > target.size) continue;
      uint8_t* at = out.data() + target.offset + r.r_offset;
      uint64_t addend = static_cast<uint64_t>(r.r_addend);
      if (sh.sh_type == SHT_REL) {
        uint64_t old = 0;
        std::memcpy(&old, at, width);
        addend = old;
      }
      uint64_t v = value + addend;
      std::memcpy(at, &v, width);
      changed = true;
    }
  }
  if (!changed) out.clear();
  return out;
}

std::vector<std::pair<uint64_t, std::optional<uint64_t>>> ElfImage::code_relocations() const {
  std::vector<std::pair<uint64_t, std::optional<uint64_t>>> out;
  if (!relocatable_) return out;
  for (Elf_Scn* scn = elf_nextscn(elf_, nullptr); scn; scn = elf_nextscn(elf_, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_REL && sh.sh_type != SHT_RELA) || sh.sh_entsize == 0) continue;
    if (sh.sh_info == 0 || sh.sh_info > sections_.size()) continue;
    const Section& target = sections_[sh.sh_info - 1];
    if (!target.executable()) continue;
    Elf_Scn* symscn = elf_getscn(elf_, sh.sh_link);
    Elf_Data* data = elf_getdata(scn, nullptr);
    Elf_Data* syms = symscn ? elf_getdata(symscn, nullptr) : nullptr;
    if (!data || !syms) continue;
    for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; ++i) {
      GElf_Rela r{};
      if (sh.sh_type == SHT_RELA) {
        if (!gelf_getrela(data, static_cast<int>(i), &r)) break;
      } else {
        GElf_Rel rel;
        if (!gelf_getrel(data, static_cast<int>(i), &rel)) break;
        r.r_offset = rel.r_offset;
        r.r_info = rel.r_info;
      }
      GElf_Sym sym;
      if (!gelf_getsym(syms, static_cast<int>(GELF_R_SYM(r.r_info)), &sym)) continue;
      std::optional<uint64_t> to;
      if (sym.st_shndx != SHN_UNDEF && sym.st_shndx <= sections_.size())
        to = sections_[sym.st_shndx - 1].addr + sym.st_value + static_cast<uint64_t>(r.r_addend);
      out.emplace_back(target.addr + r.r_offset, to);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace hpc::structure
