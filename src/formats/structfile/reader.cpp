// Streaming reader: expat events checked against the DTD tables, one Scope per open
// element on a stack, handed to the visitor as each start tag is read.
#include <expat.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <optional>

#include "formats/structfile/checker.hpp"
#include "formats/structfile/schema.hpp"
#include "formats/structfile/structfile.hpp"

namespace hpc::structfile {
namespace {

class Parser {
public:
  // With `reuse`, a parser of this thread's from an earlier parse, reset (creating one
  // costs more than parsing a procedure's few hundred bytes).
  Parser(std::string name, Visitor& v, XML_Parser reuse = nullptr) : name_(std::move(name)), checker_(v) {
    owned_ = reuse == nullptr;
    p_ = reuse ? reuse : XML_ParserCreate("UTF-8");
    if (reuse) XML_ParserReset(p_, "UTF-8");
    XML_SetUserData(p_, this);
    XML_SetElementHandler(p_, &Parser::on_start, &Parser::on_end);
    XML_SetCharacterDataHandler(p_, &Parser::on_text);
    // The DTD travels inside every file; nothing outside it is ever fetched.
    XML_SetParamEntityParsing(p_, XML_PARAM_ENTITY_PARSING_NEVER);
  }
  ~Parser() {
    if (owned_) XML_ParserFree(p_);
  }
  Parser(const Parser&) = delete;
  Parser& operator=(const Parser&) = delete;

  // Sets *unusual where the DTD declares what would make expat read the body otherwise than
  // the scanner does: an attribute default or type other than CDATA, or a general entity.
  void watch_declarations(bool* unusual) {
    unusual_ = unusual;
    XML_SetAttlistDeclHandler(p_, &Parser::on_attlist);
    XML_SetEntityDeclHandler(p_, &Parser::on_entity);
  }

  // Feeds `n` bytes already placed in expat's buffer (see buffer()).
  Status feed_buffer(size_t n, bool final) { return check(XML_ParseBuffer(p_, int(n), final)); }
  void* buffer(size_t n) { return XML_GetBuffer(p_, int(n)); }
  Status feed(std::string_view text, bool final) {
    return check(XML_Parse(p_, text.data(), int(text.size()), final));
  }

  Status finish() {
    if (!error_.ok()) return error_;
    if (!checker_.root_done()) return Status::error(name_ + ": no HPCToolkitStructure element");
    return Status();
  }

private:
  Status check(XML_Status st) {
    if (!error_.ok()) return error_;
    if (st == XML_STATUS_ERROR) {
      error_ = Status::error(where() + XML_ErrorString(XML_GetErrorCode(p_)));
    }
    return error_;
  }

  std::string where() const {
    return name_ + ":" + std::to_string(XML_GetCurrentLineNumber(p_)) + ":" +
           std::to_string(XML_GetCurrentColumnNumber(p_) + 1) + ": ";
  }

  void fail(const std::string& msg) {
    if (error_.ok()) error_ = Status::error(where() + msg);
    XML_StopParser(p_, XML_FALSE);
  }

  static void XMLCALL on_start(void* ud, const XML_Char* tag, const XML_Char** atts) {
    static_cast<Parser*>(ud)->start(tag, atts);
  }
  static void XMLCALL on_end(void* ud, const XML_Char*) { static_cast<Parser*>(ud)->end(); }
  static void XMLCALL on_attlist(void* ud, const XML_Char*, const XML_Char*, const XML_Char* type,
                                 const XML_Char* dflt, int) {
    if (dflt || std::strcmp(type, "CDATA") != 0) *static_cast<Parser*>(ud)->unusual_ = true;
  }
  static void XMLCALL on_entity(void* ud, const XML_Char*, int parameter, const XML_Char*, int, const XML_Char*,
                                const XML_Char*, const XML_Char*, const XML_Char*) {
    if (!parameter) *static_cast<Parser*>(ud)->unusual_ = true;
  }
  static void XMLCALL on_text(void* ud, const XML_Char* s, int len) {
    for (int i = 0; i < len; ++i) {
      char c = s[i];
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
        static_cast<Parser*>(ud)->fail("unexpected text");
        return;
      }
    }
  }

  void start(const char* tag, const char** atts) {
    if (!error_.ok()) return;
    attributes_.clear();
    for (const char** a = atts; a[0]; a += 2) attributes_.push_back({a[0], a[1]});
    after(checker_.start(tag, attributes_, uint64_t(XML_GetCurrentByteIndex(p_)),
                         uint64_t(XML_GetCurrentByteCount(p_))));
  }

