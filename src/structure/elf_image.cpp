#include "structure/elf_image.hpp"

#include <gelf.h>
#include <libelf.h>
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>

namespace hpc::structure {

#ifndef EM_CUDA
#define EM_CUDA 190
#endif

namespace {

// Resident file-backed (and shared) bytes of this process.
size_t resident_file_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long size = 0, resident = 0, shared = 0;
  int n = std::fscanf(f, "%lu %lu %lu", &size, &resident, &shared);
  std::fclose(f);
  return n == 3 ? shared * static_cast<size_t>(sysconf(_SC_PAGESIZE)) : 0;
}

}  // namespace

bool Section::executable() const { return (flags & SHF_EXECINSTR) != 0 && type == SHT_PROGBITS; }

bool ElfImage::is_x86_64() const { return machine_ == EM_X86_64; }
bool ElfImage::is_cuda() const { return machine_ == EM_CUDA; }

Expected<std::unique_ptr<ElfImage>> ElfImage::open(const std::string& path) {
  auto mapped = MappedFile::open(path);
  if (!mapped) return mapped.status();  // already names the file
  std::unique_ptr<ElfImage> img(new ElfImage());
  img->path_ = path;
  img->file_ = std::make_unique<MappedFile>(std::move(*mapped));
  img->file_pages_floor_ = resident_file_bytes();
  Status st = img->load();
  if (!st) return st.prepend(path);
  return img;
}

ElfImage::~ElfImage() {
  if (elf_) elf_end(elf_);
}

Status ElfImage::load() {
  elf_version(EV_CURRENT);
  auto bytes = file_->bytes();
  if (bytes.size() < 16 || std::memcmp(bytes.data(), ELFMAG, SELFMAG) != 0)
    return Status::error("not an ELF file");
  // libelf wants a mutable pointer but ELF_C_READ_MEMORY never writes through it.
  elf_ = elf_memory(reinterpret_cast<char*>(const_cast<uint8_t*>(bytes.data())), bytes.size());
  if (!elf_ || elf_kind(elf_) != ELF_K_ELF)
    return Status::error(std::string("malformed ELF: ") + elf_errmsg(-1));
  GElf_Ehdr eh;
  if (!gelf_getehdr(elf_, &eh)) return Status::error(std::string("malformed ELF header: ") + elf_errmsg(-1));
  if (eh.e_ident[EI_CLASS] != ELFCLASS64) return Status::error("only 64-bit ELF binaries are supported");
  machine_ = eh.e_machine;
  flags_ = eh.e_flags;
  entry_ = eh.e_entry;
  relocatable_ = eh.e_type == ET_REL || machine_ == EM_CUDA;
  // A file cut short (a copy or a build interrupted) has its section headers, at the end,
  // past its end: libelf then lists no sections, and the binary would seem to have no code.
  const uint64_t headers = eh.e_shoff + uint64_t(std::max<uint16_t>(eh.e_shnum, 1)) * eh.e_shentsize;
  if (eh.e_shoff != 0 && (eh.e_shoff >= bytes.size() || headers > bytes.size()))
    return Status::error("section header table at offset " + std::to_string(eh.e_shoff) + " (" +
                         std::to_string(eh.e_shnum) + " headers) extends past the end of the file (" +
                         std::to_string(bytes.size()) + " bytes): truncated?");
  size_t shstrndx = 0;
  if (elf_getshdrstrndx(elf_, &shstrndx) != 0)
    return Status::error(std::string("malformed section header table: ") + elf_errmsg(-1));
  for (Elf_Scn* scn = elf_nextscn(elf_, nullptr); scn; scn = elf_nextscn(elf_, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh)) return Status::error("malformed section header");
    Section s;
    const char* nm = elf_strptr(elf_, shstrndx, sh.sh_name);
    s.name = nm ? nm : "";
    s.addr = sh.sh_addr;
    s.size = sh.sh_size;
    s.offset = sh.sh_offset;
    s.type = sh.sh_type;
    s.info = sh.sh_info;
    s.flags = sh.sh_flags;
    // Relocatable code (CUDA cubins) is laid out at its file offsets, as the
    // reference does, so that every section has distinct addresses.
    if ((eh.e_type == ET_REL || machine_ == EM_CUDA) && (s.flags & SHF_ALLOC) && s.addr == 0) s.addr = s.offset;
    // (Compared without the sum, which a damaged header can wrap around to a small number.)
    if (s.type != SHT_NOBITS && (s.offset > bytes.size() || s.size > bytes.size() - s.offset))
      return Status::error("section " + s.name + " extends past the end of the file");
    sections_.push_back(std::move(s));
  }
  for (const Section& sec : sections_)
    if (sec.executable()) executable_.push_back({sec.addr, sec.addr + sec.size, &sec});
  read_symbols();
  read_plt();
  read_eh_frame();
  std::sort(functions_.begin(), functions_.end(),
            [](const SymbolFunction& a, const SymbolFunction& b) { return a.addr < b.addr; });
  return Status();
}

