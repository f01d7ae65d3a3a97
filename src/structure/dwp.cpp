#include "structure/dwp.hpp"

#include <elf.h>
#include <elfutils/libdw.h>
#include <libelf.h>

#include <cstring>
#include <filesystem>
#include <map>

namespace hpc::structure {

namespace {

template <typename T>
T load(std::span<const uint8_t> b, size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}

// Section ids of the index's columns: GNU's version 2 and DWARF 5's agree on those read.
constexpr uint32_t kInfo = 1, kAbbrev = 3, kLine = 4, kStrOffsets = 6, kRnglists5 = 8;

bool regular_file(const std::string& p) {
  std::error_code ec;
  return !p.empty() && std::filesystem::is_regular_file(p, ec);
}

}  // namespace

std::string find_package(const std::string& binary, const std::string& debugFile) {
  if (regular_file(binary + ".dwp")) return binary + ".dwp";
  std::error_code ec;
  const std::string real = std::filesystem::canonical(binary, ec).string();
  if (!ec && regular_file(real + ".dwp")) return real + ".dwp";
  if (!debugFile.empty() && regular_file(debugFile + ".dwp")) return debugFile + ".dwp";
  return "";
}

DwarfPackage::~DwarfPackage() = default;

std::unique_ptr<DwarfPackage> DwarfPackage::open(const std::string& path, std::string* why) {
  auto fail = [&](const std::string& w) {
    if (why) *why = path + ": " + w;
    return std::unique_ptr<DwarfPackage>();
  };
  auto f = MappedFile::open(path);
  if (!f) return fail(f.status().message());
  std::unique_ptr<DwarfPackage> p(new DwarfPackage(std::move(*f)));
  const std::span<const uint8_t> b = p->file_.bytes();
  if (b.size() < sizeof(Elf64_Ehdr) || std::memcmp(b.data(), ELFMAG, SELFMAG) != 0 || b[EI_CLASS] != ELFCLASS64 ||
      b[EI_DATA] != ELFDATA2LSB)
    return fail("not a 64-bit little-endian ELF file");
  const auto eh = load<Elf64_Ehdr>(b, 0);
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shoff > b.size() ||
      (b.size() - eh.e_shoff) / sizeof(Elf64_Shdr) < eh.e_shnum || eh.e_shstrndx >= eh.e_shnum)
    return fail("its section headers lie outside the file");
  auto shdr = [&](size_t i) { return load<Elf64_Shdr>(b, eh.e_shoff + i * sizeof(Elf64_Shdr)); };
  const Elf64_Shdr names = shdr(eh.e_shstrndx);
  if (names.sh_offset > b.size() || names.sh_size > b.size() - names.sh_offset)
    return fail("its section names lie outside the file");
  std::span<const uint8_t> index;
  for (size_t i = 1; i < eh.e_shnum; ++i) {
    const Elf64_Shdr s = shdr(i);
    if (s.sh_name >= names.sh_size || s.sh_type == SHT_NOBITS) continue;
    const char* n = reinterpret_cast<const char*>(b.data() + names.sh_offset + s.sh_name);
    const std::string name(n, strnlen(n, names.sh_size - s.sh_name));
    std::span<const uint8_t>* into = name == ".debug_cu_index"           ? &index
                                     : name == ".debug_info.dwo"         ? &p->info_
                                     : name == ".debug_abbrev.dwo"       ? &p->abbrev_
                                     : name == ".debug_line.dwo"         ? &p->line_
                                     : name == ".debug_str_offsets.dwo"  ? &p->strOffsets_
                                     : name == ".debug_str.dwo"          ? &p->str_
                                     : name == ".debug_rnglists.dwo"     ? &p->rnglists_
                                                                         : nullptr;
    if (!into) continue;
    if (s.sh_offset > b.size() || s.sh_size > b.size() - s.sh_offset) return fail(name + " lies outside the file");
    if (s.sh_flags & SHF_COMPRESSED) return fail(name + " is compressed (not read in a package)");
    *into = b.subspan(s.sh_offset, s.sh_size);
  }
  if (index.empty()) return fail("no .debug_cu_index section: not a DWARF package");
  if (index.size() < 16) return fail(".debug_cu_index is shorter than its header");
  p->version_ = load<uint32_t>(index, 0) & 0xffff;  // DWARF 5: a 2-byte version, 2 bytes of padding
  const uint64_t columns = load<uint32_t>(index, 4), units = load<uint32_t>(index, 8), slots = load<uint32_t>(index, 12);
  if (p->version_ != 2 && p->version_ != 5)
    return fail(".debug_cu_index version " + std::to_string(p->version_) + " (2 and 5 are read)");
  // Slots (ids, then rows), the column ids, then offsets and sizes: one row of each per unit.
  const uint64_t need = 16 + slots * 12 + columns * 4 + 2 * units * columns * 4;
  if (columns > 16 || need > index.size()) return fail(".debug_cu_index is shorter than its tables");
  for (uint64_t c = 0; c < columns; ++c) p->columns_.push_back(load<uint32_t>(index, 16 + slots * 12 + c * 4));
  const size_t table = 16 + slots * 12 + columns * 4;
  p->table_.resize(2 * units * columns);
  std::memcpy(p->table_.data(), index.data() + table, p->table_.size() * 4);
  for (uint64_t s = 0; s < slots; ++s) {
    const auto row = load<uint32_t>(index, 16 + slots * 8 + s * 4);
    if (row != 0 && row <= units) p->rows_.emplace(load<uint64_t>(index, 16 + s * 8), row - 1);
  }
  return p;
}

std::vector<uint64_t> DwarfPackage::ids() const {
  std::vector<uint64_t> out;
  for (const auto& [id, row] : rows_) out.push_back(id);
  return out;
}