  void end() {
    if (!error_.ok()) return;
    after(checker_.end(uint64_t(XML_GetCurrentByteIndex(p_)), uint64_t(XML_GetCurrentByteCount(p_))));
  }

  // A rule broken is named with its place; the visitor's error is its own.
  void after(Status st) {
    if (st.ok()) return;
    if (!checker_.visitor_failed()) return fail(st.message());
    error_ = std::move(st);
    XML_StopParser(p_, XML_FALSE);
  }

  XML_Parser p_;
  bool owned_ = true;
  std::string name_;
  Checker checker_;
  std::vector<Checker::Attribute> attributes_;
  Status error_;
  bool* unusual_ = nullptr;
};

class Builder : public Visitor {
public:
  Status enter(const Scope& s, int depth) override {
    if (depth == 0) {
      root_ = s;
      stack_.assign(1, &root_);
    } else {
      // Only ancestors are on the stack, so growing this vector invalidates nothing held.
      stack_.back()->children.push_back(s);
      stack_.push_back(&stack_.back()->children.back());
    }
    return Status();
  }
  Status leave(const Scope&, int) override {
    stack_.pop_back();
    return Status();
  }
  Structure take() { return std::move(root_); }

private:
  Structure root_;
  std::vector<Scope*> stack_;
};

}  // namespace

Status read(const std::filesystem::path& path, Visitor& visitor) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error(path.string() + ": cannot open");
  Parser parser(path.string(), visitor);
  constexpr size_t kChunk = 1 << 20;
  while (true) {
    void* buf = parser.buffer(kChunk);
    if (!buf) return Status::error(path.string() + ": out of memory");
    in.read(static_cast<char*>(buf), kChunk);
    size_t got = size_t(in.gcount());
    if (in.bad()) return Status::error(path.string() + ": read error");
    bool final = got < kChunk;
    HPC_RETURN_IF_ERROR(parser.feed_buffer(got, final));
    if (final) break;
  }
  return parser.finish();
}

Status parse(std::string_view text, const std::string& name, Visitor& visitor) {
  Parser parser(name, visitor);
  constexpr size_t kChunk = 1 << 24;  // XML_Parse takes an int length
  while (text.size() > kChunk) {
    HPC_RETURN_IF_ERROR(parser.feed(text.substr(0, kChunk), false));
    text.remove_prefix(kChunk);
  }
  HPC_RETURN_IF_ERROR(parser.feed(text, true));
  return parser.finish();
}

Expected<Structure> load(const std::filesystem::path& path) {
  Builder b;
  HPC_RETURN_IF_ERROR(read(path, b));
  return b.take();
}

namespace {

// Depths: 0 the root, 1 an LM, 2 an F or another child of an LM (a unit), 3 a child of an F
// (a unit).
class Indexer : public Visitor {
public:
  explicit Indexer(UnitIndex& out) : out_(out) {}
  void at(uint64_t offset, uint64_t length) override {
    offset_ = offset;
    length_ = length;
  }
  Status enter(const Scope& s, int depth) override {
    if (depth == 0) {
      out_.root_begin = offset_;
      out_.prolog_end = offset_ + length_;
      return Status();
    }
    if (depth == 1) {
      out_.modules.push_back({s.name.value_or(""), offset_, offset_ + length_});
      in_file_ = false;
      return Status();
    }
    if (depth == 2 && s.kind == Kind::File) {
      in_file_ = true;
      file_begin_ = offset_;
      file_end_ = offset_ + length_;
      return Status();
    }
    if (depth == (in_file_ ? 3 : 2)) {
      UnitIndex::Unit u;
      u.begin = offset_;
      u.end = offset_ + length_;  // until its end tag
      u.module = uint32_t(out_.modules.size() - 1);
      if (in_file_) {
        u.file_begin = file_begin_;
        u.file_end = file_end_;
      }
      out_.units.push_back(u);
      unit_depth_ = depth;
      first_range_ = out_.ranges.size();
    }
    if (depth >= unit_depth_ && !out_.units.empty() && s.vranges) {
      const uint32_t unit = uint32_t(out_.units.size() - 1);
      for (const VRange& r : *s.vranges) {
        if (r.begin >= r.end) continue;
        // A range touching the unit's last one joins it (a procedure's statements mostly
        // follow one another): a few ranges a procedure, not one a statement.
        if (first_range_ < out_.ranges.size()) {
          UnitIndex::Range& last = out_.ranges.back();
          if (r.begin <= last.end && r.end >= last.begin) {
            last.begin = std::min(last.begin, r.begin);
            last.end = std::max(last.end, r.end);
            continue;
          }
        }
        out_.ranges.push_back({r.begin, r.end, unit});
      }
    }
    return Status();
  }
  // Only the load modules' names are kept.
  bool wants_text(Kind k) const override { return k == Kind::LoadModule; }
  Status leave(const Scope& s, int depth) override {
    if (depth == unit_depth_ && !out_.units.empty()) {
      // An empty-element tag ends where its start tag does.
      UnitIndex::Unit& u = out_.units.back();
      if (length_ != 0) u.end = offset_ + length_;
      unit_depth_ = INT32_MAX;
    }
    if (depth == 2 && s.kind == Kind::File) in_file_ = false;
    return Status();
  }

private:
  UnitIndex& out_;
  uint64_t offset_ = 0, length_ = 0, file_begin_ = 0, file_end_ = 0;
  bool in_file_ = false;
  int unit_depth_ = INT32_MAX;  // the open unit's depth
  size_t first_range_ = 0;      // the open unit's first range in out_.ranges
};

}  // namespace