const Section* ElfImage::section_at(uint64_t addr) const {
  for (const Executable& e : executable_)
    if (addr >= e.begin && addr < e.end) return e.section;
  return nullptr;
}

const Section* ElfImage::section_named(std::string_view name) const {
  for (const auto& s : sections_)
    if (s.name == name) return &s;
  return nullptr;
}

void ElfImage::release_pages() const {
  auto bytes = file_->bytes();
  if (bytes.empty()) return;
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  auto lo = reinterpret_cast<uintptr_t>(bytes.data()) & ~(page - 1);
  auto hi = reinterpret_cast<uintptr_t>(bytes.data()) + bytes.size();
  // A private read-only file mapping: dropped pages come back from the file unchanged.
  madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
  // Memory freed inside malloc's arenas (DWARF units evicted, procedures written) stays
  // resident until trimmed: with two threads, about a third of the heap at -j2.
  malloc_trim(0);
}

void ElfImage::drop_symbols() {
  std::vector<SymbolFunction>().swap(functions_);
  std::vector<std::pair<uint64_t, uint64_t>>().swap(fdes_);
}

void ElfImage::release_pages_if_over() const {
  // A larger slack saves little CPU now that libdw's handle is seldom renewed (a new one
  // reads the unit headers again, faulting their pages back in): at x64, 64 MiB saved 2 %
  // of the CPU time for 75 MiB more peak.
  constexpr size_t kSlack = size_t(16) << 20;
  if (resident_file_bytes() <= file_pages_floor_.load(std::memory_order_relaxed) + kSlack) return;
  release_pages();
  // What stays resident is other files' (the program, its libraries): not counted against us.
  file_pages_floor_.store(resident_file_bytes(), std::memory_order_relaxed);
}

std::span<const uint8_t> ElfImage::code(uint64_t addr, uint64_t len) const {
  for (const auto& s : sections_) {
    if (s.type == SHT_NOBITS || !(s.flags & SHF_ALLOC) || !s.contains(addr)) continue;
    uint64_t n = std::min(len, s.addr + s.size - addr);
    return file_->bytes().subspan(s.offset + (addr - s.addr), n);
  }
  return {};
}

void ElfImage::collect_symbols(Elf* elf, uint32_t want, bool relocatable, std::vector<SymbolFunction>& out) const {
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type != want || sh.sh_entsize == 0) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (!data) continue;
    size_t n = sh.sh_size / sh.sh_entsize;
    for (size_t i = 0; i < n; ++i) {
      GElf_Sym sym;
      if (!gelf_getsym(data, static_cast<int>(i), &sym)) break;
      if (GELF_ST_TYPE(sym.st_info) != STT_FUNC && GELF_ST_TYPE(sym.st_info) != STT_GNU_IFUNC) continue;
      if (sym.st_shndx == SHN_UNDEF || sym.st_shndx >= SHN_LORESERVE) continue;
      const char* nm = elf_strptr(elf, sh.sh_link, sym.st_name);
      if (!nm || !*nm) continue;
      uint64_t value = sym.st_value;
      if (relocatable) {
        if (sym.st_shndx >= sections_.size() + 1) continue;
        value += sections_[sym.st_shndx - 1].addr;
      }
      if (!section_at(value)) continue;
      SymbolFunction f{value, sym.st_size, nm, GELF_ST_BIND(sym.st_info) != STB_LOCAL, false,
                       want == SHT_SYMTAB ? static_cast<uint32_t>(i) : 0};
      // Versioned dynamic names ("f@@V1") are reported by their plain name.
      if (auto at = f.name.find('@'); at != std::string::npos && want == SHT_DYNSYM) f.name.resize(at);
      out.push_back(std::move(f));
    }
  }
}

