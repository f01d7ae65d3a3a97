#include "analysis/memory_sink.hpp"

#include <algorithm>

namespace hpc::analysis {

Status MemorySink::begin(uint32_t np, uint32_t nc, bool tr) {
  numProfiles = np;
  numContexts = nc;
  traces = tr;
  ids.assign(np, {});
  rows.assign(np, SparseRow());
  traceLines.assign(np, {});
  return Status();
}

Status MemorySink::writeProfile(uint32_t index, const std::vector<IdOut>& idTuple,
                                const SparseRow& row) {
  if (index == 0 || index >= numProfiles) return Status::error("profile index out of range");
  ids[index] = idTuple;
  rows[index] = row;
  return Status();
}

Status MemorySink::writeTrace(uint32_t index, std::span<const TracePoint> trace) {
  if (index == 0 || index >= numProfiles) return Status::error("trace index out of range");
  traceLines[index].assign(trace.begin(), trace.end());
  return Status();
}

Status MemorySink::place(std::span<const uint64_t> records) {
  if (records.size() + 1 != numProfiles) return Status::error("trace lines placed: not one a profile");
  placed.assign(numProfiles, 0);
  pieces.assign(numProfiles, 0);
  for (size_t k = 0; k < records.size(); ++k) placed[k + 1] = records[k];
  return Status();
}

Status MemorySink::writePart(uint32_t index, uint64_t from, std::span<const TracePoint> part) {
  if (index == 0 || index >= placed.size() || from + part.size() > placed[index])
    return Status::error("trace piece out of its line's place");
  std::vector<TracePoint>& line = traceLines[index];  // each index by one thread
  if (line.size() < from + part.size()) line.resize(from + part.size());
  std::copy(part.begin(), part.end(), line.begin() + ptrdiff_t(from));
  ++pieces[index];
  return Status();
}

Status MemorySink::end(uint32_t index, uint64_t records, uint64_t firstTime, uint64_t lastTime) {
  if (index == 0 || index >= placed.size() || records > placed[index] || records > traceLines[index].size())
    return Status::error("trace line ended out of its place");
  std::vector<TracePoint>& line = traceLines[index];
  line.resize(records);
  if (records && (line.front().time != firstTime || line.back().time != lastTime))
    return Status::error("trace line ended with times not its own");
  return Status();
}

Status MemorySink::readProfile(uint32_t index, uint32_t lo, uint32_t hi, SparseRow& out) {
  out.clear();
  const SparseRow& r = rows[index];
  for (size_t j = 0; j < r.ctx.size(); ++j) {
    if (r.ctx[j] < lo || r.ctx[j] >= hi) continue;
    out.ctx.push_back(r.ctx[j]);
    for (uint64_t k = r.start[j]; k < r.start[j + 1]; ++k) {
      out.metric.push_back(r.metric[k]);
      out.value.push_back(r.value[k]);
    }
    out.start.push_back(out.value.size());
  }
  return Status();
}

Status MemorySink::writeContexts(const ColumnBatch& cols) {
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < cols.size(); ++i) {
    if (!columns.empty() && columns.back().ctx >= cols.ctx[i])
      return Status::error("context columns out of order");
    columns.push_back(cols.column(i));
  }
  return Status();
}

Status MemorySink::writeSummary(const SparseRow& row) {
  rows[0] = row;
  return Status();
}

Status MemorySink::finish(const MetaInput& m) {
  meta = m;
  finished = true;
  return Status();
}

double MemorySink::value(uint32_t profile, uint32_t ctx, uint16_t metric) const {
  const SparseRow& r = rows.at(profile);
  auto it = std::lower_bound(r.ctx.begin(), r.ctx.end(), ctx);
  if (it == r.ctx.end() || *it != ctx) return 0;
  size_t j = size_t(it - r.ctx.begin());
  for (uint64_t k = r.start[j]; k < r.start[j + 1]; ++k)
    if (r.metric[k] == metric) return r.value[k];
  return 0;
}

double MemorySink::contextValue(uint32_t ctx, uint16_t metric, uint32_t profile) const {
  for (const ContextColumn& c : columns) {
    if (c.ctx != ctx) continue;
    for (size_t i = 0; i < c.metric.size(); ++i) {
      if (c.metric[i] != metric) continue;
      for (uint64_t k = c.start[i]; k < c.start[i + 1]; ++k)
        if (c.profile[k] == profile) return c.value[k];
    }
  }
  return 0;
}

}  // namespace hpc::analysis
