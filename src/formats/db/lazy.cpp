// Lazy readers over mapped profile.db, cct.db and trace.db (lazy.hpp).
#include "formats/db/lazy.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

#include "formats/db/internal.hpp"

namespace hpc::db {
namespace {
using detail::check_table;
using detail::in_section;
using detail::Section;

template <typename T> T ld(const ByteView& v, uint64_t off) {
  return v.load<T, std::endian::little>(off);
}


// A sparse block's arrays lie in the file: nValues {Val} at pValues, nIdx {Idx} at pIdx.
Status check_block(const ByteView& v, uint64_t at, uint64_t nValues, uint64_t pValues, uint64_t nIdx,
                   uint64_t pIdx, uint64_t valSize, uint64_t idxSize) {
  if (nIdx > nValues) return v.error(at, "expected no more indices than values");
  if (nValues > v.size() / valSize) return v.error(at, "expected nValues within the file's size");
  if (nValues > 0) HPC_RETURN_IF_ERROR(v.check(pValues, nValues * valSize, "the values array"));
  if (nIdx > 0) HPC_RETURN_IF_ERROR(v.check(pIdx, nIdx * idxSize, "the index array"));
  if (nIdx == 0 && nValues != 0) return v.error(at, "expected values only with an index");
  return Status();
}

}  // namespace

void release_pages(const uint8_t* p, size_t n) {
  static const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  uintptr_t b = (uintptr_t(p) + page - 1) & ~(page - 1), e = (uintptr_t(p) + n) & ~(page - 1);
  if (p && e > b) madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
}

Expected<LazyProfileDb> LazyProfileDb::open(const std::filesystem::path& file) {
  HPC_ASSIGN_OR_RETURN(MappedFile f, MappedFile::open(file));
  LazyProfileDb db(std::move(f));
  HPC_ASSIGN_OR_RETURN(BlockFile blocks, BlockFile::open(file));
  db.blocks_.emplace(std::move(blocks));
  ByteView v = db.file_.view();
  HPC_ASSIGN_OR_RETURN(auto sec, detail::read_header(v, "prof", "_prof.db", {"ProfileInfos", "IdTuples"}));
  const Section& s = sec[0];
  HPC_RETURN_IF_ERROR(in_section(v, s, s.p, 0xd, "Profile Info header"));
  uint64_t p = ld<uint64_t>(v, s.p);
  uint32_t n = ld<uint32_t>(v, s.p + 8);
  uint8_t sz = ld<uint8_t>(v, s.p + 0xc);
  HPC_RETURN_IF_ERROR(check_table(v, s, p, n, sz, 0x2c, "{PI}"));
  db.infos_.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    uint64_t a = p + uint64_t(i) * sz;
    Info pr;
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
    pr.nValues = ld<uint64_t>(v, a), pr.pValues = ld<uint64_t>(v, a + 8);
    pr.nIdx = ld<uint32_t>(v, a + 0x10), pr.pIdx = ld<uint64_t>(v, a + 0x18);
    HPC_RETURN_IF_ERROR(check_block(v, a, pr.nValues, pr.pValues, pr.nIdx, pr.pIdx, 10, 12));
    if (i == 0 && pr.nIdx > kStride) {
      pr.sample.reserve(pr.nIdx / kStride + 1);
      for (uint32_t e = 0; e < pr.nIdx; e += kStride) pr.sample.push_back(ld<uint32_t>(v, pr.pIdx + 12 * uint64_t(e)));
      if (!std::is_sorted(pr.sample.begin(), pr.sample.end()))
        return v.error(pr.pIdx, "expected the summary profile's context ids ascending");
    }
    db.infos_.push_back(std::move(pr));
  }
  db.release();  // the index's pages, read once for the sample
  return db;
}

double LazyProfileDb::value(uint32_t prof, uint32_t ctx, uint16_t metric) const {
  if (prof >= infos_.size()) return 0;
  const Info& in = infos_[prof];
  const BlockFile& f = *blocks_;
  uint32_t lo = 0, hi = in.nIdx;  // first index entry with ctxId >= ctx
  if (!in.sample.empty()) {  // within the block whose first ctxId is the last at most ctx
    const size_t b = size_t(std::upper_bound(in.sample.begin(), in.sample.end(), ctx) - in.sample.begin());
    lo = b == 0 ? 0 : uint32_t(b - 1) * kStride;
    hi = std::min<uint32_t>(in.nIdx, lo + kStride);
  }
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (f.load<uint32_t>(in.pIdx + 12 * uint64_t(mid)) < ctx) lo = mid + 1;
    else hi = mid;
  }
  if (lo == in.nIdx || f.load<uint32_t>(in.pIdx + 12 * uint64_t(lo)) != ctx) return 0;
  uint64_t b = f.load<uint64_t>(in.pIdx + 12 * uint64_t(lo) + 4);
  uint64_t e = lo + 1 < in.nIdx ? std::min(f.load<uint64_t>(in.pIdx + 12 * uint64_t(lo + 1) + 4), in.nValues) : in.nValues;
  const uint64_t last = e;
  while (b < e) {  // first value with metric id >= metric
    uint64_t mid = b + (e - b) / 2;
    if (f.load<uint16_t>(in.pValues + 10 * mid) < metric) b = mid + 1;
    else e = mid;
  }
  if (b < last && f.load<uint16_t>(in.pValues + 10 * b) == metric) return f.load<double>(in.pValues + 10 * b + 2);
  return 0;
}

