// Relocations of relocatable code (CUDA cubins): DWARF there holds section-relative
// addresses which only make sense once the sections are placed, and calls name their callee
// through a relocation at the instruction.
#include <gelf.h>

#include <algorithm>
#include <cstring>

#include "structure/elf_image.hpp"

namespace hpc::structure {
namespace {

// Calls f(target, r, rela, symbol) for each relocation of the sections `want(target)`
// accepts, r_addend 0 for a REL entry, the symbol as its table has it.
template <typename Want, typename F>
void each_relocation(Elf* elf, const std::vector<Section>& sections, Want want, F f) {
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_REL && sh.sh_type != SHT_RELA) || sh.sh_entsize == 0) continue;
    if (sh.sh_info == 0 || sh.sh_info > sections.size()) continue;
    const Section& target = sections[sh.sh_info - 1];
    if (!want(target)) continue;
    Elf_Scn* symscn = elf_getscn(elf, sh.sh_link);
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
      f(target, r, sh.sh_type == SHT_RELA, sym);
    }
  }
}

}  // namespace

std::vector<uint8_t> ElfImage::relocated_debug_copy() const {
  if (!relocatable_) return {};
  std::vector<uint8_t> out(file_->bytes().begin(), file_->bytes().end());
  bool changed = false;
  auto debug = [](const Section& s) { return !(s.flags & SHF_ALLOC); };  // only debug sections matter here
  each_relocation(elf_, sections_, debug, [&](const Section& target, const GElf_Rela& r, bool rela, const GElf_Sym& sym) {
    uint64_t value = sym.st_value;
    if (sym.st_shndx != SHN_UNDEF && sym.st_shndx <= sections_.size()) value += sections_[sym.st_shndx - 1].addr;
    // Types 1 and 2 are the 32- and 64-bit absolute relocations (R_CUDA_32/64).
    int width = GELF_R_TYPE(r.r_info) == 2 ? 8 : GELF_R_TYPE(r.r_info) == 1 ? 4 : 0;
    if (!width || r.r_offset + width > target.size) return;
    uint8_t* at = out.data() + target.offset + r.r_offset;
    uint64_t addend = static_cast<uint64_t>(r.r_addend);
    if (!rela) {
      uint64_t old = 0;
      std::memcpy(&old, at, width);
      addend = old;
    }
    uint64_t v = value + addend;
    std::memcpy(at, &v, width);
    changed = true;
  });
  if (!changed) out.clear();
  return out;
}

std::vector<std::pair<uint64_t, std::optional<uint64_t>>> ElfImage::code_relocations() const {
  std::vector<std::pair<uint64_t, std::optional<uint64_t>>> out;
  if (!relocatable_) return out;
  auto code = [](const Section& s) { return s.executable(); };
  each_relocation(elf_, sections_, code, [&](const Section& target, const GElf_Rela& r, bool, const GElf_Sym& sym) {
    std::optional<uint64_t> to;
    if (sym.st_shndx != SHN_UNDEF && sym.st_shndx <= sections_.size())
      to = sections_[sym.st_shndx - 1].addr + sym.st_value + static_cast<uint64_t>(r.r_addend);
    out.emplace_back(target.addr + r.r_offset, to);
  });
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace hpc::structure
