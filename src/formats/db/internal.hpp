// Helpers shared by the v4 readers and writers (not part of the public API).
#pragma once

#include <bit>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/bytes.hpp"
#include "common/status.hpp"

namespace hpc::db::detail {

inline constexpr uint8_t kMajor = 4;
inline constexpr uint64_t kFileHeader = 0x10;

// A {sz,p} pair from a file header.
struct Section {
  uint64_t p = 0, sz = 0;
  std::string name;
  uint64_t end() const { return p + sz; }
  bool contains(uint64_t off, uint64_t len) const {
    return off >= p && len <= sz && off - p <= sz - len;
  }
};

// Checks magic, format, major version and footer; returns the `n` sections, each
// inside the file and 8-aligned.
Expected<std::vector<Section>> read_header(const ByteView& v, std::string_view format,
                                           std::string_view footer,
                                           std::initializer_list<const char*> names);

// OK iff [off, off+len) lies inside section `s`.
Status in_section(const ByteView& v, const Section& s, uint64_t off, uint64_t len,
                  std::string_view what);
// An array of n entries of `stride` bytes (at least `minSize`) at `p`: 8-aligned and inside
// section `s`. Shared by the whole-file and the mapped readers of the three data files.
Status check_table(const ByteView& v, const Section& s, uint64_t p, uint64_t n, uint64_t stride,
                   uint64_t minSize, std::string_view what);
// NUL-terminated string at `ptr`, fully inside section `s`.
Expected<std::string> str_in(const ByteView& v, const Section& s, uint64_t ptr,
                             std::string_view what);

// Packing order of {Ctx} flex sub-fields: each field takes the first free naturally
// aligned slot (two u32 may share a word even with a u64 between them).
class FlexAlloc {
public:
  uint32_t take(uint32_t size) {
    for (uint32_t at = 0;; at += size) {
      uint64_t mask = ((size == 64 ? ~0ull : (1ull << size) - 1)) << at;
      if ((claimed_ & mask) == 0) {
        claimed_ |= mask;
        return at;
      }
    }
  }
  uint32_t words() const {
    const uint32_t hi = claimed_ ? 64 - uint32_t(std::countl_zero(claimed_)) : 0;  // past the last byte
    return (hi + 7) / 8;
  }

private:
  uint64_t claimed_ = 0;  // one bit per byte; five fields never exceed 40 bytes
};

// Starts a file: magic, format, version 4.0 and `nSections` zeroed {sz,p} pairs.
void begin_file(ByteWriter& w, std::string_view format, size_t nSections);
void set_section(ByteWriter& w, size_t index, uint64_t p, uint64_t sz);

}  // namespace hpc::db::detail
