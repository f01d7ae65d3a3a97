// The stages of runPipeline, opened up so that hpcprof-mpi can run them on a share of
// the profiles and exchange what lies between them (see mpi/README.md).
#pragma once

#include <tbb/enumerable_thread_specific.h>
#include <tbb/task_arena.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "analysis/expand.hpp"
#include "analysis/pipeline.hpp"
#include "common/file.hpp"

namespace hpc::analysis {

enum class ProfileState : uint8_t { Ok = 0, Unreadable = 1, Filtered = 2 };

// What the profiles of one program have alike. Profiles whose readers gave equal ones share
// one (a thread compares each profile's with its last one's), so that memory does not grow by
// a metric table a profile (a GPU measurement's has dozens of metrics).
struct HeaderShared {
  std::string program;
  std::vector<std::string> metrics;  // by local metric id
  std::vector<MetricDescIn> descs;   // ProfileTree::descs
  // Which of its metrics some profile sharing it has values of (bit m % 64 of word m / 64),
  // marked as its profiles are unified; not part of what makes two alike. A GPU measurement
  // describes dozens of metrics in every profile and measures a few: pass 2 works on those.
  mutable std::unique_ptr<std::atomic<uint64_t>[]> used;
  size_t usedWords() const { return (metrics.size() + 63) / 64; }
  // MT: thread-safe. `bits` has usedWords() words.
  void markUsed(const uint64_t* bits) const;
  bool isUsed(uint32_t local) const {
    return used && local < metrics.size() && (used[local / 64].load(std::memory_order_relaxed) >> (local % 64)) & 1;
  }
  bool operator==(const HeaderShared& o) const {
    return program == o.program && metrics == o.metrics && descs == o.descs;
  }
};

// `last` if it equals `made` (taking made's marks of metrics used), else `made` (then the
// new last).
std::shared_ptr<const HeaderShared> internHeader(HeaderShared&& made, std::shared_ptr<const HeaderShared>& last);

// What the database takes from a profile's header, besides its tree.
struct ProfileHeader {
  ProfileState state = ProfileState::Unreadable;
  std::shared_ptr<const HeaderShared> shared;  // set where state is Ok
  std::vector<IdIn> ids;
  bool hasTrace = false;
};

// Pass 1 reads each profile whole, once; what pass 2 needs of it (its values and trace
// records, each with the context of its node, no tree) goes to this temporary file, so that
// memory does not grow with the number of profiles and no profile is decoded twice.
class Spill {
public:
  // Unnamed files in `dir` (the system's temporary directory when empty), gone on close: one
  // per thread of a task arena that appends (`files`), since threads appending to one file
  // wait on each other for its lock. A place in the spill names the file in its top byte.
  static Expected<std::unique_ptr<Spill>> create(const std::filesystem::path& dir, unsigned files = 1);
  ~Spill();
  Spill(const Spill&) = delete;
  Spill& operator=(const Spill&) = delete;
  // MT: thread-safe. Where the bytes went.
  Expected<uint64_t> append(std::span<const uint8_t> bytes);
  // MT: thread-safe. The pieces end to end, in one write where the system allows (a write
  // costs several microseconds on a virtual machine, whatever its size); where the first went.
  Expected<uint64_t> append(std::span<const std::span<const uint8_t>> pieces);
  // MT: thread-safe. `at` and on: bytes appended together may be read in parts.
  Status read(uint64_t at, std::span<uint8_t> into) const;

private:
  static constexpr unsigned kFileShift = 56;
  struct File {
    int fd = -1;
    std::atomic<uint64_t> end{0};
    SpaceAhead space;
  };
  Spill(std::unique_ptr<File[]> files, unsigned n, std::string dir)
      : files_(std::move(files)), numFiles_(n), dir_(std::move(dir)) {}
  std::unique_ptr<File[]> files_;
  unsigned numFiles_;
  std::string dir_;
};

// A measured value or trace record as pass 1 spills it (contexts are valid for the whole
// analysis; their ids are known after finalization).
struct SpilledValue {
  const Context* ctx = nullptr;
  double value = 0;
  uint32_t metric = 0;  // local metric id
  uint32_t unused = 0;
};
// A profile's trace as pass 1 spills it: the table of the distinct nodes its records name,
// each with its context (nullptr: none, idle). The records stay in the trace file, which
// pass 2 reads again and converts with this table as it writes them out: spilling them cost
// more than reading them twice (a trace is most of a measurement's bytes).
struct SpilledTraceNode {
  const Context* ctx = nullptr;
  uint32_t node = 0;
  uint32_t unused = 0;
};
// "<tool>: warning: <what> <file>: <why>" (hpcprof or hpcprof-mpi), the file named once where
// the reader's message begins with it already ("<file>: offset 0x10: ...").
void warnProfile(const char* what, const std::string& path, const std::string& why);

// What the first pass keeps of a profile until its second pass: its header and where its
// values went in the spill file.
struct Unified {
  ProfileHeader header;
  uint64_t spillAt = 0;
  uint32_t values = 0;
  uint32_t traceContexts = 0;  // the spilled trace's table of nodes (SpilledTraceNode)
  uint64_t traceRecords = 0;   // as pass 1 counted them
  std::string valuesError;  // non-empty: values or trace unreadable (the profile stays, empty)
};

// Pass 1 (class 1): reads every profile once, unifies its tree into the expander's CCT and
// spills its values, in parallel on `arena`; out[i] belongs to profiles[i]. Unreadable
// profiles are warned about; a failed write to the spill (a full disk) is returned: the
// analysis cannot go on without those profiles' values.
// After the first profile, the others are unified on at most as many threads as
// options.scratchBudget allows for its size (unifyThreads); how many goes to `threadsUsed`.
Status unifyProfiles(std::span<const std::unique_ptr<ProfileSource>> profiles, const Expander& expander,
                     Spill& spill, const PipelineOptions& options, tbb::task_arena& arena,
                     std::vector<Unified>& out, uint32_t* threadsUsed = nullptr);
// Pass 1's threads after a first profile of `nodes` nodes (and those that read ahead while it
// is unified): options.threads, or fewer where their scratch (about kUnifyBytesPerNode a
// node) would pass options.scratchBudget (2 at least).
constexpr uint64_t kUnifyBytesPerNode = 56;
uint32_t unifyThreads(const PipelineOptions& options, size_t nodes, bool say = true);  // say: -v prints it

// The database-wide facts derived from all profiles' headers, taken in profile order:
// the same on every rank that sees the same headers.
struct Plan {
  std::vector<size_t> live;  // positions of the usable profiles; live[k] has index k + 1
  // Per position: local -> global metric ids, one table for each distinct HeaderShared.
  const std::vector<uint32_t>& localToGlobal(size_t position) const { return metricMaps[mapOf[position]]; }
  std::vector<std::vector<uint32_t>> metricMaps;
  // Pass 2 propagates the metrics some profile has values of (`propagated` of them, in
  // global order), not every metric described: per position, local -> propagated index
  // (kNotPropagated: never measured), and propagated id k * kNumScopes + s's id in the
  // database (propIds; empty where every metric is propagated: the same id).
  static constexpr uint32_t kNotPropagated = ~uint32_t(0);
  const std::vector<uint32_t>& localToPropagated(size_t position) const { return propagatedMaps[mapOf[position]]; }
  std::vector<std::vector<uint32_t>> propagatedMaps;
  uint32_t propagated = 0;
  std::vector<uint16_t> propIds;
  std::vector<uint32_t> mapOf;  // per position: its table in metricMaps (0, empty, if not usable)
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

// Pass 2's threads for a tree of `contexts` with `propagated` metrics: options.threads, or
// fewer where their propagators' scratch would pass options.scratchBudget (2 at least).
uint32_t propagateThreads(const PipelineOptions& options, uint32_t contexts, uint32_t propagated);

// Pass 2 for one live profile, split in two for callers that write in profile order:
// computeProfile reads its spilled values and propagates them (the propagator counts the
// values per context; MT: thread-safe for distinct profiles, one Propagator per thread);
// writeProfile writes the row and trace. Contexts must be finalized.
struct PropagatedProfile {
  SparseRow row;
  std::vector<TracePoint> trace;
  bool hasTrace = false;
  bool traceWritten = false;  // to the sink's TraceLines already (else `trace`, to write)
};
// `ids` are the tree's (Cct::ids()); `localToPropagated` and `propIds` are the profile's
// Plan::localToPropagated and the plan's propIds; the propagator works on Plan::propagated
// metrics. With `lines` (whose lines
// are placed by the Unified's traceRecords), the trace goes there as it is read, as profile
// `index`'s (a chunk at a time: never held whole, but where out of order); else into
// out.trace, for writeProfile.
Status computeProfile(ProfileSource& source, const Spill& spill, const Unified& u, const ContextIds& ids,
                      const std::vector<uint32_t>& localToPropagated, const std::vector<uint16_t>& propIds,
                      Propagator& propagator, PropagatedProfile& out, TraceLines* lines = nullptr,
                      uint32_t index = 0);
Status writeProfile(DatabaseSink& sink, uint32_t index, const std::vector<IdOut>& idTuple,
                    const PropagatedProfile& p);

// Pass 2 (class 2) for one live profile: computeProfile then writeProfile; its trace to the
// sink's streamedTraces() where it has them (placed before).
// MT: thread-safe for distinct profiles (one Propagator per thread).
Status propagateProfile(ProfileSource& source, const Spill& spill, const Unified& u, const ContextIds& ids,
                        const std::vector<uint32_t>& localToPropagated, const std::vector<uint16_t>& propIds,
                        uint32_t index, const std::vector<IdOut>& idTuple, Propagator& propagator,
                        DatabaseSink& sink);
// The values per context written by all of these propagators.
std::vector<uint64_t> sumCounts(tbb::enumerable_thread_specific<Propagator>& propagators, uint32_t contexts);
// The same by (context, propagated metric) (Propagator::metricCounts); empty where the
// propagators keep none.
std::vector<uint32_t> sumMetricCounts(tbb::enumerable_thread_specific<Propagator>& propagators);

}  // namespace hpc::analysis
