// The profile views over an Experiment, computed on demand: top-down (children of a
// context, hot path, the N hottest contexts), bottom-up (functions, then their callers)
// and flat aggregations (by load module, file, function or source line).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "presentation/experiment.hpp"

namespace hpc::present {

// ---- Top-down.
// Children of `ctx`, hottest first by the metric's inclusive (or exclusive) value.
std::vector<uint32_t> sorted_children(const Experiment& e, uint32_t ctx, const MetricView& m, bool byExclusive = false);
// A list of profile.db rows as "1,3,5-8" (the summary, 0, excluded; at most 100,000), sorted,
// each once; `what` names the option or parameter in the error.
Expected<std::vector<uint32_t>> parse_profile_list(const std::string& text, size_t profiles, const std::string& what);
// Indices and ranges "0,3,5-9" from `first` up to below `limit`, in the order given (hpcserver's
// trace lines); `noun` names one in errors ("trace line").
Expected<std::vector<uint32_t>> parse_index_list(const std::string& text, uint64_t first, uint64_t limit,
                                                 const std::string& what, const std::string& noun);
// From `ctx` down, the chain of children each holding at least `threshold` (0..1) of
// its parent's inclusive value; `ctx` itself first.
std::vector<uint32_t> hot_path(const Experiment& e, uint32_t ctx, const MetricView& m, double threshold);
// The `n` contexts with the largest inclusive values, found best first from the root
// (a child never exceeds its parent, so the set is closed under parents). Tree order.
std::vector<uint32_t> hottest_contexts(const Experiment& e, const MetricView& m, size_t n);

// ---- hpcviewer's CCT filters: glob patterns (fnmatch) on contexts' names in the top-down
// tree. A context matched in mode Self is replaced by its own children (filtered in turn);
// in SelfAndDescendants it is left out with its subtree; in Descendants it stays, without
// children. The first filter that matches decides. Inclusive values are the database's (an
// ancestor's still counts what is hidden below it); what is hidden becomes the exclusive cost
// of the nearest context shown above it (filter_absorbed).
enum class FilterMode { Self, Descendants, SelfAndDescendants };
struct CctFilter {
  std::string pattern;
  FilterMode mode = FilterMode::Self;
};
// Whether a filter's glob matches a context's name: the name as shown, or the function's own
// name within it (without an inlined call's "[I] " and a procedure's " [module]"), or that
// name
// and without its compiler clones' suffixes (".constprop.0", ".isra.0", ".part.0", ".cold", ...).
bool filter_matches(const std::string& pattern, const std::string& name);
// A function's name without the suffixes compilers give its clones, in any number and order:
// "f.constprop.0.isra.0" -> "f", "g.cold" -> "g", "h.llvm.123" -> "h".
std::string_view strip_clone_suffixes(std::string_view name);
// "self", "descendants" or "all"; false for anything else.
bool parse_filter_mode(const std::string& s, FilterMode& out);
struct FilteredChild {
  uint32_t ctx;
  bool leaf;  // its children hidden (Descendants)
};
// The children of `ctx` as the filters show them, at most `limit` (contexts replaced by their
// children are walked without recursion, however deep).
std::vector<FilteredChild> filtered_children(const Experiment& e, uint32_t ctx, const std::vector<CctFilter>& filters,
                                             size_t limit = SIZE_MAX);

// What the filters hide below a context that is shown (`leaf`: a "descendants" match) and
// that, as hpcviewer's filters do, becomes its own exclusive cost: contexts hidden alone
// ("self") leave it the cost at them (their inclusive value less their children's; their
// children are shown in their place), hidden subtrees ("all", and everything below a
// "descendants" match) their whole cost. Inclusive values stay as they are.
struct FilterAbsorbed {
  std::vector<uint32_t> own, whole;  // hidden alone; roots of hidden subtrees
};
FilterAbsorbed filter_absorbed(const Experiment& e, uint32_t ctx, bool leaf, const std::vector<CctFilter>& filters);
// The cost those contexts leave, from a metric's inclusive values.
double absorbed_value(const Experiment& e, const FilterAbsorbed& a, const std::function<double(uint32_t)>& inclusive);

// ---- Call path queries (hpcreport --query; the Python API's Database.query reads the same
// language): steps separated by "/", the contexts matched those the last step matches along a
// path on which the steps before matched in order. "**" any number of contexts (none
// included), "*" any one, GLOB a context whose name matches (filter_matches: a function's own
// name too), KIND:GLOB one of kind entry, function (called or inlined), inlined, loop, line or
// instruction, module:GLOB a context of a module whose path or file name matches (a function
// context's: its function's), file:GLOB a context whose source file's path or file name
// matches. A leading "/" anchors the path at the top (an entry point first); without it, it
// may start anywhere. "\/" is a "/" within a glob.
struct PathStep {
  enum class Kind { AnyMany, Any, Name, Entry, Function, Inlined, Loop, Line, Instruction, Module, File };
  Kind kind = Kind::Name;
  std::string glob;
};
struct PathQuery {
  std::vector<PathStep> steps;
  bool anchored = false;
};
// Errors name the step that is wrong; at most 61 steps.
Expected<PathQuery> parse_path_query(const std::string& text);
struct QueryMatch {
  uint32_t ctx;
  bool outermost;  // no context above it on its path matched
};
// Every context the query matches, in tree order (each parent before its children); walked
// without recursion. The callback form holds nothing per match (a server keeps only the rows
// it sends: "*" matches every context).
std::vector<QueryMatch> query_contexts(const Experiment& e, const PathQuery& q);
void for_each_match(const Experiment& e, const PathQuery& q, const std::function<void(const QueryMatch&)>& each);
// How a match is listed: the entry point and the function contexts above it, then its own
// name, joined by " > " ("main thread > main > spinsleep > loop at small.c:3").
std::string match_path_name(const Experiment& e, uint32_t ctx);

// ---- Bottom-up: a node is a path of keys, a function then its callers outward.
// Key of a function is its index in meta.functions; of an entry point, kEntryKey|ctxId.
inline constexpr uint64_t kEntryKey = 1ull << 32;

struct Aggregate {
  uint64_t key = 0;
  std::vector<double> inc, exc;  // per metric of Experiment::metrics()
  bool hasChildren = false;
};

// The callers tree, computed per request from the Experiment's in-memory tree (parent and
// function of every context): nothing is indexed or kept between requests, and values are
// read for the instances a node covers only. `metrics` are indices into
// Experiment::metrics() (all when empty); Aggregate::inc/exc follow their order.
// MT: const methods are thread-safe.
class CallerIndex {
public:
  explicit CallerIndex(const Experiment& e, std::vector<size_t> metrics = {});
  // The node `path` (non-empty); its children, one per distinct next caller.
  std::vector<Aggregate> children(const std::vector<uint64_t>& path) const;
  // Roots: every function with its values (inclusive over outermost instances).
  std::vector<Aggregate> roots() const;
  // Values of the node `path` itself.
  Aggregate node(const std::vector<uint64_t>& path) const;
  std::string key_name(uint64_t key) const;
  // The nearest function context or entry point strictly above `ctx`, or kNoCtx.
  uint32_t caller_of(uint32_t ctx) const;
  uint64_t key_of(uint32_t ctx) const;

private:
  // Calls f(instance ctx, outermost, caller at the path's end) for each instance of
  // path[0] whose callers outward match the rest of the path.
  template <typename F> void for_each_match(const std::vector<uint64_t>& path, F&& f) const;
  void add(uint32_t ctx, bool withInclusive, Aggregate& a) const;
  Aggregate empty(uint64_t key) const;
  // From the second query on (hpcreport asks one per row; a server request one), the function
  // contexts by function and every context's caller are indexed once: a query then visits
  // its function's contexts only, not every context, and a caller is one load, not a walk up
  // through the lines and loops between (8 bytes a context).
  void index() const;
  const Experiment& e_;
  std::vector<size_t> ms_;
  mutable uint32_t queries_ = 0;
  mutable std::vector<uint32_t> byFunctionStart_, byFunction_;  // function fn: [start[fn], start[fn + 1])
  mutable std::vector<uint32_t> caller_;                        // by ctxId, once indexed
};

// ---- Flat.
enum class FlatBy { Module, File, Function, Line, Loop };
bool parse_flat_by(const std::string& s, FlatBy& out);
// The report section of a flat view: "flat-module", "flat-file", "flat-function", ...
const char* flat_section(FlatBy by);

struct FlatRow {
  uint64_t key = 0;  // module/file/function index, or file<<32|line
  std::string name;
  uint32_t module = UINT32_MAX, file = UINT32_MAX, line = 0;
  std::vector<double> inc, exc;  // per metric
};

// Groups anchors (function contexts; line contexts for Line) by key: exclusive sums all
// anchors, inclusive only those with no ancestor anchor of the same key (recursion).
// Compact: 8 bytes a key and 16 a metric, the asked `metrics` only (indices into
// Experiment::metrics(), all when empty; columns follow their order). Rows in key order.
struct FlatTable {
  size_t nm = 0;
  std::vector<uint64_t> keys;
  std::vector<double> values;    // per row: inc[0..nm) then exc[0..nm)
  std::vector<uint8_t> hasCaller;  // Function only: some instance has a caller (bottom-up)
  size_t size() const { return keys.size(); }
  double inc(size_t row, size_t m) const { return values[row * 2 * nm + m]; }
  double exc(size_t row, size_t m) const { return values[row * 2 * nm + nm + m]; }
  // The first n row indices, hottest first by column m (exclusive; ties: inclusive, then
  // key); in key order when m is not a column.
  std::vector<uint32_t> top(size_t m, size_t n) const;
};
FlatTable flat_table(const Experiment& e, FlatBy by, const std::vector<size_t>& metrics = {});
// The n hottest rows of flat_table(e, by, metrics) by its first column (exclusive, then
// inclusive, then key), hottest first, and in `total` the table's row count, within about
// `budget` bytes of scratch: when the line keys might need more, one walk spills the anchors
// to temporary files by key hash and each file is aggregated alone.
FlatTable flat_top(const Experiment& e, FlatBy by, const std::vector<size_t>& metrics, size_t n, size_t& total,
                   size_t budget = 512u << 10);
// Row `i` of the table with its name and location.
FlatRow flat_row(const Experiment& e, FlatBy by, const FlatTable& t, size_t i);
// Every row of flat_table(e, by, metrics), named.
std::vector<FlatRow> flat_rows(const Experiment& e, FlatBy by, const std::vector<size_t>& metrics = {});

// ---- The flat view as hpcviewer's outline: the program's static structure. Load modules,
// then their source files, then the functions defined there; below a function what its body
// holds: loops and lines nested as in the source, code inlined there (`[I] f`) with its own
// body below, and call sites (`-> f`: the callee's cost from that place, no children). A
// function is every context of it: called or inlined, on any path (a context without a
// function, as without structure, is a function of its module's address). Exclusive values
// are the contexts' own (function scope: a call site has none); inclusive ones count each
// context whose path holds no other context of the same row (recursion counted once).
enum class StaticKind : uint8_t { Module, File, Function, Loop, Line, Inlined, Call, Instruction };
const char* static_kind_name(StaticKind k);
// A key as text ("s" and hex digits) and back, for paths passed around ("s1/s2a/s5").
std::string static_key_string(uint64_t key);
Expected<std::vector<uint64_t>> parse_static_path(const std::string& text);

struct StaticRow {
  std::vector<uint64_t> path;  // keys from the top level down, this row's last
  StaticKind kind = StaticKind::Module;
  std::string name;
  uint32_t file = db::kNone, line = 0;  // where its source is (a function: its definition)
  bool hasChildren = false;
  std::vector<double> inc, exc;  // per metric asked
};

// The rows one request found, named one at a time (a server streams them: some 40 bytes a row
// held, where each row named and held whole takes some 250). Holds the Experiment by reference.
class StaticRows {
public:
  size_t size() const { return order_.size(); }
  StaticRow row(size_t i) const;

private:
  friend class StaticTree;
  struct Node {
    uint64_t key;
    uint32_t parent;
    uint32_t ctx;  // a context of the row, for its name and source
  };
  // A node's kind (bits 0-2), whether it is a row (bit 3), whether it has children (bit 4).
  enum : uint8_t { kKindBits = 7, kRow = 8, kHasChildren = 16 };
  const Experiment* e_ = nullptr;
  size_t nm_ = 0;
  std::vector<Node> nodes_;     // the rows' paths as a trie: node 0 the empty path
  std::vector<uint8_t> flags_;  // by node
  std::vector<double> vals_;    // by node: inclusive [0, nm), exclusive [nm, 2 nm)
  std::vector<uint32_t> order_;  // the rows asked for, hottest first
};

// Computed per request in one depth-first pass over meta.db's tree; nothing is kept.
// MT: const methods are thread-safe.
class StaticTree {
public:
  explicit StaticTree(const Experiment& e, std::vector<size_t> metrics = {});
  // The rows `depth` levels below `path` (1: its children; `path` empty: the load modules),
  // with any that end above that depth (no children): hpcviewer's *Flatten*, which replaces
  // each top-level row by its children, is rows({}, 2), then rows({}, 3)... Hottest first by
  // the first metric's inclusive value, then exclusive, then as met; the first `limit` of them,
  // and in `total` how many there are.
  std::vector<StaticRow> rows(const std::vector<uint64_t>& path, uint32_t depth = 1, size_t limit = SIZE_MAX,
                              size_t* total = nullptr) const;
  // The same rows, named only as each is asked for.
  StaticRows find(const std::vector<uint64_t>& path, uint32_t depth = 1, size_t limit = SIZE_MAX,
                  size_t* total = nullptr) const;
  // The row at `path`, if some context has it.
  std::optional<StaticRow> node(const std::vector<uint64_t>& path) const;
  // At most this many rows and their paths held while a request is computed (about 70
  // bytes each with one metric): past it, rows() stops and answers nothing, with
  // over_budget() true (a server keeps its memory bounded: a view flattened down to the
  // lines of a million-context database holds some 800,000 rows).
  void set_row_budget(size_t rows) { budget_ = rows; }
  bool over_budget() const { return over_; }

private:
  struct Step;
  Step step(uint32_t ctx) const;
  const Experiment& e_;
  std::vector<size_t> ms_;
  size_t budget_ = SIZE_MAX;
  mutable bool over_ = false;
};

// A static-structure path with the module, file and function indices its keys hold put
// through `maps` (two runs compared: one database's rows as the other's). Position 0 is a
// module, 1 a file, 2 a function, the rest the function's body; each map answers db::kNone
// where it has no match (kNone itself stays kNone), and then so does this: nullopt.
struct IndexMaps {
  std::function<uint32_t(uint32_t)> module, file, function;
};
std::optional<std::vector<uint64_t>> remap_static_path(const std::vector<uint64_t>& path, const IndexMaps& maps);

// Sorts rows (Aggregate or FlatRow) hottest first by metric `m`.
template <typename Row>
void sort_rows(std::vector<Row>& rows, size_t m, bool byExclusive) {
  std::stable_sort(rows.begin(), rows.end(), [&](const Row& a, const Row& b) {
    const auto& va = byExclusive ? a.exc : a.inc;
    const auto& vb = byExclusive ? b.exc : b.inc;
    if (va[m] != vb[m]) return va[m] > vb[m];
    const auto& wa = byExclusive ? a.inc : a.exc;  // ties: the other column decides
    const auto& wb = byExclusive ? b.inc : b.exc;
    return wa[m] > wb[m];
  });
}

// ---- Per profile.
struct ProfileValue {
  uint32_t profIndex;
  double value;
};
// The values of `ctx` for propagated metric id `propId` in every measured profile
// that has one (cct.db; loaded on first use).
Expected<std::vector<ProfileValue>> profile_values(const Experiment& e, uint32_t ctx, uint16_t propId);

}  // namespace hpc::present
