// Reads the little-endian fields and LEB128 numbers of DWARF sections in memory; any read
// past the end makes ok() false and leaves the reader at the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace hpc::structure {

class DwarfReader {
public:
  DwarfReader(const uint8_t* p, const uint8_t* end) : p_(p), end_(end) {}
  bool ok() const { return ok_; }
  bool done() const { return p_ >= end_; }
  const uint8_t* pos() const { return p_; }
  size_t left() const { return static_cast<size_t>(end_ - p_); }
  uint64_t fixed(size_t n) {
    if (left() < n) return fail();
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k) v |= uint64_t(p_[k]) << (8 * k);
    p_ += n;
    return v;
  }
  uint64_t uleb() {
    uint64_t v = 0;
    for (int shift = 0; p_ < end_; shift += 7) {
      uint8_t b = *p_++;
      if (shift > 63 || (shift == 63 && (b & 0x7e))) return fail();  // more than 64 bits
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    return fail();
  }
  int64_t sleb() {
    uint64_t v = 0;
    for (int shift = 0; p_ < end_; shift += 7) {
      if (shift >= 63) return static_cast<int64_t>(fail());  // beyond what fits unambiguously
      uint8_t b = *p_++;
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) {
        if (shift + 7 < 64 && (b & 0x40)) v |= ~uint64_t(0) << (shift + 7);
        return static_cast<int64_t>(v);
      }
    }
    return static_cast<int64_t>(fail());
  }
  // The NUL-terminated string here (nullptr when unterminated).
  const char* cstr() {
    auto* nul = static_cast<const uint8_t*>(std::memchr(p_, 0, left()));
    if (!nul) return fail(), nullptr;
    const char* s = reinterpret_cast<const char*>(p_);
    p_ = nul + 1;
    return s;
  }
  void skip(size_t n) {
    if (left() < n) fail();
    else p_ += n;
  }

private:
  uint64_t fail() {
    ok_ = false;
    p_ = end_;
    return 0;
  }
  const uint8_t* p_;
  const uint8_t* end_;
  bool ok_ = true;
};

}  // namespace hpc::structure
