// DWARF packages (.dwp): the split units of a binary built with -gsplit-dwarf, packed by
// `dwp` (GNU, index version 2) or `llvm-dwp` (DWARF 5's index) into one file named after
// the binary. libdw (0.188) finds a split unit only in its own .dwo file; a package's
// units are handed to it one at a time, each as a small ELF image of its own.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/file.hpp"
#include "common/status.hpp"

typedef struct Dwarf Dwarf;
typedef struct Elf Elf;

namespace hpc::structure {

class ElfImage;

// The package that goes with a binary: "<binary>.dwp" beside it (also under the name its
// symbolic links resolve to), else beside its separate debug file. "" if none.
std::string find_package(const std::string& binary, const std::string& debugFile = "");

class DwarfPackage {
public:
  // nullptr and `why` set where the file is not a package this can read.
  static std::unique_ptr<DwarfPackage> open(const std::string& path, std::string* why);
  ~DwarfPackage();

  const std::string& path() const { return file_.path(); }
  size_t units() const { return rows_.size(); }
  bool has(uint64_t id) const { return rows_.count(id) != 0; }
  std::vector<uint64_t> ids() const;  // every unit's, in no particular order

  // One split unit, readable by libdw on its own: its contributions to the package's
  // sections, the strings it names, and the skeleton's part of .debug_addr (and, for GNU's
  // DWARF 4 form, of .debug_ranges), which its addresses and ranges index from their base.
  class Unit {
  public:
    ~Unit();
    Dwarf* dwarf() const { return dw_; }

  private:
    friend class DwarfPackage;
    std::vector<uint8_t> image_;
    Elf* elf_ = nullptr;
    Dwarf* dw_ = nullptr;
  };
  // nullptr where the package has no unit `id` or its contributions are out of bounds.
  // `addr` and `ranges` start at the skeleton's bases. MT: const, thread-safe.
  std::unique_ptr<Unit> unit(uint64_t id, std::span<const uint8_t> addr, std::span<const uint8_t> ranges) const;

private:
  explicit DwarfPackage(MappedFile f) : file_(std::move(f)) {}
  MappedFile file_;
  uint32_t version_ = 0;
  std::vector<uint32_t> columns_;  // section ids
  std::vector<uint32_t> table_;    // per row: offsets then sizes, one of each per column
  std::unordered_map<uint64_t, uint32_t> rows_;  // unit id -> row (0-based)
  std::span<const uint8_t> info_, abbrev_, line_, strOffsets_, str_, rnglists_;  // the package's sections
};

}  // namespace hpc::structure
