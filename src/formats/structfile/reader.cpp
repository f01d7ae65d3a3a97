// Streaming reader: expat events checked against the DTD tables, one Scope per open
// element on a stack, handed to the visitor as each start tag is read.
#include <expat.h>

#include <algorithm>
#include <charconv>
#include <fstream>

#include "formats/structfile/schema.hpp"
#include "formats/structfile/structfile.hpp"

namespace hpc::structfile {
namespace {

bool parse_dec(std::string_view s, uint64_t& out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out, 10);
  return ec == std::errc() && p == s.data() + s.size();
}

bool parse_num(std::string_view s, uint64_t& out) {
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s.remove_prefix(2);
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out, 16);
    return ec == std::errc() && p == s.data() + s.size();
  }
  return parse_dec(s, out);
}

class Parser {
public:
  // With `reuse`, a parser of this thread's from an earlier parse, reset (creating one
  // costs more than parsing a procedure's few hundred bytes).
  Parser(std::string name, Visitor& v, XML_Parser reuse = nullptr) : name_(std::move(name)), visitor_(v) {
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

  // Feeds `n` bytes already placed in expat's buffer (see buffer()).
  Status feed_buffer(size_t n, bool final) { return check(XML_ParseBuffer(p_, int(n), final)); }
  void* buffer(size_t n) { return XML_GetBuffer(p_, int(n)); }
  Status feed(std::string_view text, bool final) {
    return check(XML_Parse(p_, text.data(), int(text.size()), final));
  }

  Status finish() {
    if (!error_.ok()) return error_;
    if (!root_done_) return Status::error(name_ + ": no HPCToolkitStructure element");
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
    auto kind = schema::kind_of(tag);
    if (!kind) return fail(std::string("unknown element <") + tag + ">");
    if (stack_.empty()) {
      if (*kind != Kind::Root || root_done_)
        return fail(std::string("<") + tag + "> where <HPCToolkitStructure> was expected");
    } else if (!allowed_child(stack_.back().kind, *kind)) {
      return fail(std::string("<") + tag + "> is not allowed inside <" +
                  std::string(tag_name(stack_.back().kind)) + ">");
    }
    if (stack_.size() >= size_t(schema::kMaxDepth)) return fail("elements nested too deeply");
    Scope s;
    s.kind = *kind;
    auto specs = schema::attributes(*kind);
    uint32_t seen = 0;
    for (const char** a = atts; a[0]; a += 2) {
      std::string_view key = a[0], val = a[1];
      size_t idx = 0;
      while (idx < specs.size() && specs[idx].xml != key) ++idx;
      if (idx == specs.size())
        return fail("attribute " + std::string(key) + " is not allowed on <" + tag + ">");
      seen |= 1u << idx;
      if (!visitor_.wants_text(*kind) && is_text(specs[idx].attr)) continue;  // any text is valid
      if (Status st = set(s, specs[idx].attr, val); !st.ok())
        return fail("attribute " + std::string(key) + ": " + st.message());
    }
    for (size_t i = 0; i < specs.size(); ++i)
      if (specs[i].required && !(seen & (1u << i)))
        return fail("<" + std::string(tag) + "> lacks attribute " + std::string(specs[i].xml));
    stack_.push_back(std::move(s));
    visitor_.at(uint64_t(XML_GetCurrentByteIndex(p_)), uint64_t(XML_GetCurrentByteCount(p_)));
    if (Status st = visitor_.enter(stack_.back(), int(stack_.size()) - 1); !st.ok()) {
      error_ = st;
      XML_StopParser(p_, XML_FALSE);
    }
  }

  void end() {
    if (!error_.ok() || stack_.empty()) return;
    visitor_.at(uint64_t(XML_GetCurrentByteIndex(p_)), uint64_t(XML_GetCurrentByteCount(p_)));
    Status st = visitor_.leave(stack_.back(), int(stack_.size()) - 1);
    if (!st.ok()) {
      error_ = st;
      XML_StopParser(p_, XML_FALSE);
      return;
    }
    if (stack_.back().kind == Kind::Root) root_done_ = true;
    stack_.pop_back();
  }

  static bool is_text(schema::Attr attr) {
    using A = schema::Attr;
    return attr == A::Name || attr == A::LinkName || attr == A::File || attr == A::Device;
  }

  static Status set(Scope& s, schema::Attr attr, std::string_view v) {
    using A = schema::Attr;
    uint64_t n = 0;
    switch (attr) {
      case A::Id:
        if (!parse_dec(v, s.id)) return Status::error("not a decimal number");
        break;
      case A::Line:
        if (!parse_dec(v, n)) return Status::error("not a decimal number");
        s.line = n;
        break;
      case A::StaticId:
        if (!parse_dec(v, n)) return Status::error("not a decimal number");
        s.static_id = n;
        break;
      case A::Target:
        if (!parse_num(v, n)) return Status::error("not an address");
        s.target = n;
        break;
      case A::HasCalls:
        if (!parse_dec(v, n)) return Status::error("not a decimal number");
        s.has_calls = n != 0;
        break;
      case A::VRanges: {
        auto r = parse_vranges(v);
        if (!r.ok()) return r.status();
        s.vranges = std::move(*r);
        break;
      }
      case A::Name: s.name = std::string(v); break;
      case A::LinkName: s.link_name = std::string(v); break;
      case A::File: s.file = std::string(v); break;
      case A::Device: s.device = std::string(v); break;
      case A::Version: s.version = std::string(v); break;
    }
    return Status();
  }

  XML_Parser p_;
  bool owned_ = true;
  std::string name_;
  Visitor& visitor_;
  std::vector<Scope> stack_;
  Status error_;
  bool root_done_ = false;
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

Expected<UnitIndex> index_units(const std::filesystem::path& path) {
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
      (head[5] == ' ' || head[5] == '\t' || head[5] == '\n' || head[5] == '\r')) {
    const size_t end = head.find("?>");
    if (end == std::string_view::npos) return std::string(prolog);
    lead = end + 2;
  }
  for (; lead < head.size(); ++lead)
    if (head[lead] != ' ' && head[lead] != '\t' && head[lead] != '\n' && head[lead] != '\r') return std::string(prolog);
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
                                     const std::vector<uint32_t>& which) {
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
