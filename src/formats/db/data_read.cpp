// profile.db, cct.db and trace.db v4 readers.
#include "formats/db/db.hpp"
#include "formats/db/internal.hpp"

namespace hpc::db {
namespace {
using detail::check_table;
using detail::in_section;
using detail::Section;

template <typename T> T ld(const ByteView& v, uint64_t off) {
  return v.load<T, std::endian::little>(off);
}


// A sparse block: nValues {Val} of `valSize` at pValues, nIdx {Idx} of `idxSize` at pIdx.
// `budget` bounds the total number of values read from one file (blocks may not overlap).
template <typename Key, typename Sub, typename SubRaw>
Status read_block(const ByteView& v, uint64_t at, uint64_t nValues, uint64_t pValues, uint64_t nIdx,
                  uint64_t pIdx, uint64_t valSize, uint64_t idxSize, uint64_t& budget,
                  Sparse<Key, Sub>& out) {
  if (nValues > budget) return v.error(at, "expected nValues within the file's size");
  budget -= nValues;
  if (nIdx > nValues) return v.error(at, "expected no more indices than values");
  if (nValues > 0) HPC_RETURN_IF_ERROR(v.check(pValues, nValues * valSize, "the values array"));
  if (nIdx > 0) HPC_RETURN_IF_ERROR(v.check(pIdx, nIdx * idxSize, "the index array"));
  if (nIdx == 0 && nValues != 0) return v.error(at, "expected values only with an index");
  const bool keyFirst32 = sizeof(Key) == 4;  // profile.db {Idx}: u32 ctxId; cct.db: u16 metricId
  out.key.reserve(nIdx);
  out.sub.reserve(nValues);
  out.value.reserve(nValues);
  out.start.clear();
  for (uint64_t i = 0; i < nIdx; ++i) {
    uint64_t a = pIdx + i * idxSize;
    Key k = keyFirst32 ? Key(ld<uint32_t>(v, a)) : Key(ld<uint16_t>(v, a));
    uint64_t startIdx = ld<uint64_t>(v, a + (keyFirst32 ? 4 : 2));
    if (i == 0 && startIdx != 0) return v.error(a, "expected the first startIndex to be 0");
    if (i > 0 && startIdx < out.start.back()) return v.error(a, "expected startIndex non-decreasing");
    if (startIdx > nValues) return v.error(a, "expected startIndex <= nValues");
    out.key.push_back(k);
    out.start.push_back(startIdx);
  }
  out.start.push_back(nValues);
  for (uint64_t i = 0; i < nValues; ++i) {
    uint64_t a = pValues + i * valSize;
    Sub s = Sub(ld<SubRaw>(v, a));
    out.push(s, ld<double>(v, a + sizeof(SubRaw)));
  }
  return Status();
}

}  // namespace

Expected<std::vector<Profile>> read_profile_db(const ByteView& v) {
  HPC_ASSIGN_OR_RETURN(auto sec, detail::read_header(v, "prof", "_prof.db", {"ProfileInfos", "IdTuples"}));
  const Section& s = sec[0];
  HPC_RETURN_IF_ERROR(in_section(v, s, s.p, 0xd, "Profile Info header"));
  uint64_t p = ld<uint64_t>(v, s.p);
  uint32_t n = ld<uint32_t>(v, s.p + 8);
  uint8_t sz = ld<uint8_t>(v, s.p + 0xc);
  HPC_RETURN_IF_ERROR(check_table(v, s, p, n, sz, 0x2c, "{PI}"));
  uint64_t budget = v.size() / 10;
  std::vector<Profile> out;
  out.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    uint64_t a = p + uint64_t(i) * sz;
    Profile pr;
    pr.flags = ld<uint32_t>(v, a + 0x28);
    if (uint64_t pt = ld<uint64_t>(v, a + 0x20)) {
      if (pt % 8 != 0) return v.error(a + 0x20, "expected an 8-aligned pIdTuple");
      HPC_RETURN_IF_ERROR(in_section(v, sec[1], pt, 8, "an identifier tuple"));
      uint16_t nIds = ld<uint16_t>(v, pt);
      HPC_RETURN_IF_ERROR(in_section(v, sec[1], pt, 8 + 16 * uint64_t(nIds), "an identifier tuple"));
      std::vector<Identifier> ids;
      for (uint32_t j = 0; j < nIds; ++j) {
        uint64_t b = pt + 8 + 16 * uint64_t(j);
        ids.push_back({ld<uint8_t>(v, b), ld<uint16_t>(v, b + 2), ld<uint32_t>(v, b + 4), ld<uint64_t>(v, b + 8)});
      }
      pr.idTuple = std::move(ids);
    }
    HPC_RETURN_IF_ERROR((read_block<uint32_t, uint16_t, uint16_t>(
        v, a, ld<uint64_t>(v, a), ld<uint64_t>(v, a + 8), ld<uint32_t>(v, a + 0x10),
        ld<uint64_t>(v, a + 0x18), 10, 12, budget, pr.values)));
    out.push_back(std::move(pr));
  }
  return out;
}