Expected<ProfileValues> LazyProfileDb::values(uint32_t prof) const {
  ProfileValues out;
  if (prof >= infos_.size()) return out;
  const Info& in = infos_[prof];
  ByteView v = file_.view();
  out.start.clear();
  for (uint32_t i = 0; i < in.nIdx; ++i) {
    uint64_t a = in.pIdx + 12 * uint64_t(i), s = ld<uint64_t>(v, a + 4);
    if ((i == 0 && s != 0) || (i > 0 && s < out.start.back()) || s > in.nValues)
      return v.error(a + 4, "expected startIndex ascending from 0 and at most nValues");
    out.key.push_back(ld<uint32_t>(v, a));
    out.start.push_back(s);
  }
  out.start.push_back(in.nValues);
  for (uint64_t i = 0; i < in.nValues; ++i)
    out.push(ld<uint16_t>(v, in.pValues + 10 * i), ld<double>(v, in.pValues + 10 * i + 2));
  return out;
}

Expected<LazyCctDb> LazyCctDb::open(const std::filesystem::path& file) {
  HPC_ASSIGN_OR_RETURN(MappedFile f, MappedFile::open(file));
  LazyCctDb db(std::move(f));
  ByteView v = db.file_.view();
  HPC_ASSIGN_OR_RETURN(auto sec, detail::read_header(v, "ctxt", "__ctx.db", {"CtxInfos"}));
  const Section& s = sec[0];
  HPC_RETURN_IF_ERROR(in_section(v, s, s.p, 0xd, "Context Info header"));
  db.p_ = ld<uint64_t>(v, s.p);
  db.n_ = ld<uint32_t>(v, s.p + 8);
  db.sz_ = ld<uint8_t>(v, s.p + 0xc);
  HPC_RETURN_IF_ERROR(check_table(v, s, db.p_, db.n_, db.sz_, 0x20, "{CI}"));
  return db;
}

Expected<ContextValues> LazyCctDb::values(uint32_t ctx) const {
  ContextValues out;
  if (ctx >= n_) return out;
  ByteView v = file_.view();
  uint64_t a = p_ + uint64_t(ctx) * sz_;
  uint64_t nValues = ld<uint64_t>(v, a), pValues = ld<uint64_t>(v, a + 8), pIdx = ld<uint64_t>(v, a + 0x18);
  uint16_t nIdx = ld<uint16_t>(v, a + 0x10);
  HPC_RETURN_IF_ERROR(check_block(v, a, nValues, pValues, nIdx, pIdx, 12, 10));
  out.start.clear();
  for (uint32_t i = 0; i < nIdx; ++i) {
    uint64_t b = pIdx + 10 * uint64_t(i), s = ld<uint64_t>(v, b + 2);
    if ((i == 0 && s != 0) || (i > 0 && s < out.start.back()) || s > nValues)
      return v.error(b + 2, "expected startIndex ascending from 0 and at most nValues");
    out.key.push_back(ld<uint16_t>(v, b));
    out.start.push_back(s);
  }
  out.start.push_back(nValues);
  out.sub.reserve(nValues), out.value.reserve(nValues);
  for (uint64_t i = 0; i < nValues; ++i)
    out.push(ld<uint32_t>(v, pValues + 12 * i), ld<double>(v, pValues + 12 * i + 4));
  return out;
}

Expected<LazyTraceDb> LazyTraceDb::open(const std::filesystem::path& file) {
  HPC_ASSIGN_OR_RETURN(MappedFile f, MappedFile::open(file));
  LazyTraceDb db(std::move(f));
  ByteView v = db.file_.view();
  HPC_ASSIGN_OR_RETURN(auto sec, detail::read_header(v, "trce", "trace.db", {"CtxTraces"}));
  const Section& s = sec[0];
  HPC_RETURN_IF_ERROR(in_section(v, s, s.p, 0x20, "Context Trace Headers header"));
  uint64_t p = ld<uint64_t>(v, s.p);
  uint32_t n = ld<uint32_t>(v, s.p + 8);
  uint8_t sz = ld<uint8_t>(v, s.p + 0xc);
  db.min_ = ld<uint64_t>(v, s.p + 0x10);
  db.max_ = ld<uint64_t>(v, s.p + 0x18);
  HPC_RETURN_IF_ERROR(check_table(v, s, p, n, sz, 0x18, "{CTH}"));
  db.lines_.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    uint64_t a = p + uint64_t(i) * sz;
    uint64_t start = ld<uint64_t>(v, a + 8), end = ld<uint64_t>(v, a + 0x10);
    if (end < start || (end - start) % 12 != 0)
      return v.error(a + 8, "expected pEnd - pStart to be a multiple of 12, not negative");
    if (end > start) HPC_RETURN_IF_ERROR(v.check(start, end - start, "a trace line"));
    uint64_t cnt = (end - start) / 12;
    db.records_ += cnt;
    db.lines_.emplace_back(cnt ? v.bytes().data() + start : nullptr, cnt, ld<uint32_t>(v, a));
  }
  return db;
}

}  // namespace hpc::db
