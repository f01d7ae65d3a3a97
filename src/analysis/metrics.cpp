#include "analysis/metrics.hpp"

#include <string_view>

namespace hpc::analysis {

MetricTable::MetricTable(std::vector<std::string> names, bool stats) : names_(std::move(names)) {
  kinds_.push_back({"$$", Combine::Sum, "Sum"});
  if (stats) {
    kinds_.push_back({"1", Combine::Sum, "Count"});
    kinds_.push_back({"$$^2", Combine::Sum, "SumSq"});
    kinds_.push_back({"$$", Combine::Min, "Min"});
    kinds_.push_back({"$$", Combine::Max, "Max"});
  }
}

double StatAccumulator::get(const StatKind& k) const {
  switch (k.combine) {
  case Combine::Min: return min;
  case Combine::Max: return max;
  case Combine::Sum: break;
  }
  std::string_view f = k.formula;
  if (f == "1") return count;
  if (f == "$$^2") return sumSq;
  return sum;
}

}  // namespace hpc::analysis