void ElfImage::keep_one_per_address(std::vector<SymbolFunction>& all) {
  std::stable_sort(all.begin(), all.end(), [](const SymbolFunction& a, const SymbolFunction& b) { return a.addr < b.addr; });
  // Each address's symbols in the order read: the first is kept unless a later one says more.
  size_t kept = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    if (kept == 0 || all[kept - 1].addr != all[i].addr) {
      if (kept != i) all[kept] = std::move(all[i]);
      ++kept;
      continue;
    }
    SymbolFunction& have = all[kept - 1];
    SymbolFunction& f = all[i];
    if (f.symtab_index != 0 && f.global && !have.global) {  // from .symtab: its index is never 0
      have = std::move(f);
    } else if (have.size == 0 && f.size != 0) {
      have.size = f.size;
    }
  }
  all.resize(kept);
  all.shrink_to_fit();
}

void ElfImage::read_symbols() {
  // Every symbol in the order read, then one per address: .symtab wins over .dynsym, global
  // over local names. (A vector, not a map: a map node would double the memory of a binary
  // of millions of symbols.)
  std::vector<SymbolFunction> all;
  collect_symbols(elf_, SHT_SYMTAB, relocatable_, all);
  collect_symbols(elf_, SHT_DYNSYM, relocatable_, all);
  keep_one_per_address(all);
  functions_ = std::move(all);
}

void ElfImage::add_symbols_from(const ElfImage& debug) {
  std::vector<SymbolFunction> all;
  collect_symbols(debug.elf_, SHT_SYMTAB, debug.relocatable_, all);
  if (all.empty()) return;
  // The debug file's .symtab first, as a .symtab is read before .dynsym; PLT slots (no
  // symbol of either names them) stay as they were.
  all.insert(all.end(), std::make_move_iterator(functions_.begin()), std::make_move_iterator(functions_.end()));
  keep_one_per_address(all);
  functions_ = std::move(all);
}

std::vector<uint8_t> ElfImage::build_id() const {
  for (const Section& s : sections_) {
    if (s.type != SHT_NOTE || s.name != ".note.gnu.build-id") continue;
    auto bytes = file_bytes();
    if (s.offset > bytes.size() || s.size > bytes.size() - s.offset || s.size < 16) return {};
    auto note = bytes.subspan(s.offset, s.size);
    uint32_t namesz, descsz, type;
    std::memcpy(&namesz, note.data(), 4);
    std::memcpy(&descsz, note.data() + 4, 4);
    std::memcpy(&type, note.data() + 8, 4);
    const uint64_t desc = 12 + ((uint64_t(namesz) + 3) & ~uint64_t(3));
    if (type != NT_GNU_BUILD_ID || namesz != 4 || std::memcmp(note.data() + 12, "GNU", 4) != 0 || descsz == 0 ||
        desc + descsz > note.size())
      return {};
    return {note.begin() + desc, note.begin() + desc + descsz};
  }
  return {};
}

std::string find_debug_file(const ElfImage& image, std::unique_ptr<ElfImage>* opened) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::vector<uint8_t> id = image.build_id();
  fs::path self = fs::weakly_canonical(image.path(), ec);
  if (ec) self = image.path();
  auto usable = [&](const fs::path& p) -> bool {
    std::error_code e;
    if (!fs::is_regular_file(p, e) || fs::equivalent(p, self, e)) return false;
    auto other = ElfImage::open(p.string());
    if (!other.ok() || (*other)->machine() != image.machine()) return false;
    if (!id.empty()) {
      const std::vector<uint8_t> theirs = (*other)->build_id();
      if (!theirs.empty() && theirs != id) return false;
    }
    if (!(*other)->section_named(".debug_info") && !(*other)->section_named(".symtab")) return false;
    if (opened) *opened = std::move(*other);  // not opened twice
    return true;
  };
  // The directories of debug files: $HPCTOOLKIT_DEBUG_DIRS (colon-separated: a Spack or
  // module tree that keeps its own), then the system's.
  std::vector<fs::path> roots;
  if (const char* env = std::getenv("HPCTOOLKIT_DEBUG_DIRS"))
    for (std::string_view rest = env; !rest.empty();) {
      const size_t colon = rest.find(':');
      if (colon != 0) roots.emplace_back(std::string(rest.substr(0, colon)));
      rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
    }
  roots.emplace_back("/usr/lib/debug");
  if (id.size() >= 2) {
    static const char* hexdigits = "0123456789abcdef";
    std::string hex;
    for (uint8_t b : id) hex += {hexdigits[b >> 4], hexdigits[b & 15]};
    for (const fs::path& root : roots) {
      fs::path p = root / ".build-id" / hex.substr(0, 2) / (hex.substr(2) + ".debug");
      if (usable(p)) return p.string();
    }
  }
  if (const Section* link = image.section_named(".gnu_debuglink"); link && link->type != SHT_NOBITS) {
    auto bytes = image.file_bytes();
    if (link->offset < bytes.size() && link->size <= bytes.size() - link->offset) {
      auto data = bytes.subspan(link->offset, link->size);
      const auto* begin = reinterpret_cast<const char*>(data.data());
      const std::string name(begin, strnlen(begin, data.size()));
      if (!name.empty() && name.find('/') == std::string::npos) {
        const fs::path dir = self.parent_path();
        std::vector<fs::path> candidates{dir / name, dir / ".debug" / name};
        for (const fs::path& root : roots) candidates.push_back(root / dir.relative_path() / name);
        for (const fs::path& p : candidates)
          if (usable(p)) return p.string();
      }
    }
  }
  return {};
}

