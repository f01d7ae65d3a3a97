// The database's metric set: measured metrics unified by name across profiles, each
// instantiated in the four propagation scopes and summarized by the chosen statistics.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/propagate.hpp"

namespace hpc::analysis {

enum class Combine : uint8_t { Sum = 0, Min = 1, Max = 2 };

// One summary statistic input: combine(formula(v) over profiles). The viewer's
// Mean/StdDev/CoefVar are formulas over these (see metrics/default.yaml).
struct StatKind {
  const char* formula;  // "$$", "1" (count) or "$$^2"
  Combine combine;
  const char* label;  // for metrics/default.yaml: Sum, Count, SumSq, Min, Max
};

class MetricTable {
public:
  // stats: -M stats (count, sum of squares, min, max besides the sum).
  MetricTable(std::vector<std::string> names, bool stats);

  uint32_t size() const { return uint32_t(names_.size()); }
  const std::string& name(uint32_t m) const { return names_[m]; }
  const std::vector<StatKind>& kinds() const { return kinds_; }
  uint32_t numProp() const { return size() * kNumScopes; }
  uint32_t numStats() const { return numProp() * uint32_t(kinds_.size()); }
  // With the default (sum only) a statistic's id equals its propagated metric's id.
  uint16_t statId(uint16_t prop, uint32_t kind) const {
    return uint16_t(prop * kinds_.size() + kind);
  }

private:
  std::vector<std::string> names_;
  std::vector<StatKind> kinds_;
};

// Accumulates one (context, propagated metric) statistic over profiles taken in
// profile order, so the floating-point result does not depend on threads.
struct StatAccumulator {
  double sum = 0, count = 0, sumSq = 0, min = 0, max = 0;
  bool any = false;
  void add(double v) {
    sum += v;
    count += 1;
    sumSq += v * v;
    if (!any || v < min) min = v;
    if (!any || v > max) max = v;
    any = true;
  }
  double get(const StatKind& k) const;
};

}  // namespace hpc::analysis
