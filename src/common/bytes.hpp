// Bounds-checked access to the bytes of a file. Readers never trust a length, count
// or offset: every access is checked against the buffer and a failure names the
// file, the offset and what was expected (STYLE.md, "Formats are byte-exact").
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.hpp"

namespace hpc {

std::string hex(uint64_t v);

// Random access over an immutable byte buffer (usually a MappedFile).
class ByteView {
public:
  ByteView() = default;
  ByteView(std::span<const uint8_t> bytes, std::string name) : b_(bytes), name_(std::move(name)) {}

  size_t size() const { return b_.size(); }
  const std::string& name() const { return name_; }
  std::span<const uint8_t> bytes() const { return b_; }

  // Error naming the file and offset: "<file>: offset 0x1c: <what>".
  Status error(uint64_t offset, std::string_view what) const;

  // OK iff [offset, offset+len) lies inside the buffer; `what` names the field.
  Status check(uint64_t offset, uint64_t len, std::string_view what) const;

  template <typename T> Expected<T> le(uint64_t offset, std::string_view what) const {
    HPC_RETURN_IF_ERROR(check(offset, sizeof(T), what));
    return load<T, std::endian::little>(offset);
  }
  template <typename T> Expected<T> be(uint64_t offset, std::string_view what) const {
    HPC_RETURN_IF_ERROR(check(offset, sizeof(T), what));
    return load<T, std::endian::big>(offset);
  }
  // NUL-terminated string starting at offset, which must end before `limit`.
  Expected<std::string_view> cstr(uint64_t offset, uint64_t limit, std::string_view what) const;

  // Unchecked loads, for callers that checked a whole region already.
  template <typename T, std::endian E> T load(uint64_t offset) const {
    T v;
    std::memcpy(&v, b_.data() + offset, sizeof(T));
    if constexpr (E != std::endian::native && sizeof(T) > 1) v = byteswap(v);
    return v;
  }

private:
  template <typename T> static T byteswap(T v) {
    if constexpr (std::is_floating_point_v<T>) {
      using U = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;
      U u = std::bit_cast<U>(v);
      return std::bit_cast<T>(byteswap(u));
    } else {
      using U = std::make_unsigned_t<T>;
      U u = static_cast<U>(v), r = 0;
      for (size_t i = 0; i < sizeof(T); ++i) r = static_cast<U>((r << 8) | ((u >> (8 * i)) & 0xff));
      return static_cast<T>(r);
    }
  }
  std::span<const uint8_t> b_;
  std::string name_;
};

// Sequential reader over a ByteView: a cursor that advances with each field.
class ByteCursor {
public:
  ByteCursor(const ByteView& view, uint64_t offset = 0) : v_(&view), off_(offset) {}
  uint64_t offset() const { return off_; }
  void seek(uint64_t offset) { off_ = offset; }
  bool at_end() const { return off_ >= v_->size(); }
  uint64_t remaining() const { return off_ >= v_->size() ? 0 : v_->size() - off_; }
  const ByteView& view() const { return *v_; }

  template <typename T> Expected<T> be(std::string_view what) {
    auto r = v_->be<T>(off_, what);
    if (r.ok()) off_ += sizeof(T);
    return r;
  }
  template <typename T> Expected<T> le(std::string_view what) {
    auto r = v_->le<T>(off_, what);
    if (r.ok()) off_ += sizeof(T);
    return r;
  }
  Expected<std::span<const uint8_t>> take(uint64_t len, std::string_view what);

private:
  const ByteView* v_;
  uint64_t off_;
};

// Growable output buffer with explicit-endian appends and patching.
class ByteWriter {
public:
  size_t size() const { return buf_.size(); }
  std::vector<uint8_t>& buffer() { return buf_; }
  const std::vector<uint8_t>& buffer() const { return buf_; }

  template <typename T> void le(T v) { put<T, std::endian::little>(v); }
  template <typename T> void be(T v) { put<T, std::endian::big>(v); }
  template <typename T> void patch_le(size_t at, T v) { store<T, std::endian::little>(at, v); }
  template <typename T> void patch_be(size_t at, T v) { store<T, std::endian::big>(at, v); }
  void bytes(const void* p, size_t n) {
    auto c = static_cast<const uint8_t*>(p);
    buf_.insert(buf_.end(), c, c + n);
  }
  void str(std::string_view s) { bytes(s.data(), s.size()); }
  void cstr(std::string_view s) { str(s); buf_.push_back(0); }
  void zeros(size_t n) { buf_.resize(buf_.size() + n, 0); }
  void align(size_t a) { zeros((a - buf_.size() % a) % a); }

private:
  template <typename T, std::endian E> void put(T v) {
    size_t at = buf_.size();
    buf_.resize(at + sizeof(T));
    store<T, E>(at, v);
  }
  template <typename T, std::endian E> void store(size_t at, T v) {
    uint8_t tmp[sizeof(T)];
    std::memcpy(tmp, &v, sizeof(T));
    if constexpr (E != std::endian::native)
      for (size_t i = 0; i < sizeof(T) / 2; ++i) std::swap(tmp[i], tmp[sizeof(T) - 1 - i]);
    std::memcpy(buf_.data() + at, tmp, sizeof(T));
  }
  std::vector<uint8_t> buf_;
};

}  // namespace hpc