namespace {

// Offsets in a chunk's document (the file's prolog, the start tags of the LM and F the chunk
// begins in, the chunk, end tags) as offsets in the file: each piece fed is a segment.
class ChunkVisitor : public Visitor {
public:
  struct Segment {
    uint64_t at, in_file, length;  // where it begins in the document and in the file
  };
  ChunkVisitor(Indexer& inner, std::vector<Segment> segments) : inner_(inner), segments_(std::move(segments)) {}
  void at(uint64_t o, uint64_t n) override {
    size_t k = segments_.size();
    while (k > 1 && segments_[k - 1].at > o) --k;
    const Segment& s = segments_[k - 1];
    inner_.at(s.in_file + (o - s.at), n);
  }
  Status enter(const Scope& s, int depth) override { return inner_.enter(s, depth); }
  Status leave(const Scope& s, int depth) override { return inner_.leave(s, depth); }
  bool wants_text(Kind k) const override { return inner_.wants_text(k); }

private:
  Indexer& inner_;
  std::vector<Segment> segments_;
};

// Stops the parse at the root's start tag: where it is.
class RootFinder : public Visitor {
public:
  void at(uint64_t o, uint64_t n) override { offset_ = o, length_ = n; }
  Status enter(const Scope&, int) override {
    found = true;
    begin = offset_;
    end = offset_ + length_;
    return Status::error("found");
  }
  bool wants_text(Kind) const override { return false; }
  bool found = false;
  uint64_t begin = 0, end = 0, offset_ = 0, length_ = 0;
};

struct Mapping {
  const char* data = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (data) ::munmap(const_cast<char*>(data), size);
  }
};

