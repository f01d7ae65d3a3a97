// Structure files (.hpcstruct) as the reference hpcstruct writes them: XML per
// shared/reference/hpc-structure.dtd. An in-memory model, a streaming reader (expat,
// never holds the document), a streaming writer (the reference's layout, atomic), an
// address -> innermost-scope index for hpcprof, and a dump for hpcdump. See README.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.hpp"

namespace hpc::structfile {

// Element kinds, named after what they mean; tag_name() gives the XML tag.
enum class Kind : uint8_t {
  Root,        // HPCToolkitStructure
  LoadModule,  // LM
  File,        // F
  Procedure,   // P
  Alien,       // A: inlined code
  Loop,        // L
  Statement,   // S
  Call,        // C: a call site (GPU binaries)
};
std::string_view tag_name(Kind k);
// Whether the DTD lets `child` appear directly inside `parent`.
bool allowed_child(Kind parent, Kind child);

// One half-open address range [begin, end) of a `v` attribute.
struct VRange {
  uint64_t begin = 0, end = 0;
  bool operator==(const VRange&) const = default;
};
using VRanges = std::vector<VRange>;
// "{[0x1000-0x1010) [0x1020-0x1030)}"; zero is written "0" as the reference does.
std::string format_vranges(const VRanges& v);
Expected<VRanges> parse_vranges(std::string_view text);
Status parse_vranges(std::string_view text, VRanges& out);  // into `out` (its storage reused)

// One element. Which attributes an element may carry is the DTD's business: the reader
// and the writer enforce it; absent optional attributes are std::nullopt so that a
// re-written file has exactly the attributes of the original.
//   Root: i, version, n?          LM: i, n, has-calls, v?      F: i, n
//   P: i, n, ln?, s?, l?, v?       A: i, l?, f?, n?, ln?, v?
//   L: i, l, f?, v?                S: i, l, v?                  C: i, l, v?, t?, d?
// An inlined call is written by the reference as two nested A: the outer one (n="")
// carries the call site (f, l in the caller), the inner one the callee (n, f, l).
struct Scope {
  Kind kind = Kind::Statement;
  uint64_t id = 0;                        // i
  std::optional<std::string> name;        // n
  std::optional<std::string> link_name;   // ln
  std::optional<std::string> file;        // f
  std::optional<uint64_t> line;           // l
  std::optional<uint64_t> static_id;      // s
  std::optional<VRanges> vranges;         // v
  std::optional<uint64_t> target;         // t (call target address)
  std::optional<std::string> device;      // d
  std::string version;                    // version (Root)
  bool has_calls = false;                 // has-calls (LM)
  std::vector<Scope> children;