// PLT slots are named after the symbol of their JUMP_SLOT relocation ("printf@plt");
// slots without a relocation we can tie to them (.plt.got) get a "targ<addr>@plt" name.
void ElfImage::read_plt() {
  std::vector<std::string> slotNames;
  for (Elf_Scn* scn = elf_nextscn(elf_, nullptr); scn; scn = elf_nextscn(elf_, scn)) {
    GElf_Shdr sh;
    if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA || sh.sh_entsize == 0) continue;
    size_t shstrndx = 0;
    elf_getshdrstrndx(elf_, &shstrndx);
    const char* nm = elf_strptr(elf_, shstrndx, sh.sh_name);
    if (!nm || std::strcmp(nm, ".rela.plt") != 0) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    Elf_Scn* symscn = elf_getscn(elf_, sh.sh_link);
    GElf_Shdr symsh;
    if (!data || !symscn || !gelf_getshdr(symscn, &symsh)) continue;
    Elf_Data* symdata = elf_getdata(symscn, nullptr);
    size_t n = sh.sh_size / sh.sh_entsize;
    for (size_t i = 0; i < n; ++i) {
      GElf_Rela r;
      if (!gelf_getrela(data, static_cast<int>(i), &r)) break;
      std::string name;
      GElf_Sym sym;
      if (symdata && GELF_R_SYM(r.r_info) != 0 && gelf_getsym(symdata, GELF_R_SYM(r.r_info), &sym)) {
        const char* s = elf_strptr(elf_, symsh.sh_link, sym.st_name);
        if (s) name = s;
      }
      slotNames.push_back(std::move(name));
    }
  }
  auto add = [&](uint64_t addr, uint64_t size, std::string name) {
    if (name.empty()) name = "targ" + [&] {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(addr));
      return std::string(buf);
    }();
    functions_.push_back(SymbolFunction{addr, size, name + "@plt", true, true});
  };
  // Only slots with bytes in the file (a damaged header's NOBITS ".plt" may claim any size).
  auto slots = [this](const char* name) -> const Section* {
    const Section* s = section_named(name);
    return s && s->type != SHT_NOBITS ? s : nullptr;
  };
  const Section* plt = slots(".plt");
  const Section* pltsec = slots(".plt.sec");
  if (pltsec) {
    for (size_t i = 0; i * 16 + 16 <= pltsec->size; ++i)
      add(pltsec->addr + i * 16, 16, i < slotNames.size() ? slotNames[i] : "");
  } else if (plt && plt->size >= 32) {
    // Slot 0 is the resolver trampoline, not a function.
    for (size_t i = 1; i * 16 + 16 <= plt->size; ++i)
      add(plt->addr + i * 16, 16, i - 1 < slotNames.size() ? slotNames[i - 1] : "");
  }
  if (const Section* got = slots(".plt.got")) {
    uint64_t step = pltsec ? 16 : 8;
    for (uint64_t off = 0; off + step <= got->size; off += step) add(got->addr + off, step, "");
  }
  // A PLT slot shadows any symbol the linker placed at the same address.
  std::sort(functions_.begin(), functions_.end(), [](const SymbolFunction& a, const SymbolFunction& b) {
    return a.addr != b.addr ? a.addr < b.addr : a.plt > b.plt;
  });
  functions_.erase(std::unique(functions_.begin(), functions_.end(),
                               [](const SymbolFunction& a, const SymbolFunction& b) { return a.addr == b.addr; }),
                   functions_.end());
}

}  // namespace hpc::structure
