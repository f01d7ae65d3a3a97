// The DTD's rules over the open elements, for either reader of a structure file's markup:
// expat's events (reader.cpp) or the body scanner's (scanner.cpp). Each start tag is checked
// and made a Scope for the visitor. Internal to formats/structfile.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "formats/structfile/structfile.hpp"

namespace hpc::structfile {

// XML's white space (between tags, inside them, in a range set).
inline bool is_xml_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

class Checker {
public:
  struct Attribute {
    std::string_view name, value;  // the value as the parser reads it (references replaced)
  };
  explicit Checker(Visitor& v) : visitor_(v) {}
  Checker(const Checker&) = delete;
  Checker& operator=(const Checker&) = delete;

  // A start tag at [offset, offset + length) of the input. An error breaks a rule (its
  // message without a position) or is the visitor's own (visitor_failed() then says so).
  Status start(std::string_view tag, std::span<const Attribute> attributes, uint64_t offset, uint64_t length);
  // The same where the tag's kind is known already (schema::kind_of(tag)).
  Status start(Kind kind, std::string_view tag, std::span<const Attribute> attributes, uint64_t offset,
               uint64_t length);
  // The end of the innermost open element (length 0: an empty-element tag's).
  Status end(uint64_t offset, uint64_t length);
  bool visitor_failed() const { return visitor_failed_; }
  bool root_done() const { return root_done_; }
  size_t depth() const { return depth_; }
  // The innermost open element's kind; depth() > 0.
  Kind open_kind() const { return stack_[depth_ - 1].kind; }
  const Visitor& visitor() const { return visitor_; }

private:
  static void clear(Scope& s, VRanges& spare);

  Visitor& visitor_;
  // The open elements' scopes, [0, depth_); those above are kept to be reused (a scope is
  // large, and most have a range set to allocate), with spare range storage by depth.
  std::vector<Scope> stack_;
  std::vector<VRanges> spare_;
  size_t depth_ = 0;
  bool root_done_ = false;
  bool visitor_failed_ = false;
};

// Reads the markup in [from, to) of `text` for `checker`: start and end tags and the white
// space between them, with the offsets expat gives. It knows only the form structure files
// have (no comments, instructions, CDATA or text; names of ASCII letters; the predefined
// entities and character references; valid UTF-8), and reads nothing it cannot tell is
// well-formed: false where it meets anything else, or where the checker or its visitor
// fails (then expat, reading the same bytes, decides, and names any error). After the
// root's end only white space is read. run() may be called on ranges one after another
// (a chunk's documents: the start tags it begins in, then its own bytes).
class Scanner {
public:
  Scanner(std::string_view text, Checker& checker) : text_(text), checker_(checker) {}
  bool run(size_t from, size_t to);

private:
  bool start_tag(size_t& at, size_t to);
  bool end_tag(size_t& at, size_t to);
  // The value from `from` to its closing `quote` (at *end, before `to`) checked; where it
  // has references and `decode`, read into scratch_ at `*where` (offset, length).
  bool value(size_t from, size_t to, char quote, bool decode, size_t* end, std::pair<size_t, size_t>* where);

  std::string_view text_;
  Checker& checker_;
  std::vector<Checker::Attribute> attributes_;
  std::vector<std::pair<size_t, size_t>> decoded_;  // by attribute: in scratch_ (npos: none)
  std::string scratch_;
};

}  // namespace hpc::structfile