// The index made in parts read at once, or nothing where the file does not lend itself to
// it (comments, processing instructions or CDATA in its body) or a part fails: then the one
// pass of expat over the whole file decides, and names the error. Each part is read by the
// scanner where the DTD lets it read as expat does, else (or where the scanner stops) by
// expat (with `expat_parts`; else nothing). With `chunk_bytes`, a file of at least twice
// that is cut into chunks: one scan of the body's tags (from '<' to '<') finds where chunks
// may begin: at a unit's start tag (a child of an LM, or of an F in an LM), none closer
// than chunk_bytes to the last. A chunk's document is the file's prolog, the start tags of
// the LM (and F) it begins in, the chunk, and the end tags of those open where the next
// one begins. It parses exactly when the file parses there: each
// chunk begins where the one before ended, with the elements open that its parse left open
// (their end tags matched). The scan's stack is expat's wherever the chunks parse, from the
// root on.
std::optional<UnitIndex> index_in_parts(const std::filesystem::path& path, size_t chunk_bytes,
                                        const ForEachIndex& each, bool expat_parts) {
  Mapping m;
  {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    struct stat st;
    if (::fstat(fd, &st) != 0 || st.st_size <= 0) {
      ::close(fd);
      return std::nullopt;
    }
    void* p = ::mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) return std::nullopt;
    m.data = static_cast<const char*>(p);
    m.size = size_t(st.st_size);
    ::madvise(p, m.size, MADV_SEQUENTIAL);
  }
  if (!each || m.size < 2 * chunk_bytes) chunk_bytes = 0;
  const std::string_view text(m.data, m.size);
  // The prolog: parsed up to the root's start tag, its declarations watched.
  RootFinder root;
  bool unusual_dtd = false;
  {
    Parser parser(path.string(), root);
    parser.watch_declarations(&unusual_dtd);
    for (size_t at = 0; at < text.size() && !root.found;) {
      const size_t n = std::min<size_t>(size_t(1) << 16, text.size() - at);
      if (!parser.feed(text.substr(at, n), false).ok()) break;
      at += n;
    }
    if (!root.found) return std::nullopt;
  }
  const bool scan = !unusual_dtd;
  if (!scan && !expat_parts) return std::nullopt;
  const uint64_t prolog_end = root.end;
  // The body's tags, each from its '<' to the last '>' before the next, with the open
  // elements (by their tags' first letters: only the LM and F among them matter). A chunk
  // may begin at a child of an LM, or of an F in an LM: there the LM's (and F's) start tags
  // and the end tags its document needs are known.
  struct Tag {
    uint64_t begin, end;
  };
  struct Split {
    uint64_t at;
    Tag lm, f;  // f.end == 0: directly in the LM
  };
  std::vector<Split> splits;
  if (chunk_bytes > 0) {
    struct Open {
      char first;
      Tag tag;
    };
    std::vector<Open> stack{{'H', {root.begin, root.end}}};
    uint64_t next_split = prolog_end + chunk_bytes;
    size_t at = prolog_end;
    for (;;) {
      const void* lt = std::memchr(text.data() + at, '<', text.size() - at);
      if (!lt) break;
      const size_t p = size_t(static_cast<const char*>(lt) - text.data());
      if (stack.empty() || p + 2 >= text.size()) return std::nullopt;  // markup after the root's end
      const char c1 = text[p + 1];
      if (c1 == '!' || c1 == '?') return std::nullopt;  // comments, CDATA, instructions: one pass
      // The tag ends at the last '>' before the next '<': no '<' is in a value, only white
      // space between tags (else a chunk fails). Only that '>' and the byte before it are
      // read, not the whole tag.
      const void* next = std::memchr(text.data() + p + 1, '<', text.size() - p - 1);
      size_t e = next ? size_t(static_cast<const char*>(next) - text.data()) : text.size();
      while (e > p + 1 && is_xml_space(text[e - 1])) --e;
      if (e <= p + 2 || text[e - 1] != '>') return std::nullopt;
      --e;  // the '>'
      at = e + 1;
      if (c1 == '/') {
        stack.pop_back();
        continue;
      }
      const bool lm = c1 == 'L' && text[p + 2] == 'M';
      // A unit's start, where the chunk is long enough: a child of the LM, or of an F in it.
      if (p >= next_split && stack.size() >= 2 && stack[1].first == 'L' &&
          (stack.size() == 2 || (stack.size() == 3 && stack[2].first == 'F'))) {
        splits.push_back({p, stack[1].tag, stack.size() == 3 ? stack[2].tag : Tag{0, 0}});
        next_split = p + chunk_bytes;
      }
      if (text[e - 1] != '/') stack.push_back({lm ? 'L' : c1 == 'L' ? 'l' : c1, {p, e + 1}});
    }
    if (!stack.empty() || splits.empty()) return std::nullopt;
  }
  const size_t chunks = splits.size() + 1;
  std::vector<UnitIndex> parts(chunks);
  std::vector<char> ok(chunks, 0);
  // The scanner on a chunk: the root's, LM's and F's start tags it begins in, the chunk, and
  // where the next begins, the elements open there ended as its end tags would.
  auto scanned = [&](size_t k) {
    const uint64_t to = k + 1 < chunks ? splits[k].at : text.size();
    parts[k] = UnitIndex();
    Indexer indexer(parts[k]);
    Checker checker(indexer);
    Scanner scanner(text, checker);
    if (k > 0) {
      const Split& sp = splits[k - 1];
      if (!scanner.run(root.begin, root.end) || !scanner.run(sp.lm.begin, sp.lm.end) ||
          (sp.f.end && !scanner.run(sp.f.begin, sp.f.end)) || !scanner.run(sp.at, to))
        return false;
    } else if (!scanner.run(root.begin, to)) {
      return false;
    }
    if (k + 1 == chunks) return checker.root_done() && checker.depth() == 0;
    const std::initializer_list<Kind> open = {Kind::File, Kind::LoadModule, Kind::Root};
    if (checker.depth() != (splits[k].f.end ? 3u : 2u)) return false;
    for (Kind kind : open) {
      if (kind == Kind::File && !splits[k].f.end) continue;
      if (checker.open_kind() != kind || !checker.end(to, 0).ok()) return false;
    }
    return true;
  };
  auto for_each = [&](const std::function<void(size_t)>& f) {
    if (chunks == 1) return f(0);
    each(chunks, f);
  };
  for_each([&](size_t k) {
    if (scan && scanned(k)) {
      ok[k] = 1;
      return;
    }
    if (!expat_parts) return;
    parts[k] = UnitIndex();
    const uint64_t from = k == 0 ? 0 : splits[k - 1].at;
    const uint64_t to = k + 1 < chunks ? splits[k].at : text.size();
    using Segment = ChunkVisitor::Segment;
    std::vector<Segment> segments;
    std::vector<std::string_view> pieces;
    auto add = [&](uint64_t in_file, uint64_t length) {
      const uint64_t at = segments.empty() ? 0 : segments.back().at + segments.back().length;
      segments.push_back({at, in_file, length});
      pieces.push_back(text.substr(in_file, length));
    };
    if (k > 0) {
      const Split& sp = splits[k - 1];
      add(0, prolog_end);
      add(sp.lm.begin, sp.lm.end - sp.lm.begin);
      if (sp.f.end) add(sp.f.begin, sp.f.end - sp.f.begin);
    }
    add(from, to - from);
    std::string closers;
    if (k + 1 < chunks) closers = std::string(splits[k].f.end ? "</F>" : "") + "</LM></HPCToolkitStructure>";
    Indexer indexer(parts[k]);
    ChunkVisitor v(indexer, segments);
    Parser parser(path.string(), v);
    for (std::string_view piece : pieces)
      while (!piece.empty()) {  // XML_Parse takes an int length
        const size_t n = std::min(piece.size(), size_t(1) << 24);
        if (!parser.feed(piece.substr(0, n), false).ok()) return;
        piece.remove_prefix(n);
      }
    if (!parser.feed(closers, true).ok() || !parser.finish().ok()) return;
    ok[k] = 1;
  });
  for (char c : ok)
    if (!c) return std::nullopt;
  // One index: the chunks' in order, an LM continued from the chunk before taken once.
  UnitIndex index;
  index.root_begin = parts[0].root_begin;
  index.prolog_end = parts[0].prolog_end;
  if (index.root_begin != root.begin || index.prolog_end != prolog_end) return std::nullopt;
  size_t units = 0, ranges = 0;  // reserved: doubling made each array's pages fresh twice
  for (const UnitIndex& part : parts) {
    units += part.units.size();
    ranges += part.ranges.size();
  }
  index.units.reserve(units);
  index.ranges.reserve(ranges);
  for (UnitIndex& part : parts) {
    std::vector<uint32_t> module_of(part.modules.size());
    for (size_t i = 0; i < part.modules.size(); ++i) {
      if (!index.modules.empty() && index.modules.back().tag_begin == part.modules[i].tag_begin) {
        module_of[i] = uint32_t(index.modules.size() - 1);
      } else {
        module_of[i] = uint32_t(index.modules.size());
        index.modules.push_back(std::move(part.modules[i]));
      }
    }
    const uint32_t first_unit = uint32_t(index.units.size());
    for (UnitIndex::Unit& u : part.units) {
      u.module = module_of[u.module];
      index.units.push_back(u);
    }
    for (UnitIndex::Range& r : part.ranges) {
      r.unit += first_unit;
      index.ranges.push_back(r);
    }
  }
  return index;
}

}  // namespace

