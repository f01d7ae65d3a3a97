#include "analysis/transpose.hpp"

#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <memory>
#include <numeric>

namespace hpc::analysis {

namespace {

constexpr uint64_t kBytesPerValue = sizeof(uint32_t) + sizeof(uint16_t) + sizeof(double) + 8;

// Builds one context's column and its summary statistics from its entries, which are
// in profile order.
void buildColumn(uint32_t ctx, std::span<const uint32_t> prof, std::span<const uint16_t> met,
                 std::span<const double> val, const MetricTable& metrics, ContextColumn& col,
                 std::vector<std::pair<uint16_t, double>>& stats) {
  // Entries grouped by metric, profile order kept within a metric: a counting sort, the
  // propagated metric ids being few.
  thread_local std::vector<uint32_t> order, count;
  uint16_t maxMet = 0;
  for (uint16_t m : met) maxMet = std::max(maxMet, m);
  count.assign(size_t(maxMet) + 2, 0);
  for (uint16_t m : met) ++count[size_t(m) + 1];
  for (size_t m = 1; m < count.size(); ++m) count[m] += count[m - 1];
  order.resize(prof.size());
  for (uint32_t e = 0; e < uint32_t(prof.size()); ++e) order[count[met[e]]++] = e;
  col.ctx = ctx;
  col.metric.clear();
  col.start.assign(1, 0);
  col.profile.clear();
  col.value.clear();
  col.profile.reserve(prof.size());
  col.value.reserve(prof.size());
  stats.clear();
  StatAccumulator acc;
  for (size_t i = 0; i < order.size(); ++i) {
    uint32_t e = order[i];
    col.profile.push_back(prof[e]);
    col.value.push_back(val[e]);
    acc.add(val[e]);
    bool last = i + 1 == order.size() || met[order[i + 1]] != met[e];
    if (!last) continue;
    col.metric.push_back(met[e]);
    col.start.push_back(col.value.size());
    for (uint32_t k = 0; k < metrics.kinds().size(); ++k) {
      double s = acc.get(metrics.kinds()[k]);
      if (s != 0) stats.emplace_back(metrics.statId(met[e], k), s);
    }
    acc = StatAccumulator();
  }
  std::sort(stats.begin(), stats.end());
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

Status transposeRange(DatabaseSink& sink, const MetricTable& metrics, uint32_t numProfiles,
                      const std::vector<uint64_t>& nonzeros, uint32_t first, uint32_t last,
                      const TransposeOptions& opt, SparseRow& summary) {
  const uint64_t perRound = std::max<uint64_t>(1, opt.budgetBytes / kBytesPerValue);
  const uint32_t batch = std::max(1u, opt.threads);
  tbb::task_arena arena(int(std::max(1u, opt.threads)));

  for (uint32_t lo = first; lo < last;) {
    uint32_t hi = lo;
    uint64_t total = 0;
    while (hi < last && (hi == lo || total + nonzeros[hi] <= perRound)) total += nonzeros[hi++];

    std::vector<uint64_t> offset(hi - lo + 1, 0);
    for (uint32_t c = lo; c < hi; ++c) offset[c - lo + 1] = offset[c - lo] + nonzeros[c];
    std::vector<uint64_t> cursor(offset.begin(), offset.end() - 1);
    // Every slot is written before it is read: no zero-filling.
    std::unique_ptr<uint32_t[]> prof(new uint32_t[total]);
    std::unique_ptr<uint16_t[]> met(new uint16_t[total]);
    std::unique_ptr<double[]> val(new double[total]);

    // Rows are read in parallel batches but placed in profile order.
    std::vector<SparseRow> rows(batch);
    std::vector<Status> errors(batch);
    for (uint32_t p0 = 1; p0 < numProfiles; p0 += batch) {
      uint32_t n = std::min(batch, numProfiles - p0);
      arena.execute([&] {
        tbb::parallel_for(0u, n, [&](uint32_t i) { errors[i] = sink.readProfile(p0 + i, lo, hi, rows[i]); });
      });
      for (uint32_t i = 0; i < n; ++i) {
        HPC_RETURN_IF_ERROR(errors[i]);
        const SparseRow& r = rows[i];
        for (size_t j = 0; j < r.ctx.size(); ++j) {
          uint32_t c = r.ctx[j];
          if (c < lo || c >= hi) continue;
          for (uint64_t k = r.start[j]; k < r.start[j + 1]; ++k) {
            uint64_t& at = cursor[c - lo];
            if (at >= offset[c - lo + 1])
              return Status::error("profile " + std::to_string(p0 + i) +
                                   ": more values read back than were written");
            prof[at] = p0 + i;
            met[at] = r.metric[k];
            val[at] = r.value[k];
            ++at;
          }
        }
      }
    }

    std::vector<ContextColumn> columns;
    std::vector<uint32_t> nonEmpty;
    for (uint32_t c = lo; c < hi; ++c)
      if (offset[c - lo + 1] > offset[c - lo]) nonEmpty.push_back(c);
    columns.resize(nonEmpty.size());
    std::vector<std::vector<std::pair<uint16_t, double>>> stats(nonEmpty.size());
    arena.execute([&] {
      tbb::parallel_for(size_t(0), nonEmpty.size(), [&](size_t i) {
        uint32_t c = nonEmpty[i];
        uint64_t b = offset[c - lo], e = cursor[c - lo];
        buildColumn(c, {prof.get() + b, e - b}, {met.get() + b, e - b}, {val.get() + b, e - b},
                    metrics, columns[i], stats[i]);
      });
    });
    HPC_RETURN_IF_ERROR(sink.writeContexts(columns));
    for (size_t i = 0; i < nonEmpty.size(); ++i) {
      if (stats[i].empty()) continue;
      summary.ctx.push_back(nonEmpty[i]);
      for (auto& [m, v] : stats[i]) {
        summary.metric.push_back(m);
        summary.value.push_back(v);
      }
      summary.start.push_back(summary.value.size());
    }
    lo = hi;
  }
  return Status();
}

}  // namespace hpc::analysis
