// hpcprof's pipeline across MPI ranks (see README.md): the stages of analysis/stages.hpp
// run on each rank's share, with the exchanges between them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "analysis/mpi/comm.hpp"
#include "analysis/options.hpp"

namespace hpc::analysis::mpi {

// [bounds[r], bounds[r+1]) is part r of `weights`, split into contiguous runs of about
// equal total weight (profiles by bytes, contexts by values).
std::vector<size_t> partitionByWeight(std::span<const uint64_t> weights, int parts);

// What one rank did, for -v and the benchmark.
struct RankReport {
  uint32_t profiles = 0;     // analysed by this rank
  uint64_t inputBytes = 0;   // their .hpcrun + .hpctrace bytes
  uint64_t outputBytes = 0;  // written by this rank into profile.db, cct.db, trace.db
  uint32_t contexts = 0;     // cct.db columns of this rank's range
  double unify = 0, reduce = 0, propagate = 0, place = 0, transpose = 0, finish = 0;
  uint64_t reduceBytes = 0;  // of the communication, in the tree reduction and broadcast
};

struct DistributedResult {
  uint32_t profiles = 0, skipped = 0, contexts = 0;
};

// Collective: every rank calls it with the same job; `dir` is the database's temporary
// directory. An error is the same on every rank and names the rank it came from.
Expected<DistributedResult> runDistributed(Comm& comm, Job& job, const std::filesystem::path& dir,
                                           RankReport& report);

}  // namespace hpc::analysis::mpi
