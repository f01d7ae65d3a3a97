// Measurement files written by hpcrun: the sparse call-path profile (.hpcrun, format
// 04.00) and the trace (.hpctrace, 01.00/01.01). An in-memory model of each, readers
// that check every length, count and offset against the file, writers that produce the
// reference's bytes (through encode.hpp, the runtime's own encoder), and a dump.
// Layout details: README.md beside this file and reference/hpcrun-fmt.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <iosfwd>
#include <span>
#include <string>
#include <vector>

#include "common/status.hpp"

namespace hpc::hpcrun {

struct NvPair {
  std::string name, value;
  bool operator==(const NvPair&) const = default;
};

enum MetricType : uint8_t { kMetricNull = 0, kMetricRaw = 1, kMetricFinal = 2, kMetricDerived = 3 };
enum MetricValType : uint8_t { kValTypeNull = 0, kValTypeIncl = 1, kValTypeExcl = 2 };
enum MetricValFmt : uint8_t { kValFmtNull = 0, kValFmtInt = 1, kValFmtReal = 2 };

struct MetricFlags {
  uint8_t type = kMetricRaw;
  uint8_t val_type = kValTypeNull;
  uint8_t val_fmt = kValFmtReal;
  uint8_t move2proc = 0;
  uint16_t partner = 0;
  uint8_t show = 1;  // 0 hide, 1 show, 2 inclusive only, 3 exclusive only, 4 invisible
  uint8_t show_percent = 1;
  uint64_t unused = 0;
  bool operator==(const MetricFlags&) const = default;
};

struct MetricDesc {
  std::string name, description;
  MetricFlags flags;
  uint64_t period = 0;
  std::string formula, format;
  uint16_t is_frequency_metric = 0;
  uint16_t is_multiplexed = 0;
  double threshold_mean = 0;
  uint64_t num_samples = 0;
  bool operator==(const MetricDesc&) const;  // threshold_mean compared bitwise (NaN == NaN)
};

struct LoadModule {
  uint16_t id = 0;
  std::string name;
  uint64_t flags = 0;  // 1: analyze this module
  bool operator==(const LoadModule&) const = default;
};

// One non-zero value of a node. `bits` holds a double or an integer per the metric's
// val_fmt; the metric id is the position in Profile::metrics.
struct MetricValue {
  uint16_t metric_id = 0;
  uint64_t bits = 0;
  double as_real() const;
  bool operator==(const MetricValue&) const = default;
};

// A placeholder node's tag (lm_id 0): 8 characters, the first in the high byte, as hpcrun
// writes them ("^Primary", "| Main  ", "GPUKernl", ...).
constexpr uint64_t placeholder_tag(const char (&s)[9]) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | uint8_t(s[i]);
  return v;
}

struct CctNode {
  uint32_t id = 0;
  uint32_t parent_id = 0;  // 0: a root
  uint16_t lm_id = 0;      // 0: no load module (placeholders; lm_ip then holds a tag)
  uint64_t lm_ip = 0;      // offset in the load module
  uint8_t unwound = 1;     // 0: placed without an unwind (e.g. GPU samples)
  std::vector<MetricValue> values;
  bool operator==(const CctNode&) const = default;
};

enum IdKind : uint16_t {
  kIdSummary = 0, kIdNode = 1, kIdRank = 2, kIdThread = 3,
  kIdGpuDevice = 4, kIdGpuContext = 5, kIdGpuStream = 6, kIdCore = 7,
};
// Interpretation (high 2 bits of the raw kind): 0 both indices valid, 1 logical is
// local (to be made global by hpcprof), 2 logical is global, 3 only logical valid.
struct IdEntry {
  uint16_t raw_kind = 0;
  uint64_t physical = 0;
  uint64_t logical = 0;
  uint16_t kind() const { return raw_kind & 0x3fff; }
  uint16_t interpret() const { return raw_kind >> 14; }
  bool operator==(const IdEntry&) const = default;
};

struct IdKindName {
  uint16_t kind = 0;
  std::string name;
  bool operator==(const IdKindName&) const = default;
};

// A value read without its node (ReadParts::nodes off): the node id as the file gives it.
struct NodeValue {
  uint32_t node_id = 0;
  MetricValue value;
  bool operator==(const NodeValue&) const = default;
};

struct Profile {
  std::string version = "04.00";
  std::vector<NvPair> header;  // program-name, process-id, trace-min-time, ...
  std::vector<LoadModule> load_modules;
  std::vector<CctNode> nodes;  // file order: parents may follow children
  std::vector<MetricDesc> metrics;
  std::vector<IdKindName> id_kinds;  // the file's id-tuple dictionary
  std::vector<IdEntry> id_tuple;
  // Order of nodes in the sparse value table; empty means nodes order (the reference's).
  std::vector<uint32_t> value_order;
  // Only when read with ReadParts{.nodes = false}: the values in file order.
  std::vector<NodeValue> flat_values;

  const std::string* header_value(std::string_view name) const;
  bool operator==(const Profile&) const = default;
};

struct TraceRecord {
  uint64_t time = 0;  // nanoseconds since the epoch
  uint32_t cct_id = 0;
  uint32_t metric_id = 0;  // only with kTraceDataCentric
  bool operator==(const TraceRecord&) const = default;
};

inline constexpr uint64_t kTraceDataCentric = 1u << 0;
inline constexpr uint64_t kTraceLcaRecorded = 1u << 1;
inline constexpr uint64_t kTraceCallTrace = 1u << 2;

struct Trace {
  std::string version = "01.01";  // "01.00" has no flags word
  uint64_t flags = 0;
  std::vector<TraceRecord> records;
  bool operator==(const Trace&) const = default;
};

