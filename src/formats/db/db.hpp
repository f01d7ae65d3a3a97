// The HPCToolkit database, format v4 (reference/FORMATS.md): meta.db, profile.db,
// cct.db and trace.db. Plain structs for the contents, bounds-checked readers and
// spec-conforming writers, including streaming writers for hpcprof.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/bytes.hpp"
#include "common/status.hpp"

namespace hpc::db {

inline constexpr uint32_t kNone = UINT32_MAX;  // "no module/file/function" index

struct General {
  std::string title, description;
};

// PropagationScope {PS}. type: 0 custom, 1 point, 2 execution, 3 transitive.
struct Scope {
  std::string name;
  uint8_t type = 0;
  uint8_t propagationIndex = 255;
};
struct ScopeInstance {
  uint16_t scope = 0;  // index into Meta::scopes
  uint16_t propMetricId = 0;
};
// combine: 0 sum, 1 min, 2 max.
struct Summary {
  uint16_t scope = 0;
  std::string formula;
  uint8_t combine = 0;
  uint16_t statMetricId = 0;
};
struct Metric {
  std::string name;
  std::vector<ScopeInstance> scopeInsts;
  std::vector<Summary> summaries;
};
struct Module {
  uint32_t flags = 0;
  std::string path;
};
struct File {
  uint32_t flags = 0;  // bit 0: copied
  std::string path;
};
struct Function {
  std::optional<std::string> name;  // pName == 0 when absent
  uint32_t module = kNone;
  uint64_t offset = 0;
  uint32_t file = kNone;
  uint32_t line = 0;
  uint32_t flags = 0;
};

// {Ctx}: the flags byte is derived from which of function/file/module are set.
// relation: 0 lexical, 1 call, 2 inlined call. lexicalType: 0 function, 1 loop,
// 2 line, 3 instruction.
struct Context;
// A context's children: a vector that frees its subtree without recursion (deep recursion in
// an application makes call chains of hundreds of thousands of contexts, whose nested
// destruction overflowed the stack).
struct ContextList : std::vector<Context> {
  using std::vector<Context>::vector;
  ContextList() = default;
  ContextList(const ContextList&) = default;
  ContextList(ContextList&&) noexcept = default;
  ContextList& operator=(const ContextList&) = default;
  ContextList& operator=(ContextList&&) noexcept = default;
  ~ContextList();
};
struct Context {
  uint32_t ctxId = 0;
  uint8_t relation = 0;
  uint8_t lexicalType = 0;
  uint16_t propagation = 0;
  uint32_t function = kNone;  // hasFunction
  uint32_t file = kNone;      // hasSrcLoc (with line)
  uint32_t line = 0;
  uint32_t module = kNone;  // hasPoint (with offset)
  uint64_t offset = 0;
  ContextList children;

  uint8_t flags() const {
    return uint8_t((function != kNone ? 1 : 0) | (file != kNone ? 2 : 0) | (module != kNone ? 4 : 0));
  }
};
// entryPoint: 0 unknown entry, 1 main thread, 2 application thread.
struct EntryPoint {
  uint32_t ctxId = 0;
  uint16_t entryPoint = 0;
  std::string prettyName;
  ContextList children;
};

struct Meta {
  General general;
  std::vector<std::string> idNames;
  std::vector<Scope> scopes;
  std::vector<Metric> metrics;
  std::vector<Module> modules;
  std::vector<File> files;
  std::vector<Function> functions;
  std::vector<EntryPoint> entryPoints;
};

// Compressed sparse rows: key[i] owns sub/value entries [start[i], start[i+1]).
// Keys ascending, and subs ascending within a key (the files' sort rules).
template <typename Key, typename Sub>
struct Sparse {
  std::vector<Key> key;
  std::vector<uint64_t> start{0};
  std::vector<Sub> sub;
  std::vector<double> value;

