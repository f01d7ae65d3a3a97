// An ELF binary opened for analysis: its sections, function symbols and PLT stubs,
// and the bytes of its code. Owns the mapping and the libelf handle (libdw reads the
// DWARF through elf()).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/file.hpp"
#include "common/status.hpp"

typedef struct Elf Elf;

namespace hpc::structure {

struct Section {
  std::string name;
  uint64_t addr = 0, size = 0, offset = 0;
  uint32_t type = 0;
  uint32_t info = 0;  // sh_info (a CUDA .nv.info.<function>'s: its code section's index)
  uint64_t flags = 0;
  bool executable() const;
  bool contains(uint64_t a) const { return a >= addr && a < addr + size; }
};

// A function entry named by the symbol table or a PLT slot. size 0 means "unknown".
struct SymbolFunction {
  uint64_t addr = 0, size = 0;
  std::string name;
  bool global = false;
  bool plt = false;
  uint32_t symtab_index = 0;  // in .symtab (0: from .dynsym or a PLT slot), for nvdisasm -fun
};

class ElfImage {
public:
  // Fails with a message naming `path` when it is not a readable ELF file.
  static Expected<std::unique_ptr<ElfImage>> open(const std::string& path);
  ~ElfImage();
  ElfImage(const ElfImage&) = delete;
  ElfImage& operator=(const ElfImage&) = delete;

  const std::string& path() const { return path_; }
  uint16_t machine() const { return machine_; }
  uint32_t flags() const { return flags_; }  // e_flags (a cubin's SM version)
  uint64_t entry() const { return entry_; }  // e_entry (0 in a shared library without one)
  bool is_x86_64() const;
  bool is_cuda() const;
  Elf* elf() const { return elf_; }
  bool relocatable() const { return relocatable_; }
  std::span<const uint8_t> file_bytes() const { return file_->bytes(); }
  // A copy of the file whose debug sections have their relocations applied, for the
  // section layout above; empty when nothing needs relocating.
  std::vector<uint8_t> relocated_debug_copy() const;
  // The relocations of allocated code (a cubin's calls to other functions), by the address
  // they patch: the address of the symbol named plus the addend, or nothing where the
  // symbol is undefined (vprintf, resolved when the program is loaded).
  std::vector<std::pair<uint64_t, std::optional<uint64_t>>> code_relocations() const;
  const std::vector<Section>& sections() const { return sections_; }
  const Section* section_at(uint64_t addr) const;  // executable sections only
  const Section* section_named(std::string_view name) const;

  // Lets the kernel drop the file's pages from this process (they are read again on the
  // next access): memory does not grow with the code already analysed. Also returns the
  // free pages of malloc's arenas to the system (malloc_trim). MT: thread-safe.
  void release_pages() const;
  // release_pages() once this process holds more than 16 MiB of file pages beyond what it
  // held after the last release (or at opening; checked through /proc/self/statm). Cheap
  // enough to call every few procedures. MT: thread-safe.
  void release_pages_if_over() const;

  // Bytes of [addr, addr+len) from an allocated section with file contents, clipped to it.
  std::span<const uint8_t> code(uint64_t addr, uint64_t len) const;

  // FUNC symbols of .symtab and .dynsym (defined, in executable sections), one per
  // address, plus one entry per PLT slot; sorted by address.
  const std::vector<SymbolFunction>& functions() const { return functions_; }
  // Start addresses of FDEs in .eh_frame: procedure entries that survive stripping.
  const std::vector<std::pair<uint64_t, uint64_t>>& fde_ranges() const { return fdes_; }
  // Frees functions() and fde_ranges() (both empty afterwards): once the procedures are
  // known they are not needed, and they grow with the binary (some 80 bytes a procedure).
  void drop_symbols();
  // The function symbols of `debug`'s .symtab (a separate debug file of this binary, whose
  // own .symtab was stripped) join functions(), one per address as before: .symtab's names
  // over .dynsym's.
  void add_symbols_from(const ElfImage& debug);
  // The GNU build ID (.note.gnu.build-id), empty where there is none.
  std::vector<uint8_t> build_id() const;

private:
  ElfImage() = default;
  Status load();
  void read_symbols();
  // FUNC symbols of `elf`'s sections of type `want`, in the order read, where they fall in
  // this image's executable sections.
  void collect_symbols(Elf* elf, uint32_t want, bool relocatable, std::vector<SymbolFunction>& out) const;
  static void keep_one_per_address(std::vector<SymbolFunction>& all);
  void read_plt();
  void read_eh_frame();

  std::string path_;
  std::unique_ptr<MappedFile> file_;
  mutable std::atomic<size_t> file_pages_floor_{0};  // file pages resident after the last release
  Elf* elf_ = nullptr;
  uint16_t machine_ = 0;
  uint32_t flags_ = 0;
  uint64_t entry_ = 0;
  bool relocatable_ = false;  // symbol values are section-relative
  std::vector<Section> sections_;
  // The executable sections, in section order (section_at is asked for every call target
  // of a stripped binary: a pass over all sections each time was half of opening cc1plus).
  struct Executable {
    uint64_t begin, end;
    const Section* section;
  };
  std::vector<Executable> executable_;
  std::vector<SymbolFunction> functions_;
  std::vector<std::pair<uint64_t, uint64_t>> fdes_;
};

// A separate debug file for the binary at `path` (Debian's -dbgsym packages, `objcopy
// --only-keep-debug`): by its build ID under ROOT/.build-id/, else by its .gnu_debuglink
// name beside it, in its .debug/ directory or under ROOT/ and its directory; the ROOTs are
// $HPCTOOLKIT_DEBUG_DIRS (colon-separated), then /usr/lib/debug. A candidate with a build ID must have the binary's. Empty: none. With
// `opened`, the file's image, as this opened it to check it.
std::string find_debug_file(const ElfImage& image, std::unique_ptr<ElfImage>* opened = nullptr);

}  // namespace hpc::structure
