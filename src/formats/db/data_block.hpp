// Sparse value blocks and identifier tuples, shared by the whole-file and streaming writers.
#pragma once

#include "common/bytes.hpp"
#include "formats/db/db.hpp"

namespace hpc::db::detail {

struct BlockPtrs {
  uint64_t pValues = 0, pIdx = 0;
};

// Appends {Val}[] then (aligned to idxAlign) {Idx}[]; `base` is the file offset of w's
// current end. Empty blocks get null pointers. Sized once, then filled in place.
template <typename Key, typename Sub>
BlockPtrs put_block(ByteWriter& w, const Sparse<Key, Sub>& v, size_t idxAlign, uint64_t base) {
  BlockPtrs b;
  if (v.key.empty()) return b;
  constexpr size_t kVal = sizeof(Sub) + sizeof(double), kIdx = sizeof(Key) + sizeof(uint64_t);
  const uint64_t valueBytes = v.size() * kVal;
  const uint64_t pad = (idxAlign - (base + valueBytes) % idxAlign) % idxAlign;
  size_t at = w.size();
  w.zeros(valueBytes + pad + v.key.size() * kIdx);
  b.pValues = base;
  for (size_t i = 0; i < v.size(); ++i, at += kVal) {
    w.patch_le<Sub>(at, v.sub[i]);
    w.patch_le<double>(at + sizeof(Sub), v.value[i]);
  }
  at += pad;
  b.pIdx = base + valueBytes + pad;
  for (size_t i = 0; i < v.key.size(); ++i, at += kIdx) {
    w.patch_le<Key>(at, v.key[i]);
    w.patch_le<uint64_t>(at + sizeof(Key), v.start[i]);
  }
  return b;
}

// The bytes put_block appends at a base aligned to idxAlign.
template <typename Key, typename Sub>
uint64_t block_size(const Sparse<Key, Sub>& v, size_t idxAlign) {
  if (v.key.empty()) return 0;
  const uint64_t valueBytes = v.size() * (sizeof(Sub) + sizeof(double));
  return (valueBytes + idxAlign - 1) / idxAlign * idxAlign + v.key.size() * (sizeof(Key) + sizeof(uint64_t));
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
