#include "common/bytes.hpp"

#include <cstdio>

namespace hpc {

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

Status ByteView::error(uint64_t offset, std::string_view what) const {
  return Status::error(name_ + ": offset " + hex(offset) + ": " + std::string(what));
}

Status ByteView::check(uint64_t offset, uint64_t len, std::string_view what) const {
  if (offset > b_.size() || len > b_.size() - offset)
    return error(offset, "expected " + std::string(what) + " (" + std::to_string(len) +
                             " bytes), but the file ends at " + hex(b_.size()));
  return Status();
}

Expected<std::string_view> ByteView::cstr(uint64_t offset, uint64_t limit,
                                          std::string_view what) const {
  if (limit > b_.size()) limit = b_.size();
  if (offset >= limit)
    return error(offset, "expected " + std::string(what) + " (a string) inside its section, which ends at " + hex(limit));
  auto begin = reinterpret_cast<const char*>(b_.data() + offset);
  auto nul = static_cast<const char*>(std::memchr(begin, 0, limit - offset));
  if (!nul) return error(offset, std::string(what) + " is not NUL-terminated before " + hex(limit));
  return std::string_view(begin, nul - begin);
}

Expected<std::span<const uint8_t>> ByteCursor::take(uint64_t len, std::string_view what) {
  HPC_RETURN_IF_ERROR(v_->check(off_, len, what));
  auto s = v_->bytes().subspan(off_, len);
  off_ += len;
  return s;
}

}  // namespace hpc
