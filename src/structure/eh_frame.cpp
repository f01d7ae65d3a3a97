// .eh_frame walk: every FDE gives the [begin, end) of a procedure, which survives
// `strip` and so bounds procedures in binaries without a symbol table.
#include <algorithm>
#include <map>

#include "structure/elf_image.hpp"

namespace hpc::structure {
namespace {

class Cursor {
public:
  Cursor(std::span<const uint8_t> b, uint64_t pos) : b_(b), pos_(pos) {}
  bool ok() const { return ok_; }
  uint64_t pos() const { return pos_; }
  void seek(uint64_t p) { pos_ = p; }
  uint64_t u(int n) {
    if (pos_ + n > b_.size()) { ok_ = false; return 0; }
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t(b_[pos_ + i]) << (8 * i);
    pos_ += n;
    return v;
  }
  int64_t s(int n) {
    uint64_t v = u(n);
    int sh = 64 - 8 * n;
    return static_cast<int64_t>(v << sh) >> sh;
  }
  uint64_t uleb() {
    uint64_t v = 0;
    for (int sh = 0; ok_; sh += 7) {
      uint64_t byte = u(1);
      if (sh < 64) v |= (byte & 0x7f) << sh;
      if (!(byte & 0x80)) break;
    }
    return v;
  }
  int64_t sleb() {
    int64_t v = 0;
    int sh = 0;
    uint64_t byte = 0;
    do {
      byte = u(1);
      if (sh < 64) v |= int64_t(byte & 0x7f) << sh;
      sh += 7;
    } while ((byte & 0x80) && ok_);
    if (sh < 64 && (byte & 0x40)) v |= -(int64_t(1) << sh);
    return v;
  }
  std::string cstr() {
    std::string r;
    while (ok_) {
      auto c = u(1);
      if (!ok_ || c == 0) break;
      r.push_back(static_cast<char>(c));
    }
    return r;
  }
  // A DW_EH_PE-encoded pointer; `vaddr` is the address of the section start.
  uint64_t encoded(uint8_t enc, uint64_t vaddr) {
    if (enc == 0xff) return 0;
    uint64_t here = vaddr + pos_;
    uint64_t v = 0;
    switch (enc & 0x0f) {
      case 0x00: v = u(8); break;
      case 0x01: v = uleb(); break;
      case 0x02: v = u(2); break;
      case 0x03: v = u(4); break;
      case 0x04: v = u(8); break;
      case 0x09: v = sleb(); break;
      case 0x0a: v = s(2); break;
      case 0x0b: v = s(4); break;
      case 0x0c: v = s(8); break;
      default: ok_ = false; return 0;
    }
    if ((enc & 0x70) == 0x10) v += here;
    return v;
  }

private:
  std::span<const uint8_t> b_;
  uint64_t pos_;
  bool ok_ = true;
};

}  // namespace

void ElfImage::read_eh_frame() {
  const Section* eh = section_named(".eh_frame");
  if (!eh || eh->type == 8 /*SHT_NOBITS*/) return;
  auto bytes = file_->bytes().subspan(eh->offset, eh->size);
  std::map<uint64_t, uint8_t> cieEncoding;  // CIE offset -> FDE pointer encoding
  Cursor c(bytes, 0);
  while (c.ok() && c.pos() + 4 <= bytes.size()) {
    uint64_t start = c.pos();
    uint64_t len = c.u(4);
    if (len == 0) break;
    if (len == 0xffffffff) len = c.u(8);
    uint64_t body = c.pos();
    uint64_t next = body + len;
    if (!c.ok() || next > bytes.size()) break;
    uint64_t idPos = c.pos();
    uint64_t id = c.u(4);
    if (id == 0) {
      uint8_t version = static_cast<uint8_t>(c.u(1));
      std::string aug = c.cstr();
      uint8_t fdeEnc = 0;
      if (aug.find("eh") != std::string::npos) c.u(8);
      c.uleb();
      c.sleb();
      if (version == 1) c.u(1); else c.uleb();
      if (!aug.empty() && aug[0] == 'z') {
        c.uleb();
        for (size_t i = 1; i < aug.size() && c.ok(); ++i) {
          if (aug[i] == 'R') fdeEnc = static_cast<uint8_t>(c.u(1));
          else if (aug[i] == 'L') c.u(1);
          else if (aug[i] == 'P') c.encoded(static_cast<uint8_t>(c.u(1)) & 0x7f, eh->addr);
          else if (aug[i] != 'S' && aug[i] != 'B') break;
        }
      }
      cieEncoding[start] = fdeEnc;
    } else {
      auto it = cieEncoding.find(idPos - id);
      if (it != cieEncoding.end()) {
        uint64_t begin = c.encoded(it->second, eh->addr);
        uint64_t range = c.encoded(it->second & 0x0f, eh->addr);
        if (c.ok() && range != 0) fdes_.emplace_back(begin, begin + range);
      }
    }
    c.seek(next);
  }
  std::sort(fdes_.begin(), fdes_.end());
}

}  // namespace hpc::structure
