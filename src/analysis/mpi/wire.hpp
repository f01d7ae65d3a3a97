// Encoding of the records ranks exchange (little-endian; ranks of one job share a byte
// order). The reader checks every length, so a truncated message reads as failed.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "common/bytes.hpp"

namespace hpc::analysis::mpi {

inline void putStr(ByteWriter& w, const std::string& s) {
  w.le<uint32_t>(uint32_t(s.size()));
  w.str(s);
}

class WireReader {
public:
  explicit WireReader(std::span<const uint8_t> b) : b_(b) {}
  template <typename T> T get() {
    T v{};
    if (!need(sizeof(T))) return v;
    std::memcpy(&v, b_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  std::string str() {
    uint32_t n = get<uint32_t>();
    if (!need(n)) return {};
    std::string s(reinterpret_cast<const char*>(b_.data() + at_), n);
    at_ += n;
    return s;
  }
  bool failed() const { return failed_; }
  bool done() const { return at_ >= b_.size(); }
  void fail() { failed_ = true; }

private:
  bool need(uint64_t n) {
    if (failed_ || n > b_.size() - at_) failed_ = true;
    return !failed_;
  }
  std::span<const uint8_t> b_;
  uint64_t at_ = 0;
  bool failed_ = false;
};

}  // namespace hpc::analysis::mpi