  void push(Sub s, double v) { sub.push_back(s), value.push_back(v); }
  // Closes the current key (call after its push()es).
  void close(Key k) { key.push_back(k), start.push_back(sub.size()); }
  size_t size() const { return value.size(); }
  // Empties it, keeping the vectors' capacity.
  void clear() { key.clear(), start.assign(1, 0), sub.clear(), value.clear(); }
  bool operator==(const Sparse&) const = default;
};
using ProfileValues = Sparse<uint32_t, uint16_t>;  // ctxId -> (metricId, value)
// The same, held by the caller (written without a copy).
struct ProfileValuesView {
  std::span<const uint32_t> key;
  std::span<const uint64_t> start;  // key.size() + 1 entries
  std::span<const uint16_t> sub;
  std::span<const double> value;
  size_t size() const { return value.size(); }
};
using ContextValues = Sparse<uint16_t, uint32_t>;  // metricId -> (profIndex, value)
// The same, held by the caller (written without a copy): metric key[k]'s values start at
// start[k] - base in sub/value.
struct ContextValuesView {
  std::span<const uint16_t> key;
  std::span<const uint64_t> start;  // key.size() entries
  uint64_t base = 0;
  std::span<const uint32_t> sub;
  std::span<const double> value;
  size_t size() const { return value.size(); }
};

struct Identifier {
  uint8_t kind = 0;
  uint16_t flags = 0;  // bit 0: isPhysical
  uint32_t logicalId = 0;
  uint64_t physicalId = 0;
  bool operator==(const Identifier&) const = default;
};
struct Profile {
  uint32_t flags = 0;                                // bit 0: isSummary
  std::optional<std::vector<Identifier>> idTuple;  // absent: pIdTuple == 0
  ProfileValues values;
};

struct TraceElem {
  uint64_t timestamp = 0;
  uint32_t ctxId = 0;
  bool operator==(const TraceElem&) const = default;
};
struct Trace {
  uint32_t profIndex = 0;
  std::vector<TraceElem> line;
};
struct TraceDb {
  uint64_t minTimestamp = 0, maxTimestamp = 0;
  std::vector<Trace> traces;
};

struct Database {
  Meta meta;
  std::vector<Profile> profiles;       // [0] is the canonical summary profile
  std::vector<ContextValues> contexts;  // indexed by ctxId; [0] is the global context
  std::optional<TraceDb> trace;
};

// ---- Readers. Every count, size and pointer is checked against the file and its
// section; errors read "<file>: offset 0x..: <what was expected>".
Expected<Meta> read_meta(const ByteView& bytes);
Expected<std::vector<Profile>> read_profile_db(const ByteView& bytes);
Expected<std::vector<ContextValues>> read_cct_db(const ByteView& bytes);
Expected<TraceDb> read_trace_db(const ByteView& bytes);
// meta.db for lazy readers (the viewer): `visit`, if given, receives each entry point
// (c == nullptr, parent 0) and context (c without children, parent its parent's ctxId)
// with the offset `at` of its record, instead of the tree going into the Meta (whose
// entry points then have no children). `layout` receives what decode_context needs.
struct MetaLayout {
  uint64_t pFunctions = 0, szFunction = 1, pFiles = 0, szFile = 1, pModules = 0, szModule = 1;
};
using ContextVisitor = std::function<Status(uint32_t ctxId, uint32_t parent, uint64_t at, const Context* c)>;
Expected<Meta> read_meta_visiting(const ByteView& bytes, const ContextVisitor* visit, MetaLayout* layout);
// The {Ctx} record at `at` (children left empty), in a meta.db read_meta_visiting(bytes, visit,
// layout) accepted; no checks beyond what that reader made.
Context decode_context(const ByteView& bytes, const MetaLayout& layout, uint64_t at);
// Appends the ctxIds of the children of the {Ctx} or {EP} record at `at` (same caveat).
void child_ids(const ByteView& bytes, uint64_t at, std::vector<uint32_t>& out);
// Reads meta.db, profile.db, cct.db and (if present) trace.db from a directory.
Expected<Database> read_database(const std::filesystem::path& dir);

// The contexts of meta.db given by the caller's own tree rather than as Context trees in
// Meta::entryPoints (a large tree then is not held twice). Handles are the caller's.
class ContextSource {
public:
  virtual ~ContextSource() = default;
  // The children, in order, of entry point `e` (its index in Meta::entryPoints).
  virtual void entryChildren(size_t e, std::vector<const void*>& out) const = 0;
  // The children, in order, of context `c`.
  virtual void children(const void* c, std::vector<const void*>& out) const = 0;
  // Context `c`'s record (its children left empty).
  virtual Context describe(const void* c) const = 0;
  // About how many contexts there are (the buffer is sized from it).
  virtual uint64_t size() const = 0;
  // A hint: context `c` is described (and its children listed) soon. The writer walks the
  // tree breadth first, which a tree built depth first has scattered over its memory.
  virtual void prefetch(const void* c) const { (void)c; }
  // A hint: `c`, prefetched a while ago, has its children listed soon.
  virtual void prefetchChildren(const void* c) const { (void)c; }
};

// ---- Writers producing whole files in memory.
// With `contexts`, the entry points' children come from it (Meta::entryPoints' are ignored).
std::vector<uint8_t> write_meta(const Meta& meta, const ContextSource* contexts = nullptr);
std::vector<uint8_t> write_profile_db(std::span<const Profile> profiles);
std::vector<uint8_t> write_cct_db(std::span<const ContextValues> contexts);
std::vector<uint8_t> write_trace_db(const TraceDb& trace);
Status write_meta(const Meta& meta, const std::filesystem::path& file, const ContextSource* contexts = nullptr);

// Whether a database may be written to `dir`, replacing what is there: nothing, an empty
// directory, or a database (one holding meta.db, or the experiment.xml of an older
// version). Anything else (a file, a directory of other things, measurements) is refused
// with an error naming it: a mistyped -o must not cost a user their files.
Status check_replaceable(const std::filesystem::path& dir);

// Writes the database into `dir` atomically (built in a temporary beside it, then
// renamed; check_replaceable first). `extra`, if given, may add files (eg. metrics/) into
// the temporary.
Status write_database(const Database& db, const std::filesystem::path& dir,
                      const std::function<Status(const std::filesystem::path&)>& extra = {});

// ---- Streaming writers for hpcprof. Each writes its file under a temporary name
// and renames it into place in finish(); destroyed unfinished, it leaves nothing.
class StreamFile;

// profile.db: begin() with the profile count (summary included), then rows by index.
class ProfileDbWriter {
public:
  ProfileDbWriter();
  ~ProfileDbWriter();
  ProfileDbWriter(const ProfileDbWriter&) = delete;
  ProfileDbWriter& operator=(const ProfileDbWriter&) = delete;
  // MT: externally synchronized.
  Status begin(const std::filesystem::path& file, uint32_t numProfiles);
  // MT: thread-safe for distinct indices. Index 0 is the summary (flags isSummary,
  // no id tuple): pass idTuple = nullopt and flags = 1.
  Status write(uint32_t index, uint32_t flags, const std::optional<std::vector<Identifier>>& idTuple,
               const ProfileValues& values);
  Status write(uint32_t index, uint32_t flags, const std::optional<std::vector<Identifier>>& idTuple,
               const ProfileValuesView& values);
  // MT: thread-safe for distinct indices. Reads back the part of written row `index` with
  // ctxId in [lo, hi); ascending ranges (each starting where the last ended) read each index
  // entry about once.
  Status read(uint32_t index, uint32_t lo, uint32_t hi, ProfileValues& out) const;
  // MT: externally synchronized. Profiles never written are empty.
  Status finish();

private:
  struct Info;
  std::unique_ptr<StreamFile> out_;
  std::vector<Info> infos_;
  mutable std::mutex mu_;
};

struct BlockRef;  // regions.hpp
// cct.db: begin() with the context count (ctxId 0 included), then ascending blocks.
class CctDbWriter {
public:
  CctDbWriter();
  ~CctDbWriter();
  CctDbWriter(const CctDbWriter&) = delete;
  CctDbWriter& operator=(const CctDbWriter&) = delete;
  // MT: externally synchronized (all methods).
  Status begin(const std::filesystem::path& file, uint32_t numContexts);
  // ctxIds strictly ascending across calls; contexts not written are empty.
  Status write(uint32_t ctxId, const ContextValues& values);
  Status write(uint32_t ctxId, const ContextValuesView& values);
  Status finish();

private:
  struct Stage;  // blocks gathered into large writes
  Status flush();
  std::unique_ptr<StreamFile> out_;
  // Each context's block as the header lists it (regions.hpp), so that finish() encodes the
  // header from it with no copy (32 bytes a context: 13 MB at 400,000).
  std::vector<BlockRef> blocks_;
  int64_t last_ = -1;
  std::unique_ptr<Stage> stage_;
};

// trace.db's elements as the file holds them (timestamp, then ctxId, little-endian: 12 bytes
// each), from a caller's own elements, each its time and context as members.
inline constexpr size_t kTraceElemBytes = 12;
template <typename E, typename Time, typename Ctx>
void encode_trace_elems(std::span<const E> in, Time E::*time, Ctx E::*ctx, uint8_t* out) {
  static_assert(std::endian::native == std::endian::little, "the database is little-endian");
  for (const E& e : in) {
    const uint64_t t = uint64_t(e.*time);
    const uint32_t c = uint32_t(e.*ctx);
    std::memcpy(out, &t, 8);
    std::memcpy(out + 8, &c, 4);
    out += kTraceElemBytes;
  }
}

// trace.db: begin() with the number of trace lines, then lines by index.
class TraceDbWriter {
public:
  TraceDbWriter();
  ~TraceDbWriter();
  TraceDbWriter(const TraceDbWriter&) = delete;
  TraceDbWriter& operator=(const TraceDbWriter&) = delete;
  // MT: externally synchronized.
  Status begin(const std::filesystem::path& file, uint32_t numTraces);
  // MT: thread-safe for distinct indices. `line` sorted by timestamp.
  Status write(uint32_t index, uint32_t profIndex, std::span<const TraceElem> line);
  // The same from a caller's own elements, each its time and context as members (no line of
  // TraceElem copied first).
  template <typename E, typename Time, typename Ctx>
  Status write(uint32_t index, uint32_t profIndex, std::span<const E> line, Time E::*time, Ctx E::*ctx) {
    return writeEncoded(index, profIndex, line.size(), line.empty() ? 0 : uint64_t(line.front().*time),
                        line.empty() ? 0 : uint64_t(line.back().*time),
                        [&](uint8_t* p) { encode_trace_elems(line, time, ctx, p); });
  }
  // Lines in pieces, from any thread: place() reserves every line at once, in order
  // (records[k]: the most line k will hold; profIndex[k]: its profile), then writePart() and
  // endLine() for each. MT: place() externally synchronized, the others thread-safe for
  // distinct lines. A line never ended is written empty by write() as usual.
  Status place(std::span<const uint64_t> records, std::span<const uint32_t> profIndex);
  // Elements [from, from + part.size()) of line `index`.
  template <typename E, typename Time, typename Ctx>
  Status writePart(uint32_t index, uint64_t from, std::span<const E> part, Time E::*time, Ctx E::*ctx) {
    thread_local std::vector<uint8_t> bytes;  // only grown
    if (bytes.size() < kTraceElemBytes * part.size()) bytes.resize(kTraceElemBytes * part.size());
    encode_trace_elems(part, time, ctx, bytes.data());
    return writePartEncoded(index, from, {bytes.data(), kTraceElemBytes * part.size()});
  }
  Status endLine(uint32_t index, uint64_t records, uint64_t first, uint64_t last);
  // MT: externally synchronized.
  Status finish();

private:
  Status writePartEncoded(uint32_t index, uint64_t from, std::span<const uint8_t> bytes);
  std::vector<uint64_t> placed_;  // by line: the records place() made room for
  // n elements of 12 bytes encoded by `encode` into the file's buffer; first and last: their
  // first and last timestamps.
  Status writeEncoded(uint32_t index, uint32_t profIndex, uint64_t n, uint64_t first, uint64_t last,
                      const std::function<void(uint8_t*)>& encode);
  struct Header {
    uint32_t profIndex = 0;
    uint64_t pStart = 0, pEnd = 0;
  };
  std::unique_ptr<StreamFile> out_;
  std::vector<Header> headers_;
  uint64_t min_ = UINT64_MAX, max_ = 0;
  std::mutex mu_;
};

// ---- Text views.
// Canonical text of a database (the form canonical.py prints from the reference reader).
std::string canonical_text(const Database& db);
// Prints a database directory, or one .db file, readably.
Status dump(const std::filesystem::path& fileOrDir, std::ostream& os);

}  // namespace hpc::db