  bool operator==(const Scope&) const = default;
};

// The whole file: a Scope of kind Root whose children are the load modules.
using Structure = Scope;

// Streaming reader. enter() sees each element as its start tag is read (children
// empty), leave() as it closes; returning an error stops the parse with that error.
class Visitor {
public:
  virtual ~Visitor() = default;
  virtual Status enter(const Scope& scope, int depth) = 0;
  virtual Status leave(const Scope& scope, int depth) { return Status(); }
  // Called before each enter() and leave() with where its tag lies in the input: the
  // byte offset of its "<" and its length (0 for the end of an empty-element tag).
  virtual void at(uint64_t offset, uint64_t length) {}
  // Whether enter() and leave() need the text attributes (n, ln, f, d) of elements of this
  // kind; where not, they are left unset (any text is valid).
  virtual bool wants_text(Kind kind) const { return true; }
};

// Errors name `name` (or the path), the line and column, and what was wrong.
Status read(const std::filesystem::path& path, Visitor& visitor);
Status parse(std::string_view text, const std::string& name, Visitor& visitor);
Expected<Structure> load(const std::filesystem::path& path);
Expected<Structure> parse_model(std::string_view text, const std::string& name);
// Expat alone (what parse_model falls back on where its scanner declines the text).
Expected<Structure> parse_model_expat(std::string_view text, const std::string& name);

// Where the units of a structure file lie, for reading only those needed: a unit is a
// child of an F (a procedure, mostly), or a child of an LM other than an F. Made by one
// pass that checks the whole file as load() does (the same errors) and keeps no scopes:
// each unit's place in the file, the start tags around it, and the v ranges of its
// subtree (the unit's own included).
struct UnitIndex {
  struct Module {
    std::string name;                    // the LM's n
    uint64_t tag_begin = 0, tag_end = 0;  // its start tag
    bool operator==(const Module&) const = default;
  };
  struct Unit {
    uint64_t begin = 0, end = 0;          // the unit's element, start tag to end tag
    uint32_t module = 0;                  // index into modules
    uint64_t file_begin = 0, file_end = 0;  // its F's start tag (both 0: none)
    bool operator==(const Unit&) const = default;
  };
  struct Range {
    uint64_t begin, end;  // [begin, end)
    uint32_t unit;
    bool operator==(const Range&) const = default;
  };
  uint64_t root_begin = 0;  // the root's start tag
  uint64_t prolog_end = 0;  // the file up to the end of the root's start tag
  std::vector<Module> modules;
  std::vector<Unit> units;    // in document order
  std::vector<Range> ranges;  // in document order
  bool operator==(const UnitIndex&) const = default;
};
// With chunk_bytes and `each` (each(n, f) calls f(0) ... f(n - 1), in any order or at once),
// a large file is parsed in chunks of about chunk_bytes at once, each beginning at a unit; the
// same index, and the same errors (a file that does not lend itself to it, or any chunk that
// fails, is parsed in one pass as without).
using ForEachIndex = std::function<void(size_t, const std::function<void(size_t)>&)>;
Expected<UnitIndex> index_units(const std::filesystem::path& path, size_t chunk_bytes = 0,
                                const ForEachIndex& each = {});
// The chunked pass alone: the index, or nothing where the file does not lend itself to it
// or a chunk fails (then index_units parses it whole, and names the error).
std::optional<UnitIndex> index_units_in_chunks(const std::filesystem::path& path, size_t chunk_bytes,
                                               const ForEachIndex& each);
// The whole file in one part read by the scanner (the markup structure files are written
// in, without expat: several times faster): the index, or nothing where the file holds
// anything else, its DTD declares what the scanner does not read (an attribute default or
// type, an entity), or a rule is broken (then index_units has expat read it, and name the
// error). Where it gives an index, expat's pass gives the same.
std::optional<UnitIndex> index_units_scanned(const std::filesystem::path& path);
// Expat's one pass over the whole file alone (what index_units falls back on).
Expected<UnitIndex> index_units_expat(const std::filesystem::path& path);
// A document of the units `which` (increasing, all in one module) of the file indexed by
// `index`, whose bytes [offset, offset + length) read() appends to a string: `prolog`, the
// module's start tag, each unit in its F (if any), and the end tags. parse_model() of it
// gives the scopes load() gives those units, ids included, in a tree of the same depths.
// `prolog` is the file's up to the end of the root's start tag, or one that reads the same
// (unit_prolog).
using ReadBytes = std::function<Status(uint64_t offset, uint64_t length, std::string& out)>;
Expected<std::string> units_document(const ReadBytes& read, const UnitIndex& index, std::string_view prolog,
                                     std::span<const uint32_t> which);
// The prolog for units_document from the file's own (`prolog`, the bytes up to the end of
// the root's start tag): without its DTD where the DTD can change nothing the parser reads
// (no entity, no default value: nothing quoted outside its comments), so that a unit's
// document is not a copy of the DTD to parse each time; else the file's.
std::string unit_prolog(std::string_view prolog, const UnitIndex& index);

// Streaming writer in the reference's layout: XML declaration, the DTD as internal
// subset, one element per line, S and childless C self-closed. open()/close() nest;
// each open() writes the start tag of `scope` (its children are ignored).
class Writer {
public:
  explicit Writer(std::ostream& out);  // `out` must outlive the writer
  // Writes to `path` atomically: nothing appears there unless finish() succeeds.
  static Expected<std::unique_ptr<Writer>> create(const std::filesystem::path& path);
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;
  ~Writer();

  Status open(const Scope& scope);
  Status close();
  // Writes a scope and its whole subtree.
  Status write_tree(const Scope& scope);
  // Writes a subtree formatted earlier by format_tree() (whose ids were numbered from 0,
  // in document order), adding `id_base` to each id: subtrees can be formatted in any
  // order, concurrently, and placed afterwards. `kind` is the subtree's root kind.
  Status write_fragment(std::string_view text, Kind kind, uint64_t id_base);
  // Requires every element closed; flushes and, for create(), commits the file.
  Status finish();

private:
  struct FileState;
  std::unique_ptr<FileState> file_;
  std::ostream* out_;
  std::vector<Kind> stack_;
  bool pending_ = false;  // a start tag of S or C awaits ">" or "/>"
  bool started_ = false;
  std::string batch_;     // subtrees not yet handed to out_ (written 1 MiB at a time)
  void flush_batch();
};

Status write(const std::filesystem::path& path, const Structure& s);
std::string to_string(const Structure& s);
// Appends `scope` and its subtree to `out` exactly as Writer::write_tree writes them inside
// an open document. MT: thread-safe (touches only its arguments).
Status format_tree(const Scope& scope, std::string& out);

// Numbers every element in document order as the reference does: the root 0, then
// 2, 3, ... (the reference never writes id 1).
void assign_ids(Structure& s);

// Address -> scope lookup over one load module: each address maps to the deepest scope
// whose v ranges contain it (ties: the later in document order), which for real files
// is the S or C holding the instruction. `lm` must outlive the index and not change.
class AddressIndex {
public:
  explicit AddressIndex(const Scope& lm);
  const Scope* find(uint64_t addr) const;
  // The scopes from `lm`'s child down to find(addr), outermost first; empty if none.
  std::vector<const Scope*> path(uint64_t addr) const;
  // The same into `out` (cleared first): a caller asking for many keeps one vector.
  void path(uint64_t addr, std::vector<const Scope*>& out) const;
  size_t segments() const { return segments_.size(); }

private:
  struct Segment {
    uint64_t begin, end;
    uint32_t node;
  };
  std::optional<uint32_t> find_node(uint64_t addr) const;
  std::vector<Segment> segments_;
  std::vector<const Scope*> nodes_;
  std::vector<uint32_t> parent_;  // index in nodes_; UINT32_MAX for lm's children
};

// Indented tree for hpcdump.
Status dump(const std::filesystem::path& path, std::ostream& out);

}  // namespace hpc::structfile
