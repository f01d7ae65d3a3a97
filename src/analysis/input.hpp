// What the pipeline needs from a measurement: the contract between the analysis and the
// readers of src/formats. Adapters (hpcrun_source.cpp, struct_source.cpp) fill these.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.hpp"

namespace hpc::analysis {

// hpcrun marks tree positions that are not code with placeholder nodes.
enum class Placeholder : uint8_t {
  None,        // a real instruction (load module, offset)
  Root,        // the tree's root
  NoActivity,  // idle time in a trace; attributed to no context
  MainThread,  // entry: main thread set-up
  Thread,      // entry: application thread set-up
  // A GPU operation under its CPU launch context: a named function context of its own.
  // The GPU code (if any) hangs below it; without any, the values sit on it directly.
  GpuKernel,
  GpuCopy,
  GpuMemset,
  GpuSync,
  GpuAlloc,
  GpuTrace,    // a GPU stream's trace path (the reference names it like a kernel)
  Other,       // anything else: transparent, its children hang on its parent's context
};

// True for the GPU-operation placeholders.
constexpr bool isGpuPlaceholder(Placeholder p) {
  return p >= Placeholder::GpuKernel && p <= Placeholder::GpuTrace;
}

// 24 bytes (the offset last: no padding): a thread holds two trees of them, and a large
// tree's lists pass through the caches at every unification.
struct TreeNode {
  uint32_t id = 0;
  uint32_t parent = 0;  // 0: none
  uint16_t module = 0;  // load-map id, 0 for placeholders
  Placeholder placeholder = Placeholder::None;
  bool unwound = true;  // false: placed without an unwind (a GPU PC sample)
  uint64_t offset = 0;
};
static_assert(sizeof(TreeNode) == 24);

// One element of the profile's hierarchical identifier. `interpret` is hpcrun's
// IDTUPLE_IDS_* code: how the logical id is derived from the physical one.
struct IdIn {
  uint16_t kind = 0;
  uint8_t interpret = 0;
  uint64_t physical = 0;
  uint64_t logical = 0;
};

// A metric as the measurement describes it, for metrics/default.yaml: hpcrun's descriptor
// fields (show 0 hidden, 3 exclusive only, 4 an input only; a non-empty formula over the
// profile's own metric ids, #N, makes it derived: no values, the viewer computes it).
struct MetricDescIn {
  std::string name, description, format, formula;
  uint8_t show = 1, showPercent = 1;
  bool operator==(const MetricDescIn&) const = default;
};

// The part of a profile read in the first pass: who it is and its calling-context tree.
struct ProfileTree {
  std::string programName;  // the database title defaults to the first one
  std::vector<IdIn> idTuple;
  std::vector<std::string> metrics;                        // by local metric id
  std::vector<MetricDescIn> descs;  // the whole metric table, derived metrics included; may be empty
  // Names the content of metrics and descs where not 0, as loadMapGen does the load map's
  // (a reader that meets the table again keeps both as they are).
  uint64_t metricsGen = 0;
  std::vector<std::pair<uint16_t, std::string>> loadMap;  // (id, path)
  // Names loadMap's content where not 0: two trees with one loadMapGen have equal load maps
  // (a reader that meets a load map again keeps it, and its generation, without copying).
  uint64_t loadMapGen = 0;
  std::vector<TreeNode> nodes;
  bool hasTrace = false;
  // For unification's template (expand.hpp): `nodesId` names the content of `nodes` (0:
  // unnamed, never reused). A reader that reads into the same ProfileTree again and finds
  // the same nodes as last time may keep `nodes` and its id without decoding; before it
  // decodes new ones it moves the old ones, with their id, to previousNodes.
  uint64_t nodesId = 0;
  std::vector<TreeNode> previousNodes;
  uint64_t previousNodesId = 0;
  // The largest id in `nodes`, where the reader found it as it decoded them: valid while
  // maxIdOf == nodesId (0: unknown, unification finds it).
  uint32_t maxId = 0;
  uint64_t maxIdOf = 0;
};

// The largest node id of a tree: the reader's where it found it, else counted.
inline uint32_t maxNodeId(const ProfileTree& t) {
  if (t.maxIdOf != 0 && t.maxIdOf == t.nodesId) return t.maxId;
  uint32_t most = 0;
  for (const TreeNode& n : t.nodes) most = most < n.id ? n.id : most;
  return most;
}

struct PointValue {
  uint32_t node = 0;
  uint16_t metric = 0;  // local metric id
  double value = 0;
};

struct TraceRecord {
  uint64_t time = 0;  // nanoseconds
  uint32_t node = 0;
};

// A profile's measured values and trace records.
struct ProfileValues {
  std::vector<PointValue> values;
  std::vector<TraceRecord> trace;
};

// Lists the distinct node ids that a trace's records name, in no particular order: a trace of
// millions of records names a few thousand. begin() with the profile's node count, add() its
// records in any number of calls (idAt(k): the k-th's id), then list() them. Ids below a few
// times the node count (a sane file's, numbered from 1, or by 2s as the reference numbers
// them) are looked up by index, larger ones (threads numbered from one counter) in a hash set.
// A thread keeps one, reused: its index is only grown.
class TraceNodeLister {
public:
  void begin(size_t nodes) {
    out_.clear();
    bound_ = std::max<size_t>(4 * nodes + 2, 4096);
    if (stamp_.size() < bound_) stamp_.resize(bound_, 0);
    if (++turn_ == 0) {  // wrapped: no stamp may look current
      std::fill(stamp_.begin(), stamp_.end(), 0);
      turn_ = 1;
    }
    largeCount_ = 0;
    large_.clear();
    haveLast_ = sawMax_ = false;
  }
  template <class IdAt> void add(uint64_t records, IdAt idAt) {
    uint32_t* const seen = stamp_.data();
    const uint32_t mine = turn_;
    const size_t bound = bound_;
    uint32_t last = last_;
    bool haveLast = haveLast_;
    for (uint64_t k = 0; k < records; ++k) {
      const uint32_t id = idAt(k);
      if (haveLast && id == last) continue;  // a trace stays in a context for many samples
      last = id;
      haveLast = true;
      if (id < bound) {
        if (seen[id] != mine) {
          seen[id] = mine;
          out_.push_back(id);
        }
      } else {
        addLarge(id);
      }
    }
    last_ = last;
    haveLast_ = haveLast;
  }
  const std::vector<uint32_t>& list() const { return out_; }

private:
  void addLarge(uint32_t id) {
    if (id == ~0u) {  // the hash set's empty mark
      if (!sawMax_) out_.push_back(id);
      sawMax_ = true;
      return;
    }
    if (2 * (largeCount_ + 1) > large_.size()) {  // grow: at most half full
      std::vector<uint32_t> was(std::max<size_t>(1024, large_.size() * 2), ~0u);
      was.swap(large_);
      for (uint32_t k : was)
        if (k != ~0u) insert(k);
    }
    if (insert(id)) {
      ++largeCount_;
      out_.push_back(id);
    }
  }
  bool insert(uint32_t id) {  // false: there already
    const size_t mask = large_.size() - 1;
    for (size_t h = (id * 0x9E3779B1u) & mask;; h = (h + 1) & mask) {
      if (large_[h] == id) return false;
      if (large_[h] == ~0u) {
        large_[h] = id;
        return true;
      }
    }
  }
  std::vector<uint32_t> out_;
  std::vector<uint32_t> stamp_;  // by id: the turn that listed it
  uint32_t turn_ = 0;
  size_t bound_ = 0;
  std::vector<uint32_t> large_;  // open addressing; ~0u: empty
  size_t largeCount_ = 0;
  uint32_t last_ = 0;
  bool haveLast_ = false, sawMax_ = false;
};

// A whole profile, as the pipeline's first pass reads it: the tree, the values, and of the
// trace only what its records name (the second pass reads the records, ProfileSource::
// readTrace, and writes them out as it converts them: nothing of them goes to the spill).
struct ProfileData {
  ProfileTree tree;
  ProfileValues values;  // values only: the trace is in traceNodes and traceRecords
  std::vector<uint32_t> traceNodes;  // TraceNodeLister's list of the trace
  uint64_t traceRecords = 0;
  // The trace's nodes not listed (a long trace, not read in pass 1): any node of the tree.
  bool traceAllNodes = false;
  // Not ok: the values or the trace are unreadable (the tree is fine); `values` is then
  // empty and the profile stays in the database without values, with a warning.
  Status valuesStatus;
  // Not ok: the trace was unreadable (then the tree has none) or cut short (then its whole
  // records are in `values`); the profile is analysed, with this as a warning.
  Status traceStatus;
  // The reader's: the file last read and the one before, and where the encoded nodes are in
  // each, so that the next read can tell whether its nodes are the same.
  std::vector<uint8_t> bytes, previousBytes;
  size_t nodesAt = 0, nodesLength = 0;
  // Where set, the reader compares the nodes it reads with this one's (its bytes, as read
  // last, and their tree's nodesId) rather than with the file it read before, and keeps no
  // previous file: threads compare with one profile's buffers, shared, with no copy of them.
  const ProfileData* reference = nullptr;
};

// One input profile.
class ProfileSource {
public:
  virtual ~ProfileSource() = default;
  virtual const std::string& path() const = 0;
  // MT: each source is used by one task at a time.
  virtual Expected<ProfileTree> readTree() = 0;
  virtual Expected<ProfileValues> readValues() = 0;
  // The tree, values and trace in one go, into `out` (its vectors' capacity reused); an
  // error when the tree is unreadable. This default reads them apart.
  virtual Status read(ProfileData& out) {
    HPC_ASSIGN_OR_RETURN(out.tree, readTree());
    out.tree.nodesId = 0;
    Expected<ProfileValues> v = readValues();
    out.valuesStatus = v.ok() ? Status() : v.status();
    if (v.ok()) out.values = std::move(*v);
    else out.values = {};
    const std::vector<TraceRecord>& tr = out.values.trace;
    thread_local TraceNodeLister lister;
    lister.begin(out.tree.nodes.size());
    lister.add(tr.size(), [&](uint64_t k) { return tr[k].node; });
    out.traceNodes = lister.list();
    out.traceRecords = tr.size();
    out.traceAllNodes = false;
    out.values.trace = {};
    return Status();
  }
  // Pass 2 (the first read only what the records name): the trace's records, in order, a
  // chunk at a time: each(chunk) for each, until it returns false (enough) or an error, or
  // the records end. A chunk is valid during the call. This default reads the values again.
  using TraceChunk = std::function<Expected<bool>(std::span<const TraceRecord>)>;
  virtual Status readTrace(const TraceChunk& each) {
    HPC_ASSIGN_OR_RETURN(ProfileValues v, readValues());
    return each(v.trace).status();
  }
};

// One step of the lexical nesting of an instruction, outermost first. Its names view the
// structure source's own (valid as long as it is): an instruction expanded is a few steps,
// and copying their names was an allocation each.
struct ScopeStep {
  enum class Kind : uint8_t { Procedure, Inline, Loop, Line };
  Kind kind = Kind::Line;
  std::string_view name;  // Procedure / Inline
  std::string_view file;  // may be empty when unknown
  uint32_t line = 0;
  uint64_t offset = 0;   // Procedure: entry; Loop: header address
  uint64_t site = 0;     // Inline: identity of the inline site within the module
  // Procedure of no binary (a Python function, a JIT's method): one function wherever it is
  // met (every process's table or perf map), by name, file and line alone.
  bool moduleless = false;
};

// A call whose callee is known, as a structure file's C element with a target (GPU code):
// the call instruction's address, the entry of the procedure it lies in, and the callee's
// entry. The static call graph that GPU calling contexts are reconstructed from.
struct CallSite {
  uint64_t site = 0;
  uint64_t caller = 0;
  uint64_t callee = 0;
  bool operator==(const CallSite&) const = default;
};

// Address -> source structure, for the modules that have structure.
class StructureSource {
public:
  virtual ~StructureSource() = default;
  // MT: thread-safe. False when the module or address has no structure; then the
  // instruction stays an instruction.
  virtual bool lookup(const std::string& modulePath, uint64_t offset,
                      std::vector<ScopeStep>& out) const = 0;
  // MT: thread-safe. False only when lookup() fails for every address of the module (then
  // its instructions are placed without asking, or caching the answer).
  virtual bool mayCover(const std::string& modulePath) const {
    (void)modulePath;
    return true;
  }
  // MT: thread-safe. Makes ready what lookup() will need for these offsets of the module
  // (`offsets` may be reordered), with the idle threads of the caller's task arena helping.
  // Never changes what lookup() gives.
  virtual void prepare(const std::string& modulePath, std::vector<uint64_t>& offsets) const {
    (void)modulePath;
    (void)offsets;
  }
  // MT: thread-safe. Every call site of the module whose callee is known (any order); empty
  // where the structure has none (CPU code: its calls are in the measured call paths).
  virtual void callSites(const std::string& modulePath, std::vector<CallSite>& out) const {
    (void)modulePath;
    out.clear();
  }
};

}  // namespace hpc::analysis
