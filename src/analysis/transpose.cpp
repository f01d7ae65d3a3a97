#include "analysis/transpose.hpp"

#include "analysis/stages.hpp"

#include <tbb/parallel_for.h>
#include <tbb/parallel_pipeline.h>
#include <tbb/task_arena.h>
#include <tbb/task_group.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>
#include <numeric>
#include <string_view>

namespace hpc::analysis {

namespace {

// A round's memory: per value the scattered entry (profile, metric, value), sorted by metric
// in place within its column; per metric slot of a column (at most one per value) the slot's
// metric and start, and its summary statistics, one per kind.
constexpr uint64_t kBytesPerValue = sizeof(uint32_t) + sizeof(uint16_t) + sizeof(double);
constexpr uint64_t kBytesPerSlot = sizeof(uint16_t) + sizeof(uint64_t);
constexpr uint64_t kBytesPerStat = sizeof(std::pair<uint16_t, double>);
// Rounds are kept to about 4 MiB (kTransposeRoundBytes) per thread, whatever the budget, so
// that their arrays, reused from round to round, are few pages (a fresh page is dear: a
// fault, and on a virtual machine often the host's too); in hpcprof they are the memory the
// row buckets filled in pass 2, a lane's for each thread. At 14 bytes a value (the columns
// sorted in place) a round holds about 300 k values. A round reads the chunks of the buckets
// it covers (all of a bucket larger than a round, once per round), so more rounds cost
// little (500 and 2000 profiles: as fast as 8 and 16 MiB rounds, 4 and 12 MiB less peak).
// Rounds of 2 MiB (a core's L2 here; buckets then half as many) were 0-10 % faster at 500
// profiles and 4 MiB less peak, but where values are dense (93 metrics with 25 measured:
// buckets of 5 MB) each bucket was read by two or three rounds: 1.3 GB read where 0.45 had
// been, -j2 median 0.506 -> 0.544 s, CPU 0.93 -> 1.05 s (16 interleaved runs).
// hpcprof-mpi's ranks fill buckets of their range from profile.db first; without buckets,
// rounds read a piece of every row from the sink, on from where the last round stopped (two
// small reads a row). Not growing with the number of profiles, a
// round keeps peak memory flat in it.
constexpr uint64_t kRoundBytes = kTransposeRoundBytes;

// Sorts column i's entries (in profile order) in prof/met/val [b, e) by metric in place,
// profile order kept within a metric, and gives the column its metric slots; its summary
// statistics go to stats [0, returned count).
// `byMetric`: the column's values are in metric order already (placed by the counts of its
// metrics, byMetric[m] for propagated metric m < numMetrics); then there is no sort, and
// `met` is not read (the gather does not fill it: a value's metric is known by its place).
uint32_t buildColumn(size_t i, uint64_t b, uint64_t e, uint32_t* prof, const uint16_t* met, double* val,
                     const MetricTable& metrics, ColumnBatch& out, std::pair<uint16_t, double>* stats,
                     const uint32_t* byMetric = nullptr, uint32_t numMetrics = 0, const uint16_t* ids = nullptr) {
  // A counting sort, the propagated metric ids being few.
  thread_local std::vector<uint64_t> count;
  thread_local std::vector<uint32_t> tmpProf;
  thread_local std::vector<double> tmpVal;
  uint64_t slot = out.slot[i];
  bool sorted = true;
  if (byMetric) {
    uint64_t at = b;
    for (uint32_t m = 0; m < numMetrics; ++m) {
      if (!byMetric[m]) continue;
      out.metric[slot] = ids ? ids[m] : uint16_t(m);  // byMetric's metric m, as the database names it
      out.start[slot] = at;
      ++slot;
      at += byMetric[m];
    }
  } else {
    uint16_t maxMet = 0;
    for (uint64_t k = b; k < e; ++k) {
      sorted &= met[k] >= maxMet;
      maxMet = std::max(maxMet, met[k]);
    }
    count.assign(size_t(maxMet) + 1, 0);
    for (uint64_t k = b; k < e; ++k) ++count[met[k]];
    uint64_t at = b;
    for (uint32_t m = 0; m <= maxMet; ++m) {
      if (!count[m]) continue;
      out.metric[slot] = uint16_t(m);
      out.start[slot] = at;
      ++slot;
      const uint64_t n = count[m];
      count[m] = at;
      at += n;
    }
  }
  out.metrics[i] = uint32_t(slot - out.slot[i]);
  out.end[i] = e;
  if (!sorted) {
    tmpProf.assign(prof + b, prof + e);
    tmpVal.assign(val + b, val + e);
    for (uint64_t k = b; k < e; ++k) {
      const uint64_t to = count[met[k]]++;
      prof[to] = tmpProf[k - b];
      val[to] = tmpVal[k - b];
    }
  }
  uint32_t nstats = 0;
  // The default statistic, the sum, alone: a plain sum in the same order (no count, squares,
  // minimum and maximum computed only to be dropped).
  const bool sumOnly = metrics.kinds().size() == 1 && metrics.kinds()[0].combine == Combine::Sum &&
                       std::string_view(metrics.kinds()[0].formula) == "$$";
  for (uint64_t k = out.slot[i]; k < slot; ++k) {
    const uint64_t vb = out.start[k], ve = k + 1 < slot ? out.start[k + 1] : e;
    if (sumOnly) {
      double sum = 0;
      for (uint64_t x = vb; x < ve; ++x) sum += val[x];
      if (sum != 0) stats[nstats++] = {metrics.statId(out.metric[k], 0), sum};
      continue;
    }
    StatAccumulator acc;
    for (uint64_t x = vb; x < ve; ++x) acc.add(val[x]);
    for (uint32_t kind = 0; kind < metrics.kinds().size(); ++kind) {
      double s = acc.get(metrics.kinds()[kind]);
      if (s != 0) stats[nstats++] = {metrics.statId(out.metric[k], kind), s};
    }
  }
  std::sort(stats, stats + nstats);
  return nstats;
}

}  // namespace

// A lane's buckets are at least this many bytes of buffer each (fewer, larger reads and
// writes), and at most this many (rounds are made of whole buckets where they can be).
constexpr uint64_t kMinChunkBytes = uint64_t(32) << 10;
constexpr uint32_t kMaxBuckets = 256;

Expected<std::unique_ptr<RowBuckets>> RowBuckets::create(uint32_t contexts, uint64_t memoryBytes,
                                                         const std::filesystem::path& scratchDir, uint32_t lanes,
                                                         uint32_t firstContext) {
  std::unique_ptr<RowBuckets> b(new RowBuckets);
  b->first_ = std::min(firstContext, contexts);
  contexts = std::max(1u, contexts - b->first_);
  lanes = std::max(1u, lanes);
  // A file per lane: the lanes' writes to one file would wait on each other for its lock.
  b->files_.resize(lanes);
  for (auto& f : b->files_) {
    HPC_ASSIGN_OR_RETURN(f, Spill::create(scratchDir));
  }
  const uint64_t perLane = memoryBytes / lanes;
  uint64_t n = std::clamp<uint64_t>(perLane / kMinChunkBytes, 1, std::min<uint64_t>(kMaxBuckets, contexts));
  // More buckets, with smaller buffers, where a bucket would hold more contexts than its
  // pieces' 16-bit offsets reach (trees of over 8M contexts at the default memory).
  const uint64_t fewest = (uint64_t(contexts) + kMaxBucketWidth - 1) / kMaxBucketWidth;
  const uint64_t smallest = n < fewest ? uint64_t(8) << 10 : kMinChunkBytes;
  n = std::max(n, fewest);
  b->width_ = uint32_t((uint64_t(contexts) + n - 1) / n);
  b->buckets_ = (contexts + b->width_ - 1) / b->width_;
  b->chunkBytes_ = std::max<uint64_t>(smallest, perLane / b->buckets_) & ~uint64_t(7);
  // Not zero-filled: pages are touched as they are used.
  b->memory_.reset(new uint8_t[uint64_t(lanes) * b->buckets_ * b->chunkBytes_]);
  b->lanes_.resize(lanes);
  for (Lane& l : b->lanes_) {
    l.used.assign(b->buckets_, 0);
    l.chunks.resize(b->buckets_);
  }
  return b;
}

RowBuckets::~RowBuckets() = default;

Status RowBuckets::flush(uint32_t lane, uint32_t bucket) {
  // With the full buffer go all the lane's buffers at least half full, in one write (a
  // write's fixed cost is several microseconds on a virtual machine: 2000 profiles made 5,700
  // writes of 32 KiB).
  Lane& l = lanes_[lane];
  std::vector<uint32_t> which;
  std::vector<std::span<const uint8_t>> pieces;
  for (uint32_t b = 0; b < buckets_; ++b) {
    if (!l.used[b] || (b != bucket && bucket != kAll && l.used[b] < chunkBytes_ / 2)) continue;
    which.push_back(b);
    pieces.emplace_back(buffer(lane, b), size_t(l.used[b]));
  }
  if (pieces.empty()) return Status();
  HPC_ASSIGN_OR_RETURN(uint64_t at, files_[lane]->append(pieces));
  for (size_t k = 0; k < which.size(); ++k) {
    l.chunks[which[k]].push_back({at, pieces[k].size(), l.run, lane});
    at += pieces[k].size();
    l.used[which[k]] = 0;
  }
  return Status();
}

Status RowBuckets::add(uint32_t lane, uint32_t profile, const SparseRow& row) {
  if (lane >= lanes_.size()) return Status::error("transpose: no such lane");
  Lane& l = lanes_[lane];
  if (profile < l.last) {
    // Out of the lane's order: what it holds ends the run, a new one begins.
    HPC_RETURN_IF_ERROR(flush(lane, kAll));
    ++l.run;
  }
  l.last = profile;
  size_t j = 0;
  while (j < row.ctx.size()) {
    const uint32_t bucket = bucketOf(row.ctx[j]);
    if (bucket >= buckets_) return Status::error("transpose: context beyond the tree");
    const uint32_t limit = firstContext(bucket + 1);
    size_t k = j;
    while (k < row.ctx.size() && row.ctx[k] < limit) ++k;
    const uint64_t entries = k - j, v0 = row.start[j], values = row.start[k] - v0;
    const size_t bytes = rowPieceBytes(entries, values);
    if (l.used[bucket] + bytes > chunkBytes_) HPC_RETURN_IF_ERROR(flush(lane, bucket));
    const bool large = bytes > chunkBytes_;
    if (large) l.large.resize(bytes);
    uint8_t* p = large ? l.large.data() : buffer(lane, bucket) + l.used[bucket];
    const uint32_t base = firstContext(bucket);
    const uint32_t head[4] = {profile, uint32_t(entries), uint32_t(values), base};
    std::memcpy(p, head, sizeof head);
    std::memcpy(p + 16, row.value.data() + v0, 8 * values);
    auto* offset = reinterpret_cast<uint16_t*>(p + 16 + 8 * values);
    auto* count = offset + entries;
    for (uint64_t e = 0; e < entries; ++e) {
      const uint64_t n = row.start[j + e + 1] - row.start[j + e];
      if (n > 0xffff) return Status::error("transpose: a context with more than 65,535 values in one profile");
      offset[e] = uint16_t(row.ctx[j + e] - base);  // the bucket is at most kMaxBucketWidth wide
      count[e] = uint16_t(n);
    }
    std::memcpy(count + entries, row.metric.data() + v0, 2 * values);
    const size_t used = 16 + 8 * values + 4 * entries + 2 * values;
    std::memset(p + used, 0, bytes - used);
    if (large) {
      HPC_ASSIGN_OR_RETURN(uint64_t at, files_[lane]->append(std::span<const uint8_t>(l.large.data(), bytes)));
      l.chunks[bucket].push_back({at, bytes, l.run, lane});
    } else {
      l.used[bucket] += bytes;
    }
    j = k;
  }
  return Status();
}

Status RowBuckets::finish() {
  for (uint32_t lane = 0; lane < lanes_.size(); ++lane) HPC_RETURN_IF_ERROR(finish(lane));
  return Status();
}

Status RowBuckets::finish(uint32_t lane) {
  if (lane >= lanes_.size()) return Status::error("transpose: no such lane");
  HPC_RETURN_IF_ERROR(flush(lane, kAll));
  std::vector<uint8_t>().swap(lanes_[lane].large);
  return Status();
}

std::unique_ptr<uint8_t[]> RowBuckets::releaseMemory(uint64_t& bytes) {
  bytes = memory_ ? uint64_t(lanes_.size()) * buckets_ * chunkBytes_ : 0;
  return std::move(memory_);
}

void RowBuckets::close(uint32_t lane) { files_[lane].reset(); }

Status RowBuckets::readChunk(const Chunk& chunk, uint8_t* into) const {
  return files_[chunk.lane]->read(chunk.offset, {into, size_t(chunk.bytes)});
}

Status transpose(DatabaseSink& sink, const MetricTable& metrics, uint32_t numProfiles,
                 const std::vector<uint64_t>& nonzeros, const TransposeOptions& opt) {
  SparseRow summary;
  HPC_RETURN_IF_ERROR(transposeRange(sink, metrics, numProfiles, nonzeros, 0,
                                     uint32_t(nonzeros.size()), opt, summary));
  return writeSummary(sink, metrics, opt, summary);
}

Status writeSummary(DatabaseSink& sink, const MetricTable& metrics, const TransposeOptions& opt, SparseRow& summary) {
  if (opt.shape) lexAwareSummary(*opt.shape, metrics.size(), summary, uint32_t(metrics.kinds().size()));
  return sink.writeSummary(summary);
}

namespace {

// An array that keeps its storage from round to round and is never zero-filled (every slot
// used is written before it is read).
template <typename T>
class Scratch {
public:
  T* get(uint64_t n) {
    if (n > capacity_) {
      data_.reset(new T[n]);
      capacity_ = n;
    }
    return data_.get();
  }

private:
  std::unique_ptr<T[]> data_;
  uint64_t capacity_ = 0;
};

// Contexts [lo, hi) and their number of values.
struct Round {
  uint32_t lo = 0, hi = 0;
  uint64_t total = 0;
};

// A round's storage, reused by the next round it serves.
struct RoundWork {
  Round round;
  uint8_t* workspace = nullptr;  // memory for the values, if any (else the Scratch arrays)
  uint64_t workspaceBytes = 0;
  Scratch<uint32_t> profBuf;
  Scratch<uint16_t> metBuf;
  Scratch<double> valBuf;
  uint32_t* prof = nullptr;
  uint16_t* met = nullptr;
  double* val = nullptr;
  std::vector<uint64_t> offset;  // by context of the round: where its values start
  std::vector<uint64_t> cursor;  // the next free place, by context or (placed by metric) by (context, metric)
  std::vector<uint32_t> split;  // the contexts [split[t], split[t + 1]) are thread t's to scatter
  Scratch<std::pair<uint16_t, double>> statsBuf;
  std::pair<uint16_t, double>* stats = nullptr;
  std::vector<uint32_t> statCount;
  ColumnBatch cols;
  std::vector<std::vector<uint8_t>> laneBuf;  // a chunk of each stream (a lane's run) of pieces
  std::vector<SparseRow> rows;
  std::vector<Status> errors;
};

// The transpose of one context range: plans rounds, fills each (from the row buckets or from
// profile.db rows), sorts its columns and writes them in context order.
class Transposer {
public:
  Transposer(DatabaseSink& sink, const MetricTable& metrics, uint32_t numProfiles,
             const std::vector<uint64_t>& nonzeros, const TransposeOptions& opt)
      : sink_(sink), metrics_(metrics), numProfiles_(numProfiles), nonzeros_(nonzeros), opt_(opt),
        threads_(std::max(1u, opt.threads)), arena_(int(threads_)),
        maxSlots_(std::max<uint64_t>(1, metrics.numProp())), kinds_(metrics.kinds().size()),
        countWidth_(opt.propIds ? uint32_t(opt.propIds->size()) : metrics.numProp()) {
    if (opt.propIds) {
      countOf_.assign(std::max<size_t>(metrics.numProp(), 1), kNoCount);
      for (uint32_t k = 0; k < countWidth_; ++k)
        if ((*opt.propIds)[k] < countOf_.size()) countOf_[(*opt.propIds)[k]] = uint16_t(k);
    }
  }