Expected<std::vector<ContextValues>> read_cct_db(const ByteView& v) {
  HPC_ASSIGN_OR_RETURN(auto sec, detail::read_header(v, "ctxt", "__ctx.db", {"CtxInfos"}));
  const Section& s = sec[0];
  HPC_RETURN_IF_ERROR(in_section(v, s, s.p, 0xd, "Context Info header"));
  uint64_t p = ld<uint64_t>(v, s.p);
  uint32_t n = ld<uint32_t>(v, s.p + 8);
  uint8_t sz = ld<uint8_t>(v, s.p + 0xc);
  HPC_RETURN_IF_ERROR(check_table(v, s, p, n, sz, 0x20, "{CI}"));
  uint64_t budget = v.size() / 12;
  std::vector<ContextValues> out;
  out.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    uint64_t a = p + uint64_t(i) * sz;
    ContextValues cv;
    HPC_RETURN_IF_ERROR((read_block<uint16_t, uint32_t, uint32_t>(
        v, a, ld<uint64_t>(v, a), ld<uint64_t>(v, a + 8), ld<uint16_t>(v, a + 0x10),
        ld<uint64_t>(v, a + 0x18), 12, 10, budget, cv)));
    out.push_back(std::move(cv));
  }
  return out;
}

Expected<TraceDb> read_trace_db(const ByteView& v) {
  HPC_ASSIGN_OR_RETURN(auto sec, detail::read_header(v, "trce", "trace.db", {"CtxTraces"}));
  const Section& s = sec[0];
  HPC_RETURN_IF_ERROR(in_section(v, s, s.p, 0x20, "Context Trace Headers header"));
  TraceDb t;
  uint64_t p = ld<uint64_t>(v, s.p);
  uint32_t n = ld<uint32_t>(v, s.p + 8);
  uint8_t sz = ld<uint8_t>(v, s.p + 0xc);
  t.minTimestamp = ld<uint64_t>(v, s.p + 0x10);
  t.maxTimestamp = ld<uint64_t>(v, s.p + 0x18);
  HPC_RETURN_IF_ERROR(check_table(v, s, p, n, sz, 0x18, "{CTH}"));
  uint64_t budget = v.size() / 12;
  t.traces.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    uint64_t a = p + uint64_t(i) * sz;
    Trace tr;
    tr.profIndex = ld<uint32_t>(v, a);
    uint64_t start = ld<uint64_t>(v, a + 8), end = ld<uint64_t>(v, a + 0x10);
    if (end < start || (end - start) % 12 != 0)
      return v.error(a + 8, "expected pEnd - pStart to be a multiple of 12, not negative");
    uint64_t cnt = (end - start) / 12;
    if (cnt > budget) return v.error(a + 8, "expected trace lines within the file's size");
    budget -= cnt;
    if (cnt > 0) HPC_RETURN_IF_ERROR(v.check(start, end - start, "a trace line"));
    tr.line.reserve(cnt);
    for (uint64_t j = 0; j < cnt; ++j)
      tr.line.push_back({ld<uint64_t>(v, start + 12 * j), ld<uint32_t>(v, start + 12 * j + 8)});
    t.traces.push_back(std::move(tr));
  }
  return t;
}

}  // namespace hpc::db
