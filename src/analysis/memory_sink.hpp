// A DatabaseSink that keeps everything in memory: for tests, and for callers that want
// the analysis result without a database on disk.
#pragma once

#include <map>
#include <mutex>

#include "analysis/sink.hpp"

namespace hpc::analysis {

class MemorySink final : public DatabaseSink, public TraceLines {
public:
  Status begin(uint32_t numProfiles, uint32_t numContexts, bool traces) override;
  Status writeProfile(uint32_t index, const std::vector<IdOut>& idTuple, const SparseRow& row) override;
  Status writeTrace(uint32_t index, std::span<const TracePoint> trace) override;
  Status readProfile(uint32_t index, uint32_t lo, uint32_t hi, SparseRow& out) override;
  Status writeContexts(const ColumnBatch& columns) override;
  Status writeSummary(const SparseRow& row) override;
  Status finish(const MetaInput& meta) override;
  // TraceLines, where streamTraces is set (before begin()).
  TraceLines* streamedTraces() override { return streamTraces && traces ? this : nullptr; }
  Status place(std::span<const uint64_t> records) override;
  Status writePart(uint32_t index, uint64_t from, std::span<const TracePoint> part) override;
  Status end(uint32_t index, uint64_t records, uint64_t firstTime, uint64_t lastTime) override;

  // Value of (profile, ctx, metric id); statistic ids for the summary (index 0).
  double value(uint32_t profile, uint32_t ctx, uint16_t metric) const;
  // Value of (ctx, propagated metric, profile) from the cct.db columns.
  double contextValue(uint32_t ctx, uint16_t metric, uint32_t profile) const;

  uint32_t numProfiles = 0, numContexts = 0;
  bool traces = false;
  std::vector<std::vector<IdOut>> ids;
  std::vector<SparseRow> rows;  // [0] is the summary
  std::vector<std::vector<TracePoint>> traceLines;
  bool streamTraces = false;
  std::vector<uint64_t> placed;  // by profile index: place()'s
  std::vector<uint32_t> pieces;  // by profile index: writePart() calls
  std::vector<ContextColumn> columns;
  MetaInput meta;
  bool finished = false;

private:
  std::mutex mu_;
};

}  // namespace hpc::analysis