  Status run(uint32_t first, uint32_t last, SparseRow& summary);

private:
  // A context's memory in a round: its values and, at most, a metric slot per value.
  uint64_t bytesOf(uint64_t n) const {
    return n * kBytesPerValue + std::min(n, maxSlots_) * (kBytesPerSlot + kinds_ * kBytesPerStat);
  }
  std::vector<Round> plan(uint32_t first, uint32_t last, uint64_t roundBytes) const;
  // Values placed by (context, metric) counts: no sort by metric.
  bool direct() const {
    return opt_.metricCounts && opt_.metricCounts->size() == size_t(nonzeros_.size()) * countWidth_;
  }
  // A propagated id's place among the counts' metrics (kNoCount: none; past countWidth_).
  static constexpr uint16_t kNoCount = 0xFFFF;
  uint16_t countOf(uint16_t m) const { return countOf_.empty() ? m : m < countOf_.size() ? countOf_[m] : kNoCount; }
  // Fills w's columns with round r's values in profile order; `threads` share the work.
  Status gather(const Round& r, RoundWork& w, uint32_t threads);
  Status gatherBuckets(RoundWork& w);
  Status gatherRows(RoundWork& w, uint32_t threads);
  void build(RoundWork& w, uint32_t threads);
  Status emit(RoundWork& w, SparseRow& summary);
  // Runs f(t) for t in [0, n) on `threads` threads (in order on this one when 1).
  template <typename F> void forEach(uint32_t threads, size_t n, F&& f) {
    if (threads <= 1) {
      for (size_t t = 0; t < n; ++t) f(t);
    } else {
      arena_.execute([&] { tbb::parallel_for(size_t(0), n, [&](size_t t) { f(t); }); });
    }
  }

