#include "analysis/transpose.hpp"

#include "analysis/stages.hpp"

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <numeric>

namespace hpc::analysis {

namespace {

// A round's memory: per value the scattered entry (profile, metric, value), sorted by metric
// in place within its column; per metric slot of a column (at most one per value) the slot's
// metric and start, and its summary statistics, one per kind.
constexpr uint64_t kBytesPerValue = sizeof(uint32_t) + sizeof(uint16_t) + sizeof(double);
constexpr uint64_t kBytesPerSlot = sizeof(uint16_t) + sizeof(uint64_t);
constexpr uint64_t kBytesPerStat = sizeof(std::pair<uint16_t, double>);
// Rounds are kept to about 4 MiB (kTransposeRoundBytes), whatever the budget, so that their
// arrays, reused from round to round, are few pages (a fresh page is dear: a fault, and on a
// virtual machine often the host's too); in hpcprof they are the memory the row buckets
// filled in pass 2. At 14 bytes a value (the columns sorted in place) a round holds about
// 300 k values. A round of whole buckets reads them in a few large reads, so more rounds cost
// little (500 and 2000 profiles: as fast as 8 and 16 MiB rounds, 4 and 12 MiB less peak). A
// round of part of a bucket, and hpcprof-mpi's, read a piece of every row from profile.db
// instead, on from where the last round stopped (two small reads a row). Not growing with
// the number of profiles, a round keeps peak memory flat in it.
constexpr uint64_t kRoundBytes = kTransposeRoundBytes;

// Sorts column i's entries (in profile order) in prof/met/val [b, e) by metric in place,
// profile order kept within a metric, and gives the column its metric slots; its summary
// statistics go to stats [0, returned count).
uint32_t buildColumn(size_t i, uint64_t b, uint64_t e, uint32_t* prof, const uint16_t* met, double* val,
                     const MetricTable& metrics, ColumnBatch& out, std::pair<uint16_t, double>* stats) {
  // A counting sort, the propagated metric ids being few.
  thread_local std::vector<uint64_t> count;
  thread_local std::vector<uint32_t> tmpProf;
  thread_local std::vector<double> tmpVal;
  uint16_t maxMet = 0;
  bool sorted = true;
  for (uint64_t k = b; k < e; ++k) {
    sorted &= met[k] >= maxMet;
    maxMet = std::max(maxMet, met[k]);
  }
  count.assign(size_t(maxMet) + 1, 0);
  for (uint64_t k = b; k < e; ++k) ++count[met[k]];
  uint64_t slot = out.slot[i], at = b;
  for (uint32_t m = 0; m <= maxMet; ++m) {
    if (!count[m]) continue;
    out.metric[slot] = uint16_t(m);
    out.start[slot] = at;
    ++slot;
    const uint64_t n = count[m];
    count[m] = at;
    at += n;
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
  for (uint64_t k = out.slot[i]; k < slot; ++k) {
    const uint64_t vb = out.start[k], ve = k + 1 < slot ? out.start[k + 1] : e;
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

// Buckets are at least this many bytes of buffer each (fewer, larger reads and writes), and
// at most this many in all (rounds are made of whole buckets where they can be).
constexpr uint64_t kMinChunkBytes = uint64_t(64) << 10;
constexpr uint32_t kMaxBuckets = 256;

Expected<std::unique_ptr<RowBuckets>> RowBuckets::create(uint32_t contexts, uint64_t memoryBytes,
                                                         const std::filesystem::path& scratchDir) {
  std::unique_ptr<RowBuckets> b(new RowBuckets);
  HPC_ASSIGN_OR_RETURN(b->file_, Spill::create(scratchDir));
  contexts = std::max(1u, contexts);
  const uint64_t n = std::clamp<uint64_t>(memoryBytes / kMinChunkBytes, 1, std::min<uint64_t>(kMaxBuckets, contexts));
  b->width_ = uint32_t((uint64_t(contexts) + n - 1) / n);
  const uint32_t buckets = (contexts + b->width_ - 1) / b->width_;
  b->chunkBytes_ = std::max<uint64_t>(kMinChunkBytes, memoryBytes / buckets) & ~uint64_t(7);
  b->memory_.reset(new uint8_t[buckets * b->chunkBytes_]);  // not zero-filled: pages touched as used
  b->used_.assign(buckets, 0);
  b->chunks_.resize(buckets);
  return b;
}

RowBuckets::~RowBuckets() = default;

Status RowBuckets::write(uint32_t bucket, std::span<const uint8_t> bytes) {
  HPC_ASSIGN_OR_RETURN(uint64_t at, file_->append(bytes));
  chunks_[bucket].emplace_back(at, bytes.size());
  return Status();
}

Status RowBuckets::flush(uint32_t bucket) {
  if (!used_[bucket]) return Status();
  HPC_RETURN_IF_ERROR(write(bucket, {memory_.get() + bucket * chunkBytes_, size_t(used_[bucket])}));
  used_[bucket] = 0;
  return Status();
}

Status RowBuckets::add(uint32_t profile, const SparseRow& row) {
  size_t j = 0;
  while (j < row.ctx.size()) {
    const uint32_t bucket = bucketOf(row.ctx[j]);
    if (bucket >= used_.size()) return Status::error("transpose: context beyond the tree");
    const uint32_t limit = firstContext(bucket + 1);
    size_t k = j;
    while (k < row.ctx.size() && row.ctx[k] < limit) ++k;
    const uint64_t entries = k - j, v0 = row.start[j], values = row.start[k] - v0;
    const size_t bytes = rowPieceBytes(entries, values);
    if (used_[bucket] + bytes > chunkBytes_) HPC_RETURN_IF_ERROR(flush(bucket));
    const bool large = bytes > chunkBytes_;
    if (large) large_.resize(bytes);
    uint8_t* p = large ? large_.data() : memory_.get() + bucket * chunkBytes_ + used_[bucket];
    const uint32_t head[4] = {profile, uint32_t(entries), uint32_t(values), 0};
    std::memcpy(p, head, sizeof head);
    auto* ctx = reinterpret_cast<uint32_t*>(p + 16);
    auto* end = ctx + entries;
    for (uint64_t e = 0; e < entries; ++e) {
      ctx[e] = row.ctx[j + e];
      end[e] = uint32_t(row.start[j + e + 1] - v0);
    }
    std::memcpy(p + 16 + 8 * entries, row.value.data() + v0, 8 * values);
    std::memcpy(p + 16 + 8 * entries + 8 * values, row.metric.data() + v0, 2 * values);
    std::memset(p + 16 + 8 * entries + 10 * values, 0, bytes - (16 + 8 * entries + 10 * values));
    if (large) HPC_RETURN_IF_ERROR(write(bucket, {large_.data(), bytes}));
    else used_[bucket] += bytes;
    j = k;
  }
  return Status();
}

Status RowBuckets::finish() {
  for (uint32_t b = 0; b < used_.size(); ++b) HPC_RETURN_IF_ERROR(flush(b));
  std::vector<uint8_t>().swap(large_);
  return Status();
}

std::unique_ptr<uint8_t[]> RowBuckets::releaseMemory(uint64_t& bytes) {
  bytes = memory_ ? used_.size() * chunkBytes_ : 0;
  return std::move(memory_);
}

Status RowBuckets::readChunk(uint32_t bucket, size_t k, std::vector<uint8_t>& into, size_t& bytes) const {
  const auto [at, n] = chunks_[bucket][k];
  bytes = size_t(n);
  if (into.size() < bytes) into.resize(bytes);
  return file_->read(at, {into.data(), bytes});
}

Status transpose(DatabaseSink& sink, const MetricTable& metrics, uint32_t numProfiles,
                 const std::vector<uint64_t>& nonzeros, const TransposeOptions& opt) {
  SparseRow summary;
  HPC_RETURN_IF_ERROR(transposeRange(sink, metrics, numProfiles, nonzeros, 0,
                                     uint32_t(nonzeros.size()), opt, summary));
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

}  // namespace

Status transposeRange(DatabaseSink& sink, const MetricTable& metrics, uint32_t numProfiles,
                      const std::vector<uint64_t>& nonzeros, uint32_t first, uint32_t last,
                      const TransposeOptions& opt, SparseRow& summary) {
  const uint64_t roundBytes = std::max<uint64_t>(1, std::min(opt.budgetBytes, kRoundBytes));
  const uint32_t threads = std::max(1u, opt.threads);
  // Rows are read a few at a time per thread, so that each thread has rows to scatter.
  const uint32_t batch = threads == 1 ? 1 : 4 * threads;
  tbb::task_arena arena{int(threads)};

  // Storage of one round, reused by the next.
  Scratch<uint32_t> profBuf;
  Scratch<uint16_t> metBuf;
  Scratch<double> valBuf;
  std::vector<uint64_t> offset, cursor;
  Scratch<std::pair<uint16_t, double>> statsBuf;
  std::vector<uint32_t> statCount;
  ColumnBatch batchCols;
  const uint64_t maxSlots = std::max<uint64_t>(1, metrics.numProp());
  const size_t kinds = metrics.kinds().size();
  // A context's memory in a round: its values and, at most, a metric slot per value.
  auto bytesOf = [&](uint64_t n) {
    return n * kBytesPerValue + std::min(n, maxSlots) * (kBytesPerSlot + kinds * kBytesPerStat);
  };
  std::vector<SparseRow> rows(batch);
  std::vector<Status> errors(batch);
  std::vector<uint32_t> split;  // the contexts [split[t], split[t + 1]) are thread t's to scatter
  std::atomic<bool> overflow{false};
  uint32_t rounds = 0, bucketRounds = 0;
  uint64_t values = 0;

  for (uint32_t lo = first; lo < last;) {
    uint32_t hi = lo;
    uint64_t total = 0, bytes = 0;
    while (hi < last && (hi == lo || bytes + bytesOf(nonzeros[hi]) <= roundBytes)) {
      bytes += bytesOf(nonzeros[hi]);
      total += nonzeros[hi++];
    }
    // With buckets, a round ends at a bucket's start where it can, so that it reads whole
    // buckets (a bucket too large for one round is taken in rounds that read rows instead).
    if (opt.buckets && hi < last) {
      const uint32_t cut = std::max(lo, opt.buckets->firstContext(opt.buckets->bucketOf(hi)));
      if (cut > lo)
        for (; hi > cut; --hi) total -= nonzeros[hi - 1];
    }
    ++rounds;
    values += total;

    offset.assign(hi - lo + 1, 0);
    for (uint32_t c = lo; c < hi; ++c) offset[c - lo + 1] = offset[c - lo] + nonzeros[c];
    cursor.assign(offset.begin(), offset.end() - 1);
    uint32_t* prof;
    uint16_t* met;
    double* val;
    if (opt.workspace && total * kBytesPerValue <= opt.workspaceBytes) {
      val = reinterpret_cast<double*>(opt.workspace);
      prof = reinterpret_cast<uint32_t*>(opt.workspace + sizeof(double) * total);
      met = reinterpret_cast<uint16_t*>(opt.workspace + (sizeof(double) + sizeof(uint32_t)) * total);
    } else {
      prof = profBuf.get(total);
      met = metBuf.get(total);
      val = valBuf.get(total);
    }
    // Each thread scatters the values of a context range of about equal size: no two write
    // the same column, and each column gets its values in profile order.
    split.assign(1, lo);
    for (uint32_t t = 1; t < threads; ++t) {
      const uint64_t target = total * t / threads;
      uint32_t c = split.back();
      while (c < hi && offset[c - lo] < target) ++c;
      split.push_back(c);
    }
    split.push_back(hi);

    auto scatter = [&](uint32_t t, uint32_t n, uint32_t p0) {
      const uint32_t clo = split[t], chi = split[t + 1];
      if (clo >= chi) return;
      for (uint32_t i = 0; i < n; ++i) {
        const SparseRow& r = rows[i];
        size_t j = size_t(std::lower_bound(r.ctx.begin(), r.ctx.end(), clo) - r.ctx.begin());
        for (; j < r.ctx.size() && r.ctx[j] < chi; ++j) {
          uint64_t& at = cursor[r.ctx[j] - lo];
          const uint64_t b = r.start[j], e = r.start[j + 1];
          if (at + (e - b) > offset[r.ctx[j] - lo + 1]) {
            overflow = true;
            return;
          }
          for (uint64_t k = b; k < e; ++k, ++at) {
            prof[at] = p0 + i;
            met[at] = r.metric[k];
            val[at] = r.value[k];
          }
        }
      }
    };
    // From the buckets: each thread takes whole buckets, whose contexts no other has.
    auto scatterBucket = [&](uint32_t b) {
      return opt.buckets->forEachPiece(b, [&](const RowBuckets::Piece& piece) {
        uint64_t v = 0;
        for (uint32_t e = 0; e < piece.entries; ++e) {
          const uint32_t c = piece.ctx[e];
          const uint64_t n = piece.end[e] - v;
          if (c >= lo && c < hi) {
            uint64_t& at = cursor[c - lo];
            if (at + n > offset[c - lo + 1]) {
              overflow = true;
              return;
            }
            for (uint64_t k = v; k < piece.end[e]; ++k, ++at) {
              prof[at] = piece.profile;
              met[at] = piece.metric[k];
              val[at] = piece.value[k];
            }
          }
          v = piece.end[e];
        }
      });
    };
    // A round of whole buckets reads them; a round of part of a bucket (one too large for a
    // round) reads a piece of every row back instead of the whole bucket once per round.
    const RowBuckets* bk = opt.buckets;
    const bool fromBuckets = bk && lo == bk->firstContext(bk->bucketOf(lo)) &&
                             (hi == last || hi == bk->firstContext(bk->bucketOf(hi)));
    if (fromBuckets) {
      ++bucketRounds;
      const uint32_t b0 = bk->bucketOf(lo), b1 = bk->bucketOf(hi - 1) + 1;
      if (threads == 1) {
        for (uint32_t b = b0; b < b1; ++b) HPC_RETURN_IF_ERROR(scatterBucket(b));
      } else {
        std::vector<Status> st(b1 - b0);
        arena.execute([&] { tbb::parallel_for(b0, b1, [&](uint32_t b) { st[b - b0] = scatterBucket(b); }); });
        for (const Status& e : st) HPC_RETURN_IF_ERROR(e);
      }
      if (overflow) return Status::error("transpose: more values kept than were counted");
    }
    for (uint32_t p0 = 1; !fromBuckets && p0 < numProfiles; p0 += batch) {
      const uint32_t n = std::min(batch, numProfiles - p0);
      if (threads == 1) {
        errors[0] = sink.readProfile(p0, lo, hi, rows[0]);
        HPC_RETURN_IF_ERROR(errors[0]);
        scatter(0, 1, p0);
      } else {
        arena.execute([&] {
          tbb::parallel_for(0u, n, [&](uint32_t i) { errors[i] = sink.readProfile(p0 + i, lo, hi, rows[i]); });
        });
        for (uint32_t i = 0; i < n; ++i) HPC_RETURN_IF_ERROR(errors[i]);
        arena.execute([&] { tbb::parallel_for(0u, threads, [&](uint32_t t) { scatter(t, n, p0); }); });
      }
      if (overflow) return Status::error("profiles " + std::to_string(p0) + ".." + std::to_string(p0 + n - 1) +
                                         ": more values read back than were written");
    }

    // Columns: each gets at most min(entries, propagated metrics) metric slots.
    ColumnBatch& cols = batchCols;
    cols.ctx.clear();
    cols.slot.clear();
    uint64_t slots = 0;
    for (uint32_t c = lo; c < hi; ++c) {
      const uint64_t n = offset[c - lo + 1] - offset[c - lo];
      if (!n) continue;
      cols.ctx.push_back(c);
      cols.slot.push_back(slots);
      slots += std::min<uint64_t>(n, maxSlots);
    }
    const size_t ncols = cols.ctx.size();
    cols.end.resize(ncols);
    cols.metrics.resize(ncols);
    cols.metric.resize(slots);
    cols.start.resize(slots);
    cols.profile = prof;
    cols.value = val;
    std::pair<uint16_t, double>* statBuf = statsBuf.get(slots * kinds);
    statCount.resize(ncols);
    auto build = [&](size_t i) {
      const uint32_t c = cols.ctx[i];
      statCount[i] = buildColumn(i, offset[c - lo], cursor[c - lo], prof, met, val, metrics, cols,
                                 statBuf + cols.slot[i] * kinds);
    };
    if (threads == 1) {
      for (size_t i = 0; i < ncols; ++i) build(i);
    } else {
      arena.execute([&] { tbb::parallel_for(size_t(0), ncols, build); });
    }
    HPC_RETURN_IF_ERROR(sink.writeContexts(cols));
    for (size_t i = 0; i < ncols; ++i) {
      if (!statCount[i]) continue;
      summary.ctx.push_back(cols.ctx[i]);
      const auto* st = statBuf + cols.slot[i] * kinds;
      for (uint32_t k = 0; k < statCount[i]; ++k) {
        summary.metric.push_back(st[k].first);
        summary.value.push_back(st[k].second);
      }
      summary.start.push_back(summary.value.size());
    }
    lo = hi;
  }
  if (opt.verbose)
    std::fprintf(stderr, "hpcprof: transposed %llu values of contexts [%u, %u) in %u rounds (%u from row buckets)\n",
                 static_cast<unsigned long long>(values), first, last, rounds, bucketRounds);
  return Status();
}

}  // namespace hpc::analysis
