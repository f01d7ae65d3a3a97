// The stages of runPipeline, opened up so that hpcprof-mpi can run them on a share of
// the profiles and exchange what lies between them (see mpi/README.md).
#pragma once

#include <tbb/task_arena.h>

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "analysis/expand.hpp"
#include "analysis/pipeline.hpp"

namespace hpc::analysis {

enum class ProfileState : uint8_t { Ok = 0, Unreadable = 1, Filtered = 2 };

// What the database takes from a profile's header, besides its tree.
struct ProfileHeader {
  ProfileState state = ProfileState::Unreadable;
  std::vector<std::string> metrics;  // by local metric id
  std::vector<MetricDescIn> descs;   // ProfileTree::descs
  std::vector<IdIn> ids;
  std::string program;
  bool hasTrace = false;
};

// What the first pass keeps of a profile until its second pass: its header only; the
// second pass finds the profile's contexts again (Expander::find), so memory does not grow
// with the number of profiles.
struct Unified {
  ProfileHeader header;
};

// Pass 1 (class 1): unifies every profile's tree into the expander's CCT, in parallel
// on `arena`; out[i] belongs to profiles[i]. Unreadable profiles are warned about.
void unifyProfiles(std::span<const std::unique_ptr<ProfileSource>> profiles, const Expander& expander,
                   const PipelineOptions& options, tbb::task_arena& arena, std::vector<Unified>& out);

// The database-wide facts derived from all profiles' headers, taken in profile order:
// the same on every rank that sees the same headers.
struct Plan {
  std::vector<size_t> live;  // positions of the usable profiles; live[k] has index k + 1
  std::vector<std::vector<uint32_t>> localToGlobal;  // per position: local -> global metric
  std::vector<std::vector<IdOut>> idTuples;          // per live profile
  std::vector<std::string> metricNames;              // in order of first appearance
  // For metrics/default.yaml: the descriptors of the measured metrics and of the derived
  // ones whose formulas name measured metrics only (#N rewritten to metricNames indices).
  std::vector<MetricDescIn> metricDescs;
  bool anyTrace = false;
  uint32_t skipped = 0;  // unreadable (filtered ones are not counted)
  std::string title;
};
Expected<Plan> makePlan(std::span<const ProfileHeader* const> headers, const PipelineOptions& options);

// Pass 2 for one live profile, split in two for callers that write in profile order:
// computeProfile reads, finds, propagates and counts into `nonzeros` (MT: thread-safe for
// distinct profiles, one Propagator per thread); writeProfile writes the row and trace.
struct PropagatedProfile {
  SparseRow row;
  std::vector<TracePoint> trace;
  bool hasTrace = false;
};
Status computeProfile(ProfileSource& source, const Expander& expander, const Unified& u,
                      const std::vector<uint32_t>& localToGlobal, Propagator& propagator,
                      std::span<std::atomic<uint64_t>> nonzeros, PropagatedProfile& out);
Status writeProfile(DatabaseSink& sink, uint32_t index, const std::vector<IdOut>& idTuple,
                    const PropagatedProfile& p);

// Pass 2 (class 2) for one live profile: reads its tree again and finds its contexts in the
// unified (finalized) CCT, reads its values, propagates them and writes its profile.db row
// and trace.db line; counts its values per context into `nonzeros`.
// MT: thread-safe for distinct profiles (one Propagator per thread).
Status propagateProfile(ProfileSource& source, const Expander& expander, const Unified& u,
                        const std::vector<uint32_t>& localToGlobal,
                        uint32_t index, const std::vector<IdOut>& idTuple, Propagator& propagator,
                        std::span<std::atomic<uint64_t>> nonzeros, DatabaseSink& sink);

}  // namespace hpc::analysis