  DatabaseSink& sink_;
  const MetricTable& metrics_;
  const uint32_t numProfiles_;
  const std::vector<uint64_t>& nonzeros_;
  const TransposeOptions& opt_;
  const uint32_t threads_;
  tbb::task_arena arena_;
  const uint64_t maxSlots_;
  const size_t kinds_;
  const uint32_t countWidth_;       // metrics by which metricCounts counts
  std::vector<uint16_t> countOf_;   // propagated id -> its place there (empty: the same)
  std::atomic<bool> overflow_{false};
};

std::vector<Round> Transposer::plan(uint32_t first, uint32_t last, uint64_t roundBytes) const {
  std::vector<Round> rounds;
  const RowBuckets* bk = opt_.buckets;
  for (uint32_t lo = first; lo < last;) {
    Round r{lo, lo, 0};
    uint64_t bytes = 0;
    while (r.hi < last && (r.hi == lo || bytes + bytesOf(nonzeros_[r.hi]) <= roundBytes)) {
      bytes += bytesOf(nonzeros_[r.hi]);
      r.total += nonzeros_[r.hi++];
    }
    // With buckets, a round ends at a bucket's start where it can, so that a bucket is read
    // once; a bucket too large for one round is read by each of its rounds.
    if (bk && r.hi < last) {
      const uint32_t cut = std::max(lo, bk->firstContext(bk->bucketOf(r.hi)));
      if (cut > lo)
        for (; r.hi > cut; --r.hi) r.total -= nonzeros_[r.hi - 1];
    }
    rounds.push_back(r);
    lo = r.hi;
  }
  return rounds;
}

Status Transposer::gather(const Round& r, RoundWork& w, uint32_t threads) {
  w.round = r;
  const uint32_t lo = r.lo, hi = r.hi;
  w.offset.assign(hi - lo + 1, 0);
  for (uint32_t c = lo; c < hi; ++c) w.offset[c - lo + 1] = w.offset[c - lo] + nonzeros_[c];
  if (direct()) {
    // A cursor per (context, metric): each value goes straight to its place.
    const uint32_t np = countWidth_;
    w.cursor.resize(size_t(hi - lo) * np);
    for (uint32_t c = lo; c < hi; ++c) {
      uint64_t at = w.offset[c - lo];
      const uint32_t* mc = &(*opt_.metricCounts)[size_t(c) * np];
      for (uint32_t m = 0; m < np; ++m) {
        w.cursor[size_t(c - lo) * np + m] = at;
        at += mc[m];
      }
      if (at != w.offset[c - lo + 1]) return Status::error("transpose: counts by metric disagree with the counts");
    }
  } else {
    w.cursor.assign(w.offset.begin(), w.offset.end() - 1);
  }
  if (w.workspace && r.total * kBytesPerValue <= w.workspaceBytes) {
    w.val = reinterpret_cast<double*>(w.workspace);
    w.prof = reinterpret_cast<uint32_t*>(w.workspace + sizeof(double) * r.total);
    w.met = reinterpret_cast<uint16_t*>(w.workspace + (sizeof(double) + sizeof(uint32_t)) * r.total);
  } else {
    w.prof = w.profBuf.get(r.total);
    w.met = w.metBuf.get(r.total);
    w.val = w.valBuf.get(r.total);
  }
  // Each thread scatters the values of a context range of about equal size: no two write
  // the same column, and each column gets its values in profile order.
  w.split.assign(1, lo);
  for (uint32_t t = 1; t < threads; ++t) {
    const uint64_t target = r.total * t / threads;
    uint32_t c = w.split.back();
    while (c < hi && w.offset[c - lo] < target) ++c;
    w.split.push_back(c);
  }
  w.split.push_back(hi);
  return opt_.buckets ? gatherBuckets(w) : gatherRows(w, threads);
}

Status Transposer::gatherBuckets(RoundWork& w) {
  // Bucket by bucket, each lane's pieces (in its profile order) are read a chunk at a time
  // and merged by profile, so that every column gets its values in profile order.
  const RowBuckets& bk = *opt_.buckets;
  const uint32_t lo = w.round.lo, hi = w.round.hi;
  const bool byMetric = direct();
  const uint32_t np = countWidth_;
  const uint16_t* const countOf = countOf_.empty() ? nullptr : countOf_.data();
  const size_t countOfSize = countOf_.size();
  // A stream: one run of one lane, its chunks [next, end) of the lane's list, read into a
  // buffer of its own.
  struct Stream {
    const RowBuckets::Chunks* chunks = nullptr;
    size_t next = 0, end = 0;
    size_t buf = 0;             // its buffer in w.laneBuf
    size_t pos = 0, size = 0;   // in the buffer
  };
  auto load = [&](Stream& st) {
    st.pos = st.size = 0;
    if (st.next == st.end) return Status();
    const RowBuckets::Chunk& chunk = (*st.chunks)[st.next++];
    std::vector<uint8_t>& buf = w.laneBuf[st.buf];
    if (buf.size() < chunk.bytes) buf.resize(chunk.bytes);  // only grown
    st.size = size_t(chunk.bytes);
    return bk.readChunk(chunk, buf.data());
  };
  // The round's arrays, as locals the compiler need not load again after every store (it
  // did, for fear the stores changed them: -j1 transpose phase, 6 runs, 0.032 -> 0.031 s at
  // 500 profiles).
  uint32_t* const __restrict prof = w.prof;
  double* const __restrict val = w.val;
  uint16_t* const __restrict met = w.met;
  uint64_t* const __restrict cursors = w.cursor.data();
  const uint64_t* const __restrict offsets = w.offset.data();
  std::vector<Stream> streams;
  for (uint32_t b = bk.bucketOf(lo); b <= bk.bucketOf(hi - 1); ++b) {
    streams.clear();
    for (uint32_t lane = 0; lane < bk.lanes(); ++lane) {
      const RowBuckets::Chunks& chunks = bk.chunks(lane, b);
      for (size_t k = 0; k < chunks.size();) {
        size_t e = k;
        while (e < chunks.size() && chunks[e].run == chunks[k].run) ++e;
        if (w.laneBuf.size() <= streams.size()) w.laneBuf.resize(streams.size() + 1);
        Stream st{&chunks, k, e, streams.size()};
        HPC_RETURN_IF_ERROR(load(st));
        streams.push_back(st);
        k = e;
      }
    }
    for (;;) {
      Stream* best = nullptr;
      uint32_t bestProfile = 0;
      for (Stream& st : streams) {
        if (st.pos >= st.size) continue;
        uint32_t profile;
        std::memcpy(&profile, w.laneBuf[st.buf].data() + st.pos, sizeof profile);
        if (!best || profile < bestProfile) best = &st, bestProfile = profile;
      }
      if (!best) break;
      const std::vector<uint8_t>& buf = w.laneBuf[best->buf];
      HPC_ASSIGN_OR_RETURN(auto at, RowBuckets::pieceAt({buf.data() + best->pos, best->size - best->pos}));
      const RowBuckets::Piece& piece = at.first;
      // The entries before the round's first context (a bucket larger than a round) skipped.
      uint32_t e = 0;
      uint64_t v = 0;
      while (e < piece.entries && piece.base + piece.offset[e] < lo) v += piece.count[e++];
      for (; e < piece.entries; ++e) {
        const uint32_t c = piece.base + piece.offset[e];
        if (c >= hi) break;
        const uint64_t end = v + piece.count[e];
        if (end > piece.values) return Status::error("transpose: temporary file: piece overruns its values");
        const uint32_t profile = piece.profile;
        if (byMetric) {
          uint64_t* const __restrict cursor = cursors + size_t(c - lo) * np;
          const uint64_t limit = offsets[c - lo + 1];
          for (; v < end; ++v) {
            const uint16_t id = piece.metric[v];
            const uint16_t m = !countOf ? id : id < countOfSize ? countOf[id] : kNoCount;
            if (m >= np || cursor[m] >= limit) return Status::error("transpose: more values kept than were counted");
            const uint64_t to = cursor[m]++;  // its metric is known by its place: not kept
            prof[to] = profile;
            val[to] = piece.value[v];
          }
        } else {
          uint64_t to = cursors[c - lo];
          if (to + (end - v) > offsets[c - lo + 1]) return Status::error("transpose: more values kept than were counted");
          for (; v < end; ++v, ++to) {
            prof[to] = profile;
            met[to] = piece.metric[v];
            val[to] = piece.value[v];
          }
          cursors[c - lo] = to;
        }
      }
      best->pos += at.second;
      if (best->pos >= best->size) HPC_RETURN_IF_ERROR(load(*best));
    }
  }
  return Status();
}

Status Transposer::gatherRows(RoundWork& w, uint32_t threads) {
  // A piece of every row, read back from the sink a few rows at a time per thread, so that
  // each thread has rows to scatter.
  const uint32_t lo = w.round.lo, hi = w.round.hi;
  const uint32_t batch = threads == 1 ? 1 : 4 * threads;
  w.rows.resize(batch);
  w.errors.resize(batch);
  const bool byMetric = direct();
  const uint32_t np = countWidth_;
  auto scatter = [&](uint32_t t, uint32_t n, uint32_t p0) {
    const uint32_t clo = w.split[t], chi = w.split[t + 1];
    if (clo >= chi) return;
    // The round's arrays and each row's as restrict locals, as in gatherBuckets: through `w`
    // and the rows the compiler loaded every array's address again after each store (two
    // loads a value, most of this loop's time; 100 profiles of 400,000 contexts, whose
    // rounds read rows).
    uint32_t* const __restrict prof = w.prof;
    double* const __restrict val = w.val;
    uint16_t* const __restrict met = w.met;
    uint64_t* const __restrict cursors = w.cursor.data();
    const uint64_t* const __restrict offsets = w.offset.data();
    const uint16_t* const countOfIds = countOf_.empty() ? nullptr : countOf_.data();
    const size_t countOfSize = countOf_.size();
    for (uint32_t i = 0; i < n; ++i) {
      const SparseRow& r = w.rows[i];
      const uint32_t* const __restrict rctx = r.ctx.data();
      const uint64_t* const __restrict rstart = r.start.data();
      const uint16_t* const __restrict rmetric = r.metric.data();
      const double* const __restrict rvalue = r.value.data();
      const size_t nctx = r.ctx.size();
      const uint32_t profile = p0 + i;
      size_t j = size_t(std::lower_bound(rctx, rctx + nctx, clo) - rctx);
      for (; j < nctx && rctx[j] < chi; ++j) {
        const uint32_t c = rctx[j];
        const uint64_t b = rstart[j], e = rstart[j + 1];
        if (byMetric) {
          // Straight to its place by metric, as from the buckets.
          uint64_t* const __restrict cursor = cursors + size_t(c - lo) * np;
          const uint64_t limit = offsets[c - lo + 1];
          for (uint64_t k = b; k < e; ++k) {
            const uint16_t id = rmetric[k];
            const uint16_t m = !countOfIds ? id : id < countOfSize ? countOfIds[id] : kNoCount;
            if (m >= np || cursor[m] >= limit) {
              overflow_ = true;
              return;
            }
            const uint64_t to = cursor[m]++;
            prof[to] = profile;
            val[to] = rvalue[k];
          }
          continue;
        }
        uint64_t at = cursors[c - lo];
        if (at + (e - b) > offsets[c - lo + 1]) {
          overflow_ = true;
          return;
        }
        for (uint64_t k = b; k < e; ++k, ++at) {
          prof[at] = profile;
          met[at] = rmetric[k];
          val[at] = rvalue[k];
        }
        cursors[c - lo] = at;
      }
    }
  };
  for (uint32_t p0 = 1; p0 < numProfiles_; p0 += batch) {
    const uint32_t n = std::min(batch, numProfiles_ - p0);
    forEach(threads, n, [&](size_t i) { w.errors[i] = sink_.readProfile(p0 + uint32_t(i), lo, hi, w.rows[i]); });
    for (uint32_t i = 0; i < n; ++i) HPC_RETURN_IF_ERROR(w.errors[i]);
    forEach(threads, threads, [&](size_t t) { scatter(uint32_t(t), n, p0); });
    if (overflow_)
      return Status::error("profiles " + std::to_string(p0) + ".." + std::to_string(p0 + n - 1) +
                           ": more values read back than were written");
  }
  return Status();
}

void Transposer::build(RoundWork& w, uint32_t threads) {
  // Columns: each gets at most min(entries, propagated metrics) metric slots.
  const uint32_t lo = w.round.lo;
  ColumnBatch& cols = w.cols;
  cols.ctx.clear();
  cols.slot.clear();
  uint64_t slots = 0;
  for (uint32_t c = lo; c < w.round.hi; ++c) {
    const uint64_t n = w.offset[c - lo + 1] - w.offset[c - lo];
    if (!n) continue;
    cols.ctx.push_back(c);
    cols.slot.push_back(slots);
    slots += std::min<uint64_t>(n, maxSlots_);
  }
  const size_t ncols = cols.ctx.size();
  cols.end.resize(ncols);
  cols.metrics.resize(ncols);
  cols.metric.resize(slots);
  cols.start.resize(slots);
  cols.profile = w.prof;
  cols.value = w.val;
  w.stats = w.statsBuf.get(slots * kinds_);
  w.statCount.resize(ncols);
  const uint32_t np = countWidth_;
  const uint16_t* const ids = opt_.propIds ? opt_.propIds->data() : nullptr;
  forEach(threads, ncols, [&](size_t i) {
    const uint32_t c = cols.ctx[i];
    if (direct())
      w.statCount[i] = buildColumn(i, w.offset[c - lo], w.offset[c - lo + 1], w.prof, w.met, w.val, metrics_, cols,
                                   w.stats + cols.slot[i] * kinds_, &(*opt_.metricCounts)[size_t(c) * np], np, ids);
    else
      w.statCount[i] = buildColumn(i, w.offset[c - lo], w.cursor[c - lo], w.prof, w.met, w.val, metrics_, cols,
                                   w.stats + cols.slot[i] * kinds_);
  });
}

Status Transposer::emit(RoundWork& w, SparseRow& summary) {
  const ColumnBatch& cols = w.cols;
  HPC_RETURN_IF_ERROR(sink_.writeContexts(cols));
  for (size_t i = 0; i < cols.size(); ++i) {
    if (!w.statCount[i]) continue;
    summary.ctx.push_back(cols.ctx[i]);
    const auto* st = w.stats + cols.slot[i] * kinds_;
    for (uint32_t k = 0; k < w.statCount[i]; ++k) {
      summary.metric.push_back(st[k].first);
      summary.value.push_back(st[k].second);
    }
    summary.start.push_back(summary.value.size());
  }
  return Status();
}

Status Transposer::run(uint32_t first, uint32_t last, SparseRow& summary) {
  // From the row buckets, rounds are independent until they are written: each thread fills
  // and sorts whole rounds of its own (its data stay in its core's caches) while the rounds
  // are written in context order, each thread's rounds in its share of the workspace. From
  // the sink's rows (no buckets) rounds go one after the other, each read by all threads (a
  // row is read on from where the last round stopped).
  const bool pipelined = opt_.buckets && threads_ > 1;
  // From rows with threads, two rounds' storage: one round's columns are written while the
  // next is read and filled.
  const uint32_t lanes = pipelined ? threads_ : threads_ > 1 ? 2 : 1;
  const uint64_t share = (opt_.workspace ? opt_.workspaceBytes / lanes : 0) & ~uint64_t(7);
  const uint64_t roundBytes = std::max<uint64_t>(1, std::min(opt_.budgetBytes / lanes, kRoundBytes));
  const std::vector<Round> rounds = plan(first, last, roundBytes);
  std::vector<std::unique_ptr<RoundWork>> work(lanes);
  for (uint32_t k = 0; k < lanes; ++k) {
    work[k] = std::make_unique<RoundWork>();
    if (share) {
      work[k]->workspace = opt_.workspace + k * share;
      work[k]->workspaceBytes = share;
    }
  }
  uint64_t values = 0;
  for (const Round& r : rounds) values += r.total;
  if (direct()) {
    // The summary's most entries, known from the counts by (context, metric): grown once
    // (doubling would touch half as much memory again, and copy it).
    const uint32_t np = countWidth_;
    uint64_t contexts = 0, slots = 0;
    for (uint32_t c = first; c < last; ++c) {
      uint64_t n = 0;
      for (uint32_t m = 0; m < np; ++m) n += (*opt_.metricCounts)[size_t(c) * np + m] != 0;
      contexts += n != 0;
      slots += n;
    }
    summary.ctx.reserve(summary.ctx.size() + contexts);
    summary.start.reserve(summary.start.size() + contexts);
    summary.metric.reserve(summary.metric.size() + slots * kinds_);
    summary.value.reserve(summary.value.size() + slots * kinds_);
  }

  if (!pipelined) {
    auto inTurn = [&]() -> Status {
      if (lanes == 1) {
        for (const Round& r : rounds) {
          HPC_RETURN_IF_ERROR(gather(r, *work[0], threads_));
          build(*work[0], threads_);
          HPC_RETURN_IF_ERROR(emit(*work[0], summary));
        }
        return Status();
      }
      // Writing a round's columns (encoding and writing cct.db: about a quarter of the rounds'
      // time on a large tree) is serial; it runs as a task while all threads read and fill the
      // next round in the other storage. Rounds are still read, and written, in order.
      tbb::task_group writer;
      Status written, filled;
      size_t k = 0;
      for (const Round& r : rounds) {
        RoundWork& w = *work[k];
        k ^= 1;
        filled = gather(r, w, threads_);
        if (filled.ok()) build(w, threads_);
        writer.wait();  // the last round's columns written: w's other storage is free again
        if (!filled.ok() || !written.ok()) break;
        writer.run([&written, &w, &summary, this] { written = emit(w, summary); });
      }
      writer.wait();
      HPC_RETURN_IF_ERROR(written);
      return filled;
    };
    Status done;
    if (opt_.alongside && threads_ > 1) {
      // The work beside is a task of the arena: a thread takes it up at once, the others
      // share the rounds meanwhile (100 profiles of 400,000 contexts read back as rows:
      // meta.db, 0.05 s at -j1, had gone alone before the first round; 6 interleaved runs at
      // -j2: minimum 0.66 -> 0.59 s, median 0.79 -> 0.75 s).
      arena_.execute([&] {
        tbb::task_group beside;
        beside.run(opt_.alongside);
        done = inTurn();
        beside.wait();
      });
    } else if (lanes > 1) {
      arena_.execute([&] { done = inTurn(); });
    } else {
      if (opt_.alongside) opt_.alongside();
      done = inTurn();
    }
    HPC_RETURN_IF_ERROR(done);
  } else {
    std::vector<RoundWork*> free;
    for (auto& w : work) free.push_back(w.get());
    std::mutex freeMu;
    size_t next = 0;
    Status failed;                   // the last stage's
    std::atomic<bool> stop{false};   // read by the first stage, which may run at the same time
    struct Item {
      RoundWork* w = nullptr;
      Status status;
    };
    arena_.execute([&] {
      tbb::task_group beside;
      if (opt_.alongside) beside.run(opt_.alongside);
      tbb::parallel_pipeline(
          lanes,
          tbb::make_filter<void, Item>(tbb::filter_mode::serial_in_order,
                                       [&](tbb::flow_control& fc) -> Item {
                                         if (next == rounds.size() || stop.load(std::memory_order_relaxed)) {
                                           fc.stop();
                                           return {};
                                         }
                                         std::lock_guard lock(freeMu);
                                         Item it{free.back(), Status()};
                                         free.pop_back();
                                         it.w->round = rounds[next++];
                                         return it;
                                       }) &
              tbb::make_filter<Item, Item>(tbb::filter_mode::parallel,
                                           [&](Item it) {
                                             it.status = gather(it.w->round, *it.w, 1);
                                             if (it.status.ok()) build(*it.w, 1);
                                             return it;
                                           }) &
              tbb::make_filter<Item, void>(tbb::filter_mode::serial_in_order, [&](Item it) {
                if (failed.ok()) failed = it.status.ok() ? emit(*it.w, summary) : it.status;
                if (!failed.ok()) stop.store(true, std::memory_order_relaxed);
                std::lock_guard lock(freeMu);
                free.push_back(it.w);
              }));
      beside.wait();
    });
    HPC_RETURN_IF_ERROR(failed);
  }
  if (opt_.verbose)
    std::fprintf(stderr, "hpcprof: transposed %llu values of contexts [%u, %u) in %zu rounds%s\n",
                 static_cast<unsigned long long>(values), first, last, rounds.size(),
                 opt_.buckets ? " from row buckets" : "");
  return Status();
}

}  // namespace

Status transposeRange(DatabaseSink& sink, const MetricTable& metrics, uint32_t numProfiles,
                      const std::vector<uint64_t>& nonzeros, uint32_t first, uint32_t last,
                      const TransposeOptions& opt, SparseRow& summary) {
  Transposer t(sink, metrics, numProfiles, nonzeros, opt);
  return t.run(first, last, summary);
}

}  // namespace hpc::analysis