std::optional<UnitIndex> index_units_in_chunks(const std::filesystem::path& path, size_t chunk_bytes,
                                               const ForEachIndex& each) {
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec || chunk_bytes == 0 || !each || size < 2 * chunk_bytes) return std::nullopt;
  return index_in_parts(path, chunk_bytes, each, true);
}

std::optional<UnitIndex> index_units_scanned(const std::filesystem::path& path) {
  return index_in_parts(path, 0, {}, false);
}

Expected<UnitIndex> index_units(const std::filesystem::path& path, size_t chunk_bytes, const ForEachIndex& each) {
  if (chunk_bytes > 0 && each)
    if (std::optional<UnitIndex> index = index_units_in_chunks(path, chunk_bytes, each)) return std::move(*index);
  if (std::optional<UnitIndex> index = index_units_scanned(path)) return std::move(*index);
  return index_units_expat(path);
}

Expected<UnitIndex> index_units_expat(const std::filesystem::path& path) {
  UnitIndex index;
  Indexer v(index);
  HPC_RETURN_IF_ERROR(read(path, v));
  return index;
}

std::string unit_prolog(std::string_view prolog, const UnitIndex& index) {
  const size_t doctype = prolog.find("<!DOCTYPE");
  if (doctype == std::string_view::npos || index.root_begin > prolog.size() || index.root_begin < doctype)
    return std::string(prolog);
  // Only an XML declaration and white space before it: else the "<!DOCTYPE" found may lie
  // inside a comment or a processing instruction, and the prolog is kept whole.
  std::string_view head = prolog.substr(0, doctype);
  size_t lead = 0;
  if (head.size() > 5 && head.compare(0, 5, "<?xml") == 0 &&
      is_xml_space(head[5])) {
    const size_t end = head.find("?>");
    if (end == std::string_view::npos) return std::string(prolog);
    lead = end + 2;
  }
  for (; lead < head.size(); ++lead)
    if (!is_xml_space(head[lead])) return std::string(prolog);
  std::string_view dtd = prolog.substr(doctype, index.root_begin - doctype);
  for (size_t at = 0; at < dtd.size();) {
    if (dtd.compare(at, 4, "<!--") == 0) {
      const size_t end = dtd.find("-->", at + 4);
      if (end == std::string_view::npos) return std::string(prolog);
      at = end + 3;
      continue;
    }
    if (dtd[at] == '"' || dtd[at] == '\'' || dtd.compare(at, 8, "<!ENTITY") == 0) return std::string(prolog);
    ++at;
  }
  return std::string(prolog.substr(0, doctype)) + std::string(prolog.substr(index.root_begin));
}