DwarfPackage::Unit::~Unit() {
  if (dw_) dwarf_end(dw_);
  if (elf_) elf_end(elf_);
}

std::unique_ptr<DwarfPackage::Unit> DwarfPackage::unit(uint64_t id, std::span<const uint8_t> addr,
                                                       std::span<const uint8_t> ranges) const {
  auto it = rows_.find(id);
  if (it == rows_.end()) return nullptr;
  const size_t n = columns_.size();
  if (n == 0) return nullptr;  // no sections: no unit
  const size_t units = table_.size() / (2 * n);
  auto contribution = [&](uint32_t column, std::span<const uint8_t> section, std::span<const uint8_t>& out) {
    for (size_t c = 0; c < n; ++c) {
      if (columns_[c] != column) continue;
      const uint64_t off = table_[it->second * n + c], size = table_[units * n + it->second * n + c];
      if (off > section.size() || size > section.size() - off) return false;
      out = section.subspan(off, size);
      return true;
    }
    return true;  // no such column: no contribution
  };
  std::span<const uint8_t> info, abbrev, line, strOffsets, rnglists;
  if (!contribution(kInfo, info_, info) || !contribution(kAbbrev, abbrev_, abbrev) ||
      !contribution(kLine, line_, line) || !contribution(kStrOffsets, strOffsets_, strOffsets) ||
      (version_ == 5 && !contribution(kRnglists5, rnglists_, rnglists)))
    return nullptr;
  if (info.size() < 12 || abbrev.empty() || load<uint32_t>(info, 0) >= 0xfffffff0u) return nullptr;  // 32-bit DWARF only
  const uint16_t unitVersion = load<uint16_t>(info, 4);

  // The strings the unit names, and its offsets table rewritten to them. DWARF 5's tables
  // start with an 8-byte header; GNU's DWARF 4 ones have none.
  const size_t header = unitVersion >= 5 ? 8 : 0;
  if (strOffsets.size() < header) return nullptr;
  std::vector<uint8_t> offsets(strOffsets.begin(), strOffsets.begin() + header);
  std::vector<uint8_t> strings;
  std::map<uint32_t, uint32_t> moved;
  for (size_t at = header; at + 4 <= strOffsets.size(); at += 4) {
    const uint32_t old = load<uint32_t>(strOffsets, at);
    auto [m, fresh] = moved.try_emplace(old, static_cast<uint32_t>(strings.size()));
    if (fresh) {
      if (old >= str_.size()) return nullptr;
      const auto* s = str_.data() + old;
      const size_t len = strnlen(reinterpret_cast<const char*>(s), str_.size() - old);
      strings.insert(strings.end(), s, s + len);
      strings.push_back(0);
    }
    const uint32_t now = m->second;
    offsets.insert(offsets.end(), reinterpret_cast<const uint8_t*>(&now), reinterpret_cast<const uint8_t*>(&now) + 4);
  }

  // A relocatable ELF image of those sections under their plain names: libdw takes a file
  // with both .dwo and plain sections for a plain one, and the skeleton's .debug_addr is
  // plain.
  struct Part {
    const char* name;
    std::span<const uint8_t> bytes;
  };
  const Part parts[] = {{".debug_info", info},       {".debug_abbrev", abbrev},        {".debug_line", line},
                        {".debug_str_offsets", offsets}, {".debug_str", strings},    {".debug_rnglists", rnglists},
                        {".debug_addr", addr},       {".debug_ranges", ranges}};
  std::unique_ptr<Unit> u(new Unit());
  std::vector<uint8_t>& img = u->image_;
  img.resize(sizeof(Elf64_Ehdr));
  std::string shstr(1, '\0');
  std::vector<Elf64_Shdr> sh(1, Elf64_Shdr{});
  for (const Part& p : parts) {
    if (p.bytes.empty()) continue;
    Elf64_Shdr s{};
    s.sh_name = static_cast<uint32_t>(shstr.size());
    s.sh_type = SHT_PROGBITS;
    s.sh_offset = img.size();
    s.sh_size = p.bytes.size();
    s.sh_addralign = 1;
    shstr += p.name;
    shstr += '\0';
    img.insert(img.end(), p.bytes.begin(), p.bytes.end());
    sh.push_back(s);
  }
  Elf64_Shdr names{};
  names.sh_name = static_cast<uint32_t>(shstr.size());
  shstr += ".shstrtab";
  shstr += '\0';
  names.sh_type = SHT_STRTAB;
  names.sh_offset = img.size();
  names.sh_size = shstr.size();
  names.sh_addralign = 1;
  sh.push_back(names);
  img.insert(img.end(), shstr.begin(), shstr.end());
  img.resize((img.size() + 7) & ~size_t{7});
  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = ET_REL;
  eh.e_machine = EM_X86_64;
  eh.e_version = EV_CURRENT;
  eh.e_ehsize = sizeof eh;
  eh.e_shentsize = sizeof(Elf64_Shdr);
  eh.e_shnum = static_cast<uint16_t>(sh.size());
  eh.e_shstrndx = static_cast<uint16_t>(sh.size() - 1);
  eh.e_shoff = img.size();
  img.resize(img.size() + sh.size() * sizeof(Elf64_Shdr));
  std::memcpy(img.data() + eh.e_shoff, sh.data(), sh.size() * sizeof(Elf64_Shdr));
  std::memcpy(img.data(), &eh, sizeof eh);
  u->elf_ = elf_memory(reinterpret_cast<char*>(img.data()), img.size());
  if (!u->elf_) return nullptr;
  u->dw_ = dwarf_begin_elf(u->elf_, DWARF_C_READ, nullptr);
  if (!u->dw_) return nullptr;
  return u;
}

}  // namespace hpc::structure