enum class FileKind { Unknown, Profile, Trace };
FileKind sniff(std::span<const uint8_t> leading_bytes);

// Which parts a reader materializes (hpcprof reads a profile's tree and its values in
// separate passes). The header, load map, metric table, dictionary and id tuple are always
// read. nodes: the cct section. values: the sparse values, on their nodes when `nodes`, else
// in Profile::flat_values, unchecked against the tree (the caller holds it).
struct ReadParts {
  bool nodes = true;
  bool values = true;
};

// The cct section of a profile held in memory, checked (count and bounds) but not decoded:
// hpcprof decodes each node once, straight into its own form.
struct CctView {
  struct Node {
    uint32_t id = 0, parent_id = 0;
    uint16_t lm_id = 0;
    uint8_t unwound = 1;
    uint64_t lm_ip = 0;
  };
  static constexpr size_t kNodeBytes = 19;
  const uint8_t* data = nullptr;  // the first node's 19 bytes
  uint64_t count = 0;
  Node operator[](uint64_t i) const {
    const uint8_t* b = data + i * kNodeBytes;
    Node n;
    n.id = load<uint32_t>(b);
    n.parent_id = load<uint32_t>(b + 4);
    n.lm_id = load<uint16_t>(b + 8);
    n.lm_ip = load<uint64_t>(b + 10);
    n.unwound = b[18];
    return n;
  }

private:
  template <typename T> static T load(const uint8_t* b) {
    T v;
    __builtin_memcpy(&v, b, sizeof v);
    if constexpr (sizeof(T) == 2) return T(__builtin_bswap16(v));
    else if constexpr (sizeof(T) == 4) return T(__builtin_bswap32(v));
    else return T(__builtin_bswap64(v));
  }
};

// hpcprof's one pass over a profile in memory. Fills `p` as parse_profile(ReadParts{.nodes =
// false}) does, values flat in p.flat_values (p's vectors are cleared, capacity kept), and
// `cct` with the checked cct section, which stays in `bytes`. Returns an error when anything
// but the values is unreadable (the tree is unusable); an error in the values alone goes to
// `values_status`, with p.flat_values left empty.
//
// `reuse`, if given (kept by the caller with `p` from profile to profile): a load map whose
// section is byte-equal to the last one parsed with it is not parsed again (p.load_modules
// kept as they are: a Python program maps thousands of modules, every thread's profile
// lists them all), and reuse->loadMap.generation, unique across all of them, names
// p.load_modules' content: equal generations, equal load maps. The metric table likewise
// (p.metrics, reuse->metrics.generation: a GPU measurement's profiles each describe 93).
struct SectionReuse {
  struct Kept {
    std::vector<uint8_t> section;
    uint64_t generation = 0;  // 0: none parsed yet (or the last one failed)
  };
  Kept loadMap, metrics;
};
Status parse_profile_flat(std::span<const uint8_t> bytes, const std::string& name, Profile& p, CctView& cct,
                          Status& values_status, SectionReuse* reuse = nullptr);

// `name` labels errors ("<name>: offset 0x..: expected ...").
Expected<Profile> parse_profile(std::span<const uint8_t> bytes, const std::string& name,
                                ReadParts parts = {});
Expected<Profile> read_profile(const std::filesystem::path& path, ReadParts parts = {});
Expected<std::vector<uint8_t>> encode_profile(const Profile& p);
Status write_profile(const Profile& p, const std::filesystem::path& path);

Expected<Trace> parse_trace(std::span<const uint8_t> bytes, const std::string& name);
// The same into `t`, whose records' capacity is reused.
Status parse_trace(std::span<const uint8_t> bytes, const std::string& name, Trace& t);
// A trace's records where they are, after parse_trace's checks: record(k) decodes one, so a
// reader fills its own records with no copy in between.
struct TraceView {
  std::string version;
  uint64_t flags = 0;
  const uint8_t* first = nullptr;  // the first record
  uint64_t stride = 12;            // 16 with kTraceDataCentric
  uint64_t count = 0;
  // Bytes after the last whole record (a file cut short, as by a crash while it was being
  // written), and the error that names them; count holds the whole records before them.
  uint64_t trailing = 0;
  Status trailingError;
  TraceRecord record(uint64_t k) const {
    const uint8_t* p = first + k * stride;
    uint64_t t;
    uint32_t id, metric = 0;
    std::memcpy(&t, p, 8);
    std::memcpy(&id, p + 8, 4);
    if (stride == 16) std::memcpy(&metric, p + 12, 4);
    return {__builtin_bswap64(t), __builtin_bswap32(id), __builtin_bswap32(metric)};
  }
};
// An error for a bad header; a body cut short is not one (out.trailing, out.trailingError):
// its whole records are there to keep. parse_trace and read_trace refuse it.
Status view_trace(std::span<const uint8_t> bytes, const std::string& name, TraceView& out);
// The same from the first bytes of a file of `size` bytes (its header at least, or all of it):
// count and trailing are the whole file's, `first` points into `bytes`, and the records past
// them are read apart (record k at file offset (first - bytes.data()) + k * stride).
Status view_trace(std::span<const uint8_t> bytes, uint64_t size, const std::string& name, TraceView& out);
Expected<Trace> read_trace(const std::filesystem::path& path);
Expected<std::vector<uint8_t>> encode_trace(const Trace& t);
Status write_trace(const Trace& t, const std::filesystem::path& path);

// Prints a profile or trace (chosen by magic) readably: header, id tuple, metrics,
// load map, CCT as an indented tree with values; trace record count and time range.
Status dump(const std::filesystem::path& path, std::ostream& out);
void dump_profile(const Profile& p, std::ostream& out);
void dump_trace(const Trace& t, std::ostream& out, size_t max_records = 20);

}  // namespace hpc::hpcrun
