#include "analysis/transpose.hpp"

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
// Rounds are kept to about 8 MiB, whatever the budget, so that their buffers, reused from
// round to round, stay few pages (a fresh page is dear: a fault, and on a virtual machine
// often the host's too); the rows are read on from where the last round stopped. Each round
// reads a piece of every row (two small reads), so fewer, fuller rounds read less often: at
// 14 bytes a value (the columns sorted in place) a round holds about 600 k values, against
// 260 k in 6.8 MiB when they were sorted into a copy (2000 profiles: 1.57 -> 1.19 s at -j1,
// peak 40 -> 39 MiB; 16 MiB rounds gained 0.1 s more for 12 MiB more). Not growing with the
// number of profiles, a round keeps peak memory flat in it.
constexpr uint64_t kRoundBytes = uint64_t(8) << 20;

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
  uint32_t rounds = 0;
  uint64_t values = 0;

  for (uint32_t lo = first; lo < last;) {
    uint32_t hi = lo;
    uint64_t total = 0, bytes = 0;
    while (hi < last && (hi == lo || bytes + bytesOf(nonzeros[hi]) <= roundBytes)) {
      bytes += bytesOf(nonzeros[hi]);
      total += nonzeros[hi++];
    }
    ++rounds;
    values += total;

    offset.assign(hi - lo + 1, 0);
    for (uint32_t c = lo; c < hi; ++c) offset[c - lo + 1] = offset[c - lo] + nonzeros[c];
    cursor.assign(offset.begin(), offset.end() - 1);
    uint32_t* prof = profBuf.get(total);
    uint16_t* met = metBuf.get(total);
    double* val = valBuf.get(total);
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
    for (uint32_t p0 = 1; p0 < numProfiles; p0 += batch) {
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
    std::fprintf(stderr, "hpcprof: transposed %llu values of contexts [%u, %u) in %u rounds\n",
                 static_cast<unsigned long long>(values), first, last, rounds);
  return Status();
}

}  // namespace hpc::analysis
