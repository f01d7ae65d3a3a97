// Lazy readers over profile.db, cct.db and trace.db, for the viewer: open()
// checks the headers and the per-profile / per-context / per-trace index arrays; values and
// trace lines are read from the mapping only when asked for. release() drops the mapped
// pages from the process (they stay in the page cache), so resident memory stays bounded
// by what requests in flight touch.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "common/file.hpp"
#include "formats/db/db.hpp"

namespace hpc::db {

// Drops the pages of [p, p+n) (rounded inward to whole pages) from this process.
void release_pages(const uint8_t* p, size_t n);

// Releases touched pages of one mapping [base, base + size) in batches: a madvise per small
// range costs more (TLB flushes) than the pages it frees, so ranges are merged until `limit`
// bytes, then dropped at once, widened by what one read fault may map around it: 64 KiB of
// fault-around, and on Linux 6.18+ the whole large folio of the page cache (up to 2 MiB,
// from readahead), which reaches back into ranges already dropped.
class PageReleaser {
public:
  PageReleaser(const uint8_t* base, size_t size, size_t limit = 256u << 10) : base_(base), end_(base + size), limit_(limit) {}
  ~PageReleaser() { flush(); }
  PageReleaser(const PageReleaser&) = delete;
  PageReleaser& operator=(const PageReleaser&) = delete;
  void touched(const uint8_t* p, size_t n) {
    if (!p || !n) return;
    if (!lo_) lo_ = p, hi_ = p + n;
    else lo_ = std::min(lo_, p), hi_ = std::max(hi_, p + n);
    if (size_t(hi_ - lo_) >= limit_) flush();
  }
  void flush() {
    constexpr size_t kFaultAround = 2u << 20;  // a PMD-sized folio
    if (lo_) {
      const uint8_t* a = size_t(lo_ - base_) > kFaultAround ? lo_ - kFaultAround : base_;
      const uint8_t* b = size_t(end_ - hi_) > kFaultAround ? hi_ + kFaultAround : end_;
      release_pages(a, size_t(b - a));
    }
    lo_ = hi_ = nullptr;
  }

private:
  const uint8_t* base_;
  const uint8_t* end_;
  size_t limit_;
  const uint8_t* lo_ = nullptr;
  const uint8_t* hi_ = nullptr;
};

class LazyProfileDb {
public:
  struct Info {
    uint32_t flags = 0;
    std::optional<std::vector<Identifier>> idTuple;
    uint64_t nValues = 0, pValues = 0, pIdx = 0;
    uint32_t nIdx = 0;
    // The summary row's (profile 0's) context index, every kStride-th entry's ctxId, in
    // memory: a lookup reads one block of the index from the file, not the ~20 pages of a
    // binary search over it (each fault maps 64 KiB around the page: a viewer's walk over a
    // million contexts held megabytes of the file). 4 bytes a 64 contexts.
    std::vector<uint32_t> sample;
  };
  static constexpr uint32_t kStride = 64;
  static Expected<LazyProfileDb> open(const std::filesystem::path& file);
  // MT: const methods are thread-safe.
  const std::vector<Info>& profiles() const { return infos_; }
  // Value of (ctx, metric) in profile `prof`, 0 when absent: two binary searches (the first
  // within a block of kStride entries for the summary row), read through a BlockFile (never
  // resident in the process beyond its cache).
  double value(uint32_t prof, uint32_t ctx, uint16_t metric) const;
  // The whole row `prof`.
  Expected<ProfileValues> values(uint32_t prof) const;
  void release() const { release_pages(file_.bytes().data(), file_.bytes().size()); }

private:
  explicit LazyProfileDb(MappedFile f) : file_(std::move(f)) {}
  MappedFile file_;
  std::optional<BlockFile> blocks_;
  std::vector<Info> infos_;
};

class LazyCctDb {
public:
  static Expected<LazyCctDb> open(const std::filesystem::path& file);
  uint32_t size() const { return n_; }
  // The values of context `ctx` (empty beyond size()); errors name the file and offset.
  Expected<ContextValues> values(uint32_t ctx) const;
  void release() const { release_pages(file_.bytes().data(), file_.bytes().size()); }

private:
  explicit LazyCctDb(MappedFile f) : file_(std::move(f)) {}
  MappedFile file_;
  uint64_t p_ = 0;
  uint32_t n_ = 0;
  uint8_t sz_ = 0;
};

// One trace line in the mapping: `size()` (timestamp, ctxId) records, 12 bytes each.
class TraceLineView {
public:
  TraceLineView() = default;
  TraceLineView(const uint8_t* p, uint64_t n, uint32_t profIndex) : p_(p), n_(n), prof_(profIndex) {}
  uint64_t size() const { return n_; }
  uint32_t profIndex() const { return prof_; }
  uint64_t time(uint64_t i) const { return load<uint64_t>(p_ + 12 * i); }
  uint32_t ctx(uint64_t i) const { return load<uint32_t>(p_ + 12 * i + 8); }
  // Index of the last record with time <= t, searching from `from` (a previous answer
  // for an earlier t: galloping, so a sweep across a line costs O(log gap) a step);
  // `from - 1` if record `from` is already after t, size() if there is none.
  uint64_t last_at_or_before(uint64_t t, uint64_t from = 0) const {
    if (from >= n_ || time(from) > t) return from == 0 || from > n_ ? n_ : from - 1;
    uint64_t lo = from, step = 1, hi = from + 1;  // time(lo) <= t
    while (hi < n_ && time(hi) <= t) lo = hi, step *= 2, hi = lo + step;
    uint64_t a = lo + 1, b = std::min(hi, n_);  // the first record after t is in [a, b]
    while (a < b) {
      uint64_t mid = a + (b - a) / 2;
      if (time(mid) <= t) a = mid + 1;
      else b = mid;
    }
    return a - 1;
  }
  void release() const { release_pages(p_, 12 * n_); }
  const uint8_t* data() const { return p_; }
  size_t bytes() const { return 12 * n_; }

private:
  template <typename T> static T load(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    if constexpr (std::endian::native != std::endian::little)
      v = sizeof v == 8 ? T(__builtin_bswap64(uint64_t(v))) : T(__builtin_bswap32(uint32_t(v)));
    return v;
  }
  const uint8_t* p_ = nullptr;
  uint64_t n_ = 0;
  uint32_t prof_ = 0;
};

class LazyTraceDb {
public:
  static Expected<LazyTraceDb> open(const std::filesystem::path& file);
  uint64_t minTimestamp() const { return min_; }
  uint64_t maxTimestamp() const { return max_; }
  size_t size() const { return lines_.size(); }
  const TraceLineView& line(size_t i) const { return lines_[i]; }
  uint64_t records() const { return records_; }
  void release() const { release_pages(file_.bytes().data(), file_.bytes().size()); }
  // The mapping, for a PageReleaser.
  const uint8_t* data() const { return file_.bytes().data(); }
  size_t bytes() const { return file_.bytes().size(); }

private:
  explicit LazyTraceDb(MappedFile f) : file_(std::move(f)) {}
  MappedFile file_;
  uint64_t min_ = 0, max_ = 0, records_ = 0;
  std::vector<TraceLineView> lines_;
};

}  // namespace hpc::db
