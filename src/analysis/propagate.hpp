// Per-profile propagation of measured (point) values to the four propagation scopes
// of the reference: point, function, lex_aware and execution (class 2 work).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "analysis/cct.hpp"

namespace hpc::analysis {

enum Scope : uint8_t { kPoint = 0, kFunction = 1, kLexAware = 2, kExecution = 3, kNumScopes = 4 };

// Propagated metric id of (metric, scope), the same in profile.db and cct.db.
inline uint16_t propId(uint32_t metric, Scope s) { return uint16_t(metric * kNumScopes + s); }

// One profile's values: contexts ascending, metric ids ascending within a context,
// no zeros. Context i's entries are [start[i], start[i+1]).
struct SparseRow {
  std::vector<uint32_t> ctx;
  std::vector<uint64_t> start{0};
  std::vector<uint16_t> metric;
  std::vector<double> value;

  void clear() {
    ctx.clear();
    start.assign(1, 0);
    metric.clear();
    value.clear();
  }
  size_t size() const { return value.size(); }
};

struct ContextValue {
  uint32_t ctx = 0;
  uint32_t metric = 0;  // global metric index (not a propagated id)
  double value = 0;
};

// The shape of the finalized CCT as propagation needs it.
class PropagationShape {
public:
  explicit PropagationShape(const Cct& cct);
  uint32_t size() const { return uint32_t(parent_.size()); }
  uint32_t parent(uint32_t c) const { return parent_[c]; }
  // Function-scope values flow to the parent only over lexical edges (bit 0 of the
  // context's propagation mask in meta.db).
  bool lexicalEdge(uint32_t c) const { return lexical_[c]; }
  bool isLoop(uint32_t c) const { return loop_[c]; }
  const uint32_t* parents() const { return parent_.data(); }
  const uint8_t* lexicalEdges() const { return lexical_.data(); }

private:
  std::vector<uint32_t> parent_;
  std::vector<uint8_t> lexical_, loop_;
};

// Reusable per-thread scratch; one run() per profile.
class Propagator {
public:
  // Contexts x propagated metrics up to which values are kept by context (4 MiB a thread:
  // beyond about twice that, on the benchmark's VM, values by slot of the touched contexts
  // were faster; propagate_bench at 400,000 contexts: 1.83 ms a profile by slot, 2.58 by
  // context).
  static constexpr size_t kMaxDense = size_t(1) << 19;
  // Values are kept by context where contexts x propagated metrics is at most denseLimit,
  // else by slot of the contexts a profile touches (a test sets 0 to take that path on a
  // small tree).
  Propagator(const PropagationShape& shape, uint32_t numMetrics, size_t denseLimit = kMaxDense);
  Propagator(const Propagator&) = delete;
  Propagator& operator=(const Propagator&) = delete;

  // About the most memory one propagator of this shape holds (its tables by context, and
  // its row and value scratch for a profile that touches every context), for a bound on how
  // many run at once.
  static uint64_t scratchBytes(uint32_t contexts, uint32_t numMetrics);
  // MT: externally synchronized (one thread at a time per Propagator).
  void run(std::span<const ContextValue> points, SparseRow& out);
  // Values written for the context by all runs so far (the transpose's plan, once the
  // propagators' counts are summed).
  uint64_t count(uint32_t ctx) const;
  // The same by (context, propagated metric), context-major, where there are at most
  // kMaxCountedMetrics propagated metrics and contexts x propagated metrics is at most
  // kMaxMetricCounts (else empty, and counts are kept by context only): the transpose then
  // puts each value at its place in its column directly, with no sort by metric. At most 32
  // MiB a thread (8M context-metrics: 400,000 contexts of one metric's four scopes took the
  // counting sort at the old bound of 1M, and a transpose twice as long). Where many metrics
  // are measured, as GPU PC sampling's 15 to 25, each context has values of a few: the counts
  // are mostly zeros, a pass over all of them per context in the transpose, and memory a
  // thread that a sort by metric of each column's values does without (bench/README.md,
  // ninth session: 25 measured, 90.6 -> 69.3 MiB at -j2 and a little faster; 16, equal time,
  // 67 -> 53 MiB; 8 or 4 metrics, 5-8 % slower without the counts).
  static constexpr size_t kMaxMetricCounts = size_t(1) << 23;
  static constexpr uint32_t kMaxCountedMetrics = 8 * kNumScopes;
  const std::vector<uint32_t>& metricCounts() const { return metricCounts_; }

private:
  // run() for a width known at compile time (0: width_): values in dense_ by context where
  // the tree is small enough (runDense), else in slots of the touched contexts (runWidth).
  template <uint32_t kWidth> void runDense(std::span<const ContextValue> points, SparseRow& out);
  template <uint32_t kWidth> void runWidth(std::span<const ContextValue> points, SparseRow& out);
  // Three metrics or more: values in slots of the touched contexts as runWidth, each slot with
  // a bitmask of the metrics it has values of and the scopes of those alone, so that flowing
  // up, writing and counting go over those (a GPU measurement's context has values of a few
  // of its dozens) and the values of a profile are as many as it has.
  void runMasked(std::span<const ContextValue> points, SparseRow& out);
  // Writes the row from values by slot (v(k) for the k-th context of order_ from the end, i.e.
  // in increasing context order), counting it (runDense writes its row as it sweeps).
  template <uint32_t kWidth, typename ValuesOf>
  void writeRow(size_t n, ValuesOf&& v, SparseRow& out);
  // The row scratch for up to `entries` entries of up to `contexts` contexts; its first
  // `rows` contexts and `entries` entries, written from the start, copied out.
  void reserveRow(size_t entries, size_t contexts);
  // Marks the points' contexts and sweeps them with their ancestors into order_ and
  // slotOf_ (slot k: the k-th touched context from the highest id down); returns how many.
  size_t touch(std::span<const ContextValue> points);
  void copyRow(size_t rows, size_t entries, SparseRow& out) const;
  const PropagationShape& shape_;
  uint32_t numMetrics_, width_;
  std::vector<int32_t> slotOf_;     // a touched context's slot (valid during a run only)
  std::vector<uint64_t> pending_;   // bitset of the contexts touched (all clear between runs)
  std::vector<uint32_t> order_;     // the contexts touched, decreasing: slot k is order_[k] (sized for the tree)
  std::vector<double> values_;      // width_ per slot (runMasked: its metrics' scopes); only grows
  std::vector<double> dense_;       // width_ per context (all zero between runs), or empty
  std::vector<uint64_t> masks_;     // runMasked: maskWords_ per slot
  std::vector<uint64_t> place_;     // runMasked: where a slot's values start, in metrics
  uint32_t maskWords_ = 0;
  std::vector<uint64_t> counts_;        // by context, where there are no metricCounts_
  std::vector<uint32_t> metricCounts_;  // by (context, propagated metric), or empty
  std::vector<uint32_t> rowCtx_;    // the row being written: sized for the most there can be
                                    // (by context: the whole tree, written from the end)
  std::vector<uint64_t> rowStart_;
  std::vector<uint16_t> rowMetric_;
  std::vector<double> rowValue_;
};

// The reference's lex_aware differs from function only in summaries: there a loop takes
// just its own statements, not nested loops. Rewrites the summary row's Sum statistics
// for lex_aware accordingly (statsPerProp: statistics per propagated metric).
void lexAwareSummary(const PropagationShape& shape, uint32_t numMetrics, SparseRow& summary,
                     uint32_t statsPerProp);

}  // namespace hpc::analysis
