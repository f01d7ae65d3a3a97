#include <cstring>

#include "formats/db/internal.hpp"

namespace hpc::db::detail {

Expected<std::vector<Section>> read_header(const ByteView& v, std::string_view format,
                                           std::string_view footer,
                                           std::initializer_list<const char*> names) {
  HPC_RETURN_IF_ERROR(v.check(0, kFileHeader + 16 * names.size(), "a v4 database file header"));
  if (std::memcmp(v.bytes().data(), "HPCTOOLKIT", 10) != 0)
    return v.error(0, "expected magic \"HPCTOOLKIT\"");
  if (std::memcmp(v.bytes().data() + 10, format.data(), 4) != 0)
    return v.error(10, "expected format \"" + std::string(format) + "\"");
  if (v.bytes()[14] != kMajor)
    return v.error(14, "expected majorVersion 4, found " + std::to_string(v.bytes()[14]));
  if (v.size() < kFileHeader + 16 * names.size() + footer.size() ||
      std::memcmp(v.bytes().data() + v.size() - footer.size(), footer.data(), footer.size()) != 0)
    return v.error(v.size() < footer.size() ? 0 : v.size() - footer.size(),
                   "expected footer \"" + std::string(footer) + "\"");
  std::vector<Section> out;
  uint64_t at = kFileHeader;
  for (const char* n : names) {
    Section s;
    s.name = n;
    s.sz = v.load<uint64_t, std::endian::little>(at);
    s.p = v.load<uint64_t, std::endian::little>(at + 8);
    if (s.p % 8 != 0) return v.error(at + 8, std::string("expected 8-aligned p") + n);
    if (s.sz > v.size() || s.p > v.size() - s.sz)
      return v.error(at, std::string("expected section ") + n + " inside the file (size " +
                             hex(s.sz) + " at " + hex(s.p) + ")");
    out.push_back(std::move(s));
    at += 16;
  }
  return out;
}

Status check_table(const ByteView& v, const Section& s, uint64_t p, uint64_t n, uint64_t stride,
                   uint64_t minSize, std::string_view what) {
  if (n == 0) return Status();
  if (stride < minSize)
    return v.error(s.p, "expected the size of a " + std::string(what) + " to be at least " +
                            std::to_string(minSize) + ", found " + std::to_string(stride));
  if (p % 8 != 0) return v.error(s.p, "expected an 8-aligned pointer to the " + std::string(what) + " array");
  return in_section(v, s, p, n * stride, std::string(what) + " array");
}

Status in_section(const ByteView& v, const Section& s, uint64_t off, uint64_t len,
                  std::string_view what) {
  if (s.contains(off, len)) return Status();
  return v.error(off, "expected " + std::string(what) + " (" + hex(len) + " bytes) inside the " +
                          s.name + " section [" + hex(s.p) + ", " + hex(s.end()) + ")");
}

Expected<std::string> str_in(const ByteView& v, const Section& s, uint64_t ptr,
                             std::string_view what) {
  HPC_RETURN_IF_ERROR(in_section(v, s, ptr, 1, what));
  HPC_ASSIGN_OR_RETURN(std::string_view sv, v.cstr(ptr, s.end(), what));
  return std::string(sv);
}

void begin_file(ByteWriter& w, std::string_view format, size_t nSections) {
  w.str("HPCTOOLKIT");
  w.str(format.substr(0, 4));
  w.le<uint8_t>(kMajor);
  w.le<uint8_t>(0);
  w.zeros(16 * nSections);
}

void set_section(ByteWriter& w, size_t index, uint64_t p, uint64_t sz) {
  w.patch_le<uint64_t>(kFileHeader + 16 * index, sz);
  w.patch_le<uint64_t>(kFileHeader + 16 * index + 8, p);
}

}  // namespace hpc::db::detail
