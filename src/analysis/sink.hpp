// Where the pipeline's results go. The database adapter (db_sink.cpp) writes them with
// src/formats/db; tests use MemorySink. hpcprof-mpi's sink writes only its own ranges.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "analysis/cct.hpp"
#include "analysis/input.hpp"
#include "analysis/metrics.hpp"
#include "analysis/model.hpp"
#include "analysis/propagate.hpp"
#include "common/status.hpp"

namespace hpc::analysis {

struct IdOut {
  uint16_t kind = 0;
  bool isPhysical = false;
  uint32_t logical = 0;
  uint64_t physical = 0;
  bool operator==(const IdOut&) const = default;
};

// -R OLD=NEW: where a path recorded at measurement time is found now.
struct PathReplacement {
  std::string from, to;
};
// `path` with its prefix rewritten by the first replacement whose OLD prefixes it.
std::string replacePath(const std::string& path, const std::vector<PathReplacement>& replace);

struct TracePoint {
  uint64_t time = 0;
  uint32_t ctx = 0;
};

// One context's column of cct.db: metric-major, profile indices ascending per metric.
struct ContextColumn {
  uint32_t ctx = 0;
  std::vector<uint16_t> metric;
  std::vector<uint64_t> start{0};  // metric i owns [start[i], start[i+1])
  std::vector<uint32_t> profile;
  std::vector<double> value;
};

// Columns of ascending contexts, flat (no storage of their own per column; the transpose
// reuses it from round to round). Column i is context ctx[i]; its metrics are the slots
// [slot[i], slot[i] + metrics[i]) of `metric`, and metric slot k owns the entries
// [start[k], k + 1 < slot[i] + metrics[i] ? start[k + 1] : end[i]) of `profile` and `value`.
struct ColumnBatch {
  std::vector<uint32_t> ctx;
  std::vector<uint64_t> slot, end;
  std::vector<uint32_t> metrics;
  std::vector<uint16_t> metric;  // by slot
  std::vector<uint64_t> start;   // by slot
  const uint32_t* profile = nullptr;
  const double* value = nullptr;

  size_t size() const { return ctx.size(); }
  // Calls f(metric, profiles, values) for each metric of column i, in order.
  template <typename F> void forEachMetric(size_t i, F&& f) const {
    const uint64_t last = slot[i] + metrics[i];
    for (uint64_t k = slot[i]; k < last; ++k) {
      const uint64_t b = start[k], e = k + 1 < last ? start[k + 1] : end[i];
      f(metric[k], std::span<const uint32_t>(profile + b, e - b), std::span<const double>(value + b, e - b));
    }
  }
  ContextColumn column(size_t i) const {
    ContextColumn c;
    c.ctx = ctx[i];
    forEachMetric(i, [&](uint16_t m, std::span<const uint32_t> p, std::span<const double> v) {
      c.metric.push_back(m);
      c.profile.insert(c.profile.end(), p.begin(), p.end());
      c.value.insert(c.value.end(), v.begin(), v.end());
      c.start.push_back(c.value.size());
    });
    return c;
  }
};

// Everything meta.db and metrics/default.yaml describe. Mapping a ContextKey to a meta.db
// Context: flags from function/file/module being set; propagation bit 0 set iff the
// relation is Lexical (the "function" scope, index 0); hidden contexts are not listed,
// their children are listed under the nearest listed ancestor (Context::listed()).
// Scopes: point (type point), function (transitive, index 0), lex_aware (custom),
// execution (execution); propagated id = propId(metric, scope), statistic ids from
// MetricTable::statId.
struct MetaInput {
  std::string title;
  const Cct* cct = nullptr;
  const Names* names = nullptr;
  const MetricTable* metrics = nullptr;
  uint32_t skipped = 0;  // unreadable profiles left out, said in the database's description
  // -R: source files are named, looked for and copied at their rewritten paths.
  const std::vector<PathReplacement>* replace = nullptr;
  // The metrics as the measurements describe them (Plan::metricDescs), for
  // metrics/default.yaml; null, or missing a metric: that metric by its name alone.
  const std::vector<MetricDescIn>* descs = nullptr;
};

// trace.db's lines written from any thread in pieces, where a sink can: placed first, in
// index order, by the number of records each will have (so that the file is laid out the
// same at any -j), then each line's records in pieces, in order, and its end. A trace is
// converted and written a chunk at a time, never held whole.
class TraceLines {
public:
  virtual ~TraceLines() = default;
  // MT: externally synchronized; once, after DatabaseSink::begin. records[k]: the most that
  // profile index k + 1's line will hold.
  virtual Status place(std::span<const uint64_t> records) = 0;
  // MT: thread-safe for distinct indices. Records [from, from + part.size()) of the line.
  virtual Status writePart(uint32_t index, uint64_t from, std::span<const TracePoint> part) = 0;
  // MT: thread-safe for distinct indices. The line holds its first `records` records (their
  // first and last times given).
  virtual Status end(uint32_t index, uint64_t records, uint64_t firstTime, uint64_t lastTime) = 0;
};

class DatabaseSink {
public:
  virtual ~DatabaseSink() = default;
  // MT: externally synchronized. Called once, before any profile, with the number of
  // profiles (summary included, index 0) and contexts.
  virtual Status begin(uint32_t numProfiles, uint32_t numContexts, bool traces) = 0;
  // MT: thread-safe for distinct indices (>= 1).
  virtual Status writeProfile(uint32_t index, const std::vector<IdOut>& idTuple,
                              const SparseRow& row) = 0;
  virtual Status writeTrace(uint32_t index, std::span<const TracePoint> trace) = 0;
  // MT: thread-safe. Reads back the part of a written profile row with ctx in [lo, hi).
  virtual Status readProfile(uint32_t index, uint32_t lo, uint32_t hi, SparseRow& out) = 0;
  // MT: externally synchronized; columns arrive in ascending context order.
  virtual Status writeContexts(const ColumnBatch& columns) = 0;
  // MT: externally synchronized; the summary profile (index 0), statistic ids.
  virtual Status writeSummary(const SparseRow& row) = 0;
  virtual Status finish(const MetaInput& meta) = 0;
  // meta.db and metrics/default.yaml before finish(), beside the transpose (MT: may run with
  // the other calls); finish() then does not write them again. Nothing by default.
  virtual Status writeMetaEarly(const MetaInput& /*meta*/) { return Status(); }
  // Where traces may be written in pieces (TraceLines); null: only whole, by writeTrace.
  virtual TraceLines* streamedTraces() { return nullptr; }
};

}  // namespace hpc::analysis
