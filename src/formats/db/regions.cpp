#include "formats/db/regions.hpp"

#include "formats/db/data_block.hpp"
#include "formats/db/internal.hpp"

namespace hpc::db {

namespace {

template <typename Key, typename Sub>
BlockRef addBlock(ByteWriter& w, const Sparse<Key, Sub>& v, size_t idxAlign) {
  w.align(8);
  // The origin is 8-aligned, so alignment inside the block is the same at any origin.
  detail::BlockPtrs p = detail::put_block(w, v, idxAlign, w.size());
  return {v.size(), v.key.size(), p.pValues, p.pIdx};
}

uint64_t tupleSize(const std::vector<Identifier>& t) { return 8 + 16 * uint64_t(t.size()); }

}  // namespace

BlockRef Region::add(const ProfileValues& v) { return addBlock(w_, v, 4); }
BlockRef Region::add(const ContextValues& v) { return addBlock(w_, v, 2); }

TraceRef Region::add(uint32_t profIndex, std::span<const TraceElem> line) {
  w_.align(8);
  TraceRef r{profIndex, w_.size(), 0};
  for (const TraceElem& e : line) {
    w_.le<uint64_t>(e.timestamp);
    w_.le<uint32_t>(e.ctxId);
  }
  r.pEnd = w_.size();
  return r;
}

uint64_t Region::append(const Region& other) {
  w_.align(8);
  uint64_t at = w_.size();
  w_.bytes(other.w_.buffer().data(), other.w_.size());
  return at;
}

std::span<const uint8_t> Region::bytes() {
  w_.align(8);
  return w_.buffer();
}

BlockRef at(BlockRef r, uint64_t origin) {
  if (r.nKeys == 0) return r;  // empty: null pointers stay null
  r.pValues += origin;
  r.pIdx += origin;
  return r;
}

TraceRef at(TraceRef r, uint64_t origin) {
  r.pStart += origin;
  r.pEnd += origin;
  return r;
}

uint64_t profile_db_header_size(uint32_t numProfiles) { return 0x30 + 0x10 + 0x30 * uint64_t(numProfiles); }
uint64_t cct_db_header_size(uint32_t numContexts) { return 0x20 + 0x10 + 0x20 * uint64_t(numContexts); }
uint64_t trace_db_header_size(uint32_t numTraces) { return 0x20 + 0x20 + 0x18 * uint64_t(numTraces); }

std::vector<uint8_t> profile_db_tuples(std::span<const ProfileInfo> infos) {
  ByteWriter w;
  for (const ProfileInfo& i : infos)
    if (i.idTuple) detail::put_id_tuple(w, *i.idTuple);
  return std::move(w.buffer());
}

std::vector<uint8_t> profile_db_header(std::span<const ProfileInfo> infos, uint64_t tuplesAt) {
  ByteWriter h;
  detail::begin_file(h, "prof", 2);
  size_t info = h.size();
  h.zeros(0x10 + 0x30 * infos.size());
  h.patch_le<uint64_t>(info, infos.empty() ? 0 : info + 0x10);
  h.patch_le<uint32_t>(info + 8, uint32_t(infos.size()));
  h.patch_le<uint8_t>(info + 0xc, 0x30);
  uint64_t tupleAt = 0;
  for (size_t i = 0; i < infos.size(); ++i) {
    size_t a = info + 0x10 + 0x30 * i;
    const BlockRef& b = infos[i].block;
    detail::patch_block_header(h, a, {b.pValues, b.pIdx}, b.nValues, b.nKeys);
    if (infos[i].idTuple) {
      h.patch_le<uint64_t>(a + 0x20, tuplesAt + tupleAt);
      tupleAt += tupleSize(*infos[i].idTuple);
    }
    h.patch_le<uint32_t>(a + 0x28, infos[i].flags);
  }
  detail::set_section(h, 0, info, h.size() - info);
  detail::set_section(h, 1, tuplesAt, tupleAt);
  return std::move(h.buffer());
}

std::vector<uint8_t> cct_db_header(std::span<const BlockRef> contexts) {
  ByteWriter h;
  detail::begin_file(h, "ctxt", 1);
  size_t info = h.size();
  h.zeros(0x10 + 0x20 * contexts.size());
  h.patch_le<uint64_t>(info, contexts.empty() ? 0 : info + 0x10);
  h.patch_le<uint32_t>(info + 8, uint32_t(contexts.size()));
  h.patch_le<uint8_t>(info + 0xc, 0x20);
  for (size_t i = 0; i < contexts.size(); ++i) {
    const BlockRef& b = contexts[i];
    detail::patch_block_header(h, info + 0x10 + 0x20 * i, {b.pValues, b.pIdx}, b.nValues, b.nKeys);
  }
  detail::set_section(h, 0, info, h.size() - info);
  return std::move(h.buffer());
}

std::vector<uint8_t> trace_db_header(std::span<const TraceRef> traces, uint64_t minTime,
                                     uint64_t maxTime) {
  ByteWriter h;
  detail::begin_file(h, "trce", 1);
  size_t sec = h.size();
  h.zeros(0x20 + 0x18 * traces.size());
  h.patch_le<uint64_t>(sec, traces.empty() ? 0 : sec + 0x20);
  h.patch_le<uint32_t>(sec + 8, uint32_t(traces.size()));
  h.patch_le<uint8_t>(sec + 0xc, 0x18);
  h.patch_le<uint64_t>(sec + 0x10, minTime);
  h.patch_le<uint64_t>(sec + 0x18, maxTime);
  for (size_t i = 0; i < traces.size(); ++i) {
    size_t a = sec + 0x20 + 0x18 * i;
    h.patch_le<uint32_t>(a, traces[i].profIndex);
    h.patch_le<uint64_t>(a + 8, traces[i].pStart);
    h.patch_le<uint64_t>(a + 0x10, traces[i].pEnd);
  }
  detail::set_section(h, 0, sec, h.size() - sec);
  return std::move(h.buffer());
}

Status read_profile_block(const ReadAt& read, const BlockRef& b, uint32_t lo, uint32_t hi,
                          ProfileValues& out) {
  out.clear();
  if (b.nKeys == 0 || lo >= hi) return Status();
  thread_local std::vector<uint8_t> idx, vals;  // capacity reused across rows
  idx.resize(12 * b.nKeys);
  HPC_RETURN_IF_ERROR(read(b.pIdx, idx));
  ByteView iv(idx, "profile.db");
  auto ctxAt = [&](uint64_t i) { return iv.load<uint32_t, std::endian::little>(12 * i); };
  auto startAt = [&](uint64_t i) {
    return i < b.nKeys ? iv.load<uint64_t, std::endian::little>(12 * i + 4) : b.nValues;
  };
  // Contexts ascend within a block: find [first, last) with ctx in [lo, hi).
  uint64_t first = 0, last = b.nKeys;
  for (uint64_t l = 0, r = b.nKeys; l < r;) {
    uint64_t m = (l + r) / 2;
    if (ctxAt(m) < lo) l = first = m + 1; else r = m;
  }
  for (uint64_t l = first, r = b.nKeys; l < r;) {
    uint64_t m = (l + r) / 2;
    if (ctxAt(m) < hi) l = m + 1; else r = last = m;
  }
  if (first >= last) return Status();
  uint64_t s = std::min(startAt(first), b.nValues), e = std::min(startAt(last), b.nValues);
  if (s > e) return Status::error("profile.db: value index not ascending at block " + std::to_string(b.pIdx));
  vals.resize(10 * (e - s));
  HPC_RETURN_IF_ERROR(read(b.pValues + 10 * s, vals));
  ByteView vv(vals, "profile.db");
  for (uint64_t i = first; i < last; ++i) {
    uint64_t a = std::max(std::min(startAt(i), e), s), z = std::max(std::min(startAt(i + 1), e), a);
    for (uint64_t j = a; j < z; ++j)
      out.push(vv.load<uint16_t, std::endian::little>(10 * (j - s)),
               vv.load<double, std::endian::little>(10 * (j - s) + 2));
    out.close(ctxAt(i));
  }
  return Status();
}

// A search of a row's index for a range's start reads at most this many entries (6 KiB) at once.
constexpr uint64_t kWindowEntries = 512;

Status read_profile_block(const ReadAt& read, const BlockRef& b, uint32_t lo, uint32_t hi,
                          ProfileValues& out, RowCursor& cursor) {
  // out's vectors are resized, not cleared: no zero-filling of storage they have.
  if (b.nKeys == 0 || lo >= hi) {
    out.clear();
    return Status();
  }
  // Storage reused across rows, only grown (never zero-filled again); idxUsed bytes of idx
  // hold entries.
  thread_local std::vector<uint8_t> idx, vals;
  size_t idxUsed = 0;
  uint8_t e12[12];
  auto entryCtx = [&](uint64_t i, uint32_t& ctx) -> Status {
    HPC_RETURN_IF_ERROR(read(b.pIdx + 12 * i, {e12, 12}));
    ctx = ByteView({e12, 12}, "profile.db").load<uint32_t, std::endian::little>(0);
    return Status();
  };
  // The first entry with ctx >= lo: where the last range ended, the first entry for a range
  // from context 0 (a transpose's first round: a search of 12-byte reads was 13 preads a
  // profile, half of all reads at 500 profiles), else by binary search.
  uint64_t first = 0;
  if (cursor.valid && cursor.hi == lo) {
    first = cursor.key;
  } else if (lo != 0) {
    // A binary search by single entries while the interval is large, then the rest read
    // whole and searched in memory (a read of a few KiB costs about what one of 12 bytes
    // does: hpcprof-mpi reads each row's part for a rank's range once, from the middle of the
    // row, and a search by single entries was a dozen reads a row; reading every index whole
    // would make each of R ranks read all of every index).
    uint64_t l = 0, r = b.nKeys;
    while (r - l > kWindowEntries) {
      const uint64_t m = (l + r) / 2;
      uint32_t ctx = 0;
      HPC_RETURN_IF_ERROR(entryCtx(m, ctx));
      if (ctx < lo) l = m + 1; else r = m;
    }
    if (l < r) {
      thread_local std::vector<uint8_t> window;
      if (window.size() < 12 * (r - l)) window.resize(12 * (r - l));
      HPC_RETURN_IF_ERROR(read(b.pIdx + 12 * l, {window.data(), size_t(12 * (r - l))}));
      ByteView wv({window.data(), size_t(12 * (r - l))}, "profile.db");
      const uint64_t base = l;
      while (l < r) {
        const uint64_t m = (l + r) / 2;
        if (wv.load<uint32_t, std::endian::little>(12 * (m - base)) < lo) l = m + 1; else r = m;
      }
    }
    first = l;
  }
  // The entries [first, last) with ctx < hi, read in chunks; `end` is the start of the
  // values after them.
  uint64_t last = first, endValue = b.nValues;
  // Ranges of a transpose hold about as many entries each: read a little more than the last
  // one had, then more if that was not enough.
  uint64_t chunk = cursor.valid && cursor.hi == lo ? cursor.last + cursor.last / 4 + 8 : 512;
  for (bool more = true; more && last < b.nKeys; chunk *= 2) {
    const uint64_t n = std::min(chunk, b.nKeys - last);
    const size_t at = idxUsed;
    if (idx.size() < at + 12 * n) idx.resize(std::max(at + 12 * n, 2 * idx.size()));
    HPC_RETURN_IF_ERROR(read(b.pIdx + 12 * last, {idx.data() + at, 12 * n}));
    ByteView iv({idx.data() + at, 12 * n}, "profile.db");
    uint64_t k = 0;
    for (; k < n; ++k)
      if (iv.load<uint32_t, std::endian::little>(12 * k) >= hi) {
        endValue = iv.load<uint64_t, std::endian::little>(12 * k + 4);
        more = false;
        break;
      }
    idxUsed = at + 12 * k;
    last += k;
  }
  cursor = {true, hi, last, last - first};
  if (first >= last) {
    out.clear();
    return Status();
  }
  ByteView iv({idx.data(), idxUsed}, "profile.db");
  auto startAt = [&](uint64_t i) {  // i relative to first
    return i < last - first ? iv.load<uint64_t, std::endian::little>(12 * i + 4) : endValue;
  };
  const uint64_t s = startAt(0), e = std::min(endValue, b.nValues);
  if (s > e) return Status::error("profile.db: value index not ascending at block " + std::to_string(b.pIdx));
  if (vals.size() < 10 * (e - s)) vals.resize(10 * (e - s));
  HPC_RETURN_IF_ERROR(read(b.pValues + 10 * s, {vals.data(), 10 * (e - s)}));
  ByteView vv({vals.data(), 10 * (e - s)}, "profile.db");
  out.sub.resize(e - s);
  out.value.resize(e - s);
  for (uint64_t j = 0; j < e - s; ++j) {
    out.sub[j] = vv.load<uint16_t, std::endian::little>(10 * j);
    out.value[j] = vv.load<double, std::endian::little>(10 * j + 2);
  }
  out.key.resize(last - first);
  out.start.resize(last - first + 1);
  out.start[0] = 0;
  for (uint64_t i = 0; i < last - first; ++i) {
    const uint64_t z = std::min(std::max(startAt(i + 1), startAt(i)), e);
    if (startAt(i) < s || startAt(i) > e)
      return Status::error("profile.db: value index not ascending at block " + std::to_string(b.pIdx));
    out.key[i] = iv.load<uint32_t, std::endian::little>(12 * i);
    out.start[i + 1] = z - s;
  }
  return Status();
}

}  // namespace hpc::db
