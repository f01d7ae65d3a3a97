// The context-major transpose that builds cct.db, in rounds of contexts whose values
// fit a memory budget. Summary statistics (class 3) are computed here, per context, from
// the profile values taken in profile order: exact same result at any thread count.
#pragma once

#include <cstdint>
#include <vector>

#include "analysis/metrics.hpp"
#include "analysis/sink.hpp"

namespace hpc::analysis {

struct TransposeOptions {
  uint64_t budgetBytes = uint64_t(1) << 30;
  unsigned threads = 1;
  const PropagationShape* shape = nullptr;  // for the lex_aware summaries
  bool verbose = false;  // -v: say how many values and rounds
};

// nonzeros[c]: how many (profile, metric) values context c has over all profiles.
Status transpose(DatabaseSink& sink, const MetricTable& metrics, uint32_t numProfiles,
                 const std::vector<uint64_t>& nonzeros, const TransposeOptions& opt);

// The columns of contexts [lo, hi) only (hpcprof-mpi gives each rank a range); their
// summary statistics are appended to `summary`, before the lex_aware rewrite.
Status transposeRange(DatabaseSink& sink, const MetricTable& metrics, uint32_t numProfiles,
                      const std::vector<uint64_t>& nonzeros, uint32_t lo, uint32_t hi,
                      const TransposeOptions& opt, SparseRow& summary);

}  // namespace hpc::analysis
