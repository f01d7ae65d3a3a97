// Sparse value blocks and identifier tuples, shared by the whole-file and streaming writers.
#pragma once

#include <bit>
#include <cstring>
#include <type_traits>

#include "common/bytes.hpp"
#include "formats/db/db.hpp"

namespace hpc::db::detail {

struct BlockPtrs {
  uint64_t pValues = 0, pIdx = 0;
};

// The bytes put_block appends at a base aligned to idxAlign (at any base: an upper bound).
template <typename V>
uint64_t block_size(const V& v, size_t idxAlign) {
  using Key = std::remove_cvref_t<decltype(v.key[0])>;
  using Sub = std::remove_cvref_t<decltype(v.sub[0])>;
  if (v.key.empty()) return 0;
  const uint64_t valueBytes = v.size() * (sizeof(Sub) + sizeof(double));
  return (valueBytes + idxAlign - 1) / idxAlign * idxAlign + v.key.size() * (sizeof(Key) + sizeof(uint64_t));
}

// The bytes encode_block writes at `base`.
template <typename V>
uint64_t block_size(const V& v, size_t idxAlign, uint64_t base) {
  using Key = std::remove_cvref_t<decltype(v.key[0])>;
  using Sub = std::remove_cvref_t<decltype(v.sub[0])>;
  if (v.key.empty()) return 0;
  const uint64_t valueBytes = v.size() * (sizeof(Sub) + sizeof(double));
  const uint64_t pad = (idxAlign - (base + valueBytes) % idxAlign) % idxAlign;
  return valueBytes + pad + v.key.size() * (sizeof(Key) + sizeof(uint64_t));
}


// Values [from, from + n) of a block as {Val}[] to `out` (n * (sizeof(Sub) + 8) bytes).
template <typename V>
void encode_values(uint8_t* out, const V& v, size_t from, size_t n) {
  using Sub = std::remove_cvref_t<decltype(v.sub[0])>;
  static_assert(std::endian::native == std::endian::little, "the database is little-endian");
  for (size_t i = from; i < from + n; ++i, out += sizeof(Sub) + sizeof(double)) {
    const Sub sub = v.sub[i];
    const double value = v.value[i];
    std::memcpy(out, &sub, sizeof(Sub));
    std::memcpy(out + sizeof(Sub), &value, sizeof(double));
  }
}

// Index entries [from, from + n) of a block as {Idx}[] to `out` (n * (sizeof(Key) + 8) bytes).
template <typename V>
void encode_index(uint8_t* out, const V& v, size_t from, size_t n) {
  using Key = std::remove_cvref_t<decltype(v.key[0])>;
  uint64_t first = 0;  // views may hold starts from elsewhere
  if constexpr (requires { v.base; }) first = v.base;
  for (size_t i = from; i < from + n; ++i, out += sizeof(Key) + sizeof(uint64_t)) {
    const Key key = v.key[i];
    const uint64_t start = v.start[i] - first;
    std::memcpy(out, &key, sizeof(Key));
    std::memcpy(out + sizeof(Key), &start, sizeof(uint64_t));
  }
}

// Writes {Val}[] then (aligned to idxAlign) {Idx}[] to `out`, block_size() bytes, every
// one of them (padding zeroed); `base` is the file offset of out[0]. Empty blocks get null
// pointers and no bytes.
template <typename V>
BlockPtrs encode_block(uint8_t* out, const V& v, size_t idxAlign, uint64_t base) {
  using Sub = std::remove_cvref_t<decltype(v.sub[0])>;
  BlockPtrs b;
  if (v.key.empty()) return b;
  constexpr size_t kVal = sizeof(Sub) + sizeof(double);
  const uint64_t valueBytes = v.size() * kVal;
  const uint64_t pad = (idxAlign - (base + valueBytes) % idxAlign) % idxAlign;
  b.pValues = base;
  encode_values(out, v, 0, v.size());
  std::memset(out + valueBytes, 0, pad);
  b.pIdx = base + valueBytes + pad;
  encode_index(out + valueBytes + pad, v, 0, v.key.size());
  return b;
}

// Appends encode_block's bytes to w; `base` is the file offset of w's current end.
template <typename Key, typename Sub>
BlockPtrs put_block(ByteWriter& w, const Sparse<Key, Sub>& v, size_t idxAlign, uint64_t base) {
  if (v.key.empty()) return {};
  const size_t at = w.size();
  w.zeros(block_size(v, idxAlign, base));
  return encode_block(w.buffer().data() + at, v, idxAlign, base);
}

// The 0x20-byte {PSVB}/{CSVB} header at `at` (count fields are u32 / u16 by layout).
template <typename W>
void patch_block_header(W& w, size_t at, const BlockPtrs& b, uint64_t nValues, uint64_t nIdx) {
  w.template patch_le<uint64_t>(at, nValues);
  w.template patch_le<uint64_t>(at + 8, b.pValues);
  w.template patch_le<uint32_t>(at + 0x10, uint32_t(nIdx));  // u16 nMetrics + zero pad in cct.db
  w.template patch_le<uint64_t>(at + 0x18, b.pIdx);
}

inline void put_id_tuple(ByteWriter& w, const std::vector<Identifier>& ids) {
  w.le<uint16_t>(uint16_t(ids.size()));
  w.zeros(6);
  for (auto& id : ids) {
    w.le<uint8_t>(id.kind);
    w.le<uint8_t>(0);
    w.le<uint16_t>(id.flags);
    w.le<uint32_t>(id.logicalId);
    w.le<uint64_t>(id.physicalId);
  }
}

}  // namespace hpc::db::detail