Expected<std::string> units_document(const ReadBytes& read, const UnitIndex& index, std::string_view prolog,
                                     std::span<const uint32_t> which) {
  std::string doc(prolog);
  if (which.empty()) return doc + "</HPCToolkitStructure>\n";
  const UnitIndex::Module& m = index.modules[index.units[which.front()].module];
  HPC_RETURN_IF_ERROR(read(m.tag_begin, m.tag_end - m.tag_begin, doc));
  for (uint32_t k : which) {
    const UnitIndex::Unit& u = index.units[k];
    if (u.file_end) HPC_RETURN_IF_ERROR(read(u.file_begin, u.file_end - u.file_begin, doc));
    HPC_RETURN_IF_ERROR(read(u.begin, u.end - u.begin, doc));
    if (u.file_end) doc += "</F>";
  }
  doc += "</LM></HPCToolkitStructure>\n";
  return doc;
}

Expected<Structure> parse_model(std::string_view text, const std::string& name) {
  // A unit's document (units_document) as the scanner reads it: an XML declaration of the
  // version alone, if any, then the root (no DTD). Expat reads any other, and names errors.
  constexpr std::string_view decl = "<?xml version=\"1.0\"?>";
  size_t at = text.starts_with(decl) ? decl.size() : 0;
  while (at < text.size() && is_xml_space(text[at])) ++at;
  if (text.substr(at).starts_with("<HPCToolkitStructure")) {
    Builder b;
    Checker checker(b);
    Scanner scanner(text, checker);
    if (scanner.run(at, text.size()) && checker.root_done() && checker.depth() == 0) return b.take();
  }
  return parse_model_expat(text, name);
}

Expected<Structure> parse_model_expat(std::string_view text, const std::string& name) {
  // Small documents (a lazily read file's procedures) come many to a thread: its parser is
  // kept and reset.
  struct Kept {
    XML_Parser p = XML_ParserCreate("UTF-8");
    ~Kept() { XML_ParserFree(p); }
  };
  thread_local Kept kept;
  Builder b;
  if (text.size() > (1 << 20) || !kept.p) {
    HPC_RETURN_IF_ERROR(parse(text, name, b));
    return b.take();
  }
  Parser parser(name, b, kept.p);
  HPC_RETURN_IF_ERROR(parser.feed(text, true));
  HPC_RETURN_IF_ERROR(parser.finish());
  return b.take();
}

}  // namespace hpc::structfile
