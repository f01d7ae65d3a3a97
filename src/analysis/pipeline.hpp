// The hpcprof pipeline: profiles in, a database out (see README.md for the stages).
// hpcprof-mpi reuses it, handing each rank its share of profiles and a sink that
// writes that rank's regions; the stages below are the reusable pieces.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "analysis/input.hpp"
#include "analysis/sink.hpp"

namespace hpc::analysis {

struct PipelineOptions {
  unsigned threads = 1;
  bool stats = false;  // -M stats
  std::string title;
  uint64_t transposeBudget = uint64_t(32) << 20;
  bool verbose = false;
  bool progress = false;  // a progress line on stderr when it is a terminal
  std::vector<std::string> onlyExe;  // --only-exe: keep profiles of these programs only
  std::vector<PathReplacement> replacePaths;  // -R, applied to source file paths
  // Where pass 1 keeps profiles' values until pass 2 (an unnamed temporary file); empty:
  // the system's temporary directory.
  std::filesystem::path scratchDir;
  // With more usable profiles than this, pass 2 keeps each row by context range in row
  // buckets (temporary files) for the transpose; with as many or fewer, each round reads a
  // piece of every row back from profile.db (two reads a row a round: few when profiles are
  // few, and no temporary copy of every value). 100 profiles of 400,000 contexts: -j1 medians
  // 1.27 -> 1.14 and 1.20 -> 1.15 s, -j2 from no change to 0.81 -> 0.71 s by the hour; 100
  // profiles of 20,000: -j2 0.048 -> 0.045 s, peak 29 -> 24 MiB; but 250 and 500 profiles of
  // 20,000 were slower read back (0.071 -> 0.086, 0.130 -> 0.144 s), hence the bound.
  uint32_t rowBucketsAbove = 128;
  // The threads of one pass (pass 1 after the first profile, pass 2) hold at most about this
  // much scratch together: a pass takes fewer threads than `threads` where theirs would pass
  // it, never fewer than 2 (or `threads`, where fewer). On a large tree more threads only add
  // memory. Pass 2's is a propagator's, sized for the tree
  // (Propagator::scratchBytes): 100 profiles of 400,000 contexts on a 16-core machine, pass 2
  // at -j4 / -j8 / -j16 0.125 / 0.147 / 0.156 s, peak 281 / 449 / 788 MiB (bench/README.md,
  // thirteenth session); 256 MiB gives that tree 6. Pass 1's is a reader's and its templates,
  // about kUnifyBytesPerNode for each node of the first profile: that tree's unify peaked at
  // 103 MiB at -j1 and 417 at -j16, and gained little past -j8; 256 MiB gives it 11.
  uint64_t scratchBudget = uint64_t(256) << 20;
};

// The analysis state the database was written from; it outlives the run.
struct Analysis {
  Cct cct;
  Names names;
  std::unique_ptr<MetricTable> metrics;
};

struct PipelineResult {
  uint32_t profiles = 0;  // analysed (summary excluded)
  uint32_t skipped = 0;   // unreadable, warned about
  uint32_t contexts = 0;
  // Wall seconds of the phases (-v prints them): unify, finalize, propagate (profile.db and
  // trace.db), transpose (cct.db, with meta.db at -j2 and up), finish.
  double unifySeconds = 0, finalizeSeconds = 0, propagateSeconds = 0, transposeSeconds = 0, finishSeconds = 0;
  uint32_t unifyThreads = 0, propagateThreads = 0;  // pass 1's and 2's (PipelineOptions::scratchBudget)
  std::shared_ptr<Analysis> analysis;
};

// Runs every stage; `profiles` in the order they take in the database (index 1..N).
Expected<PipelineResult> runPipeline(std::vector<std::unique_ptr<ProfileSource>>& profiles,
                                     const StructureSource* structure, DatabaseSink& sink,
                                     const PipelineOptions& options);

// Hierarchical identifiers: hpcrun leaves some logical ids to the analysis (dense
// ranks of the physical ids, over all profiles or among those sharing a prefix).
std::vector<std::vector<IdOut>> resolveIdTuples(const std::vector<std::vector<IdIn>>& in);

}  // namespace hpc::analysis
