// Element kinds, nesting rules and the `v` range-set syntax.
#include <algorithm>
#include <charconv>
#include <cinttypes>
#include <cstdio>

#include "formats/structfile/checker.hpp"
#include "formats/structfile/schema.hpp"
#include "formats/structfile/structfile.hpp"

namespace hpc::structfile {

std::string_view tag_name(Kind k) {
  switch (k) {
    case Kind::Root: return "HPCToolkitStructure";
    case Kind::LoadModule: return "LM";
    case Kind::File: return "F";
    case Kind::Procedure: return "P";
    case Kind::Alien: return "A";
    case Kind::Loop: return "L";
    case Kind::Statement: return "S";
    case Kind::Call: return "C";
  }
  return "?";
}

bool allowed_child(Kind parent, Kind child) {
  using K = Kind;
  switch (parent) {
    case K::Root: return child == K::LoadModule;
    case K::LoadModule: return child == K::File || child == K::Procedure;
    case K::File: return child == K::Procedure || child == K::Loop || child == K::Statement;
    case K::Procedure:
      return child == K::Procedure || child == K::Alien || child == K::Loop ||
             child == K::Statement || child == K::Call;
    case K::Alien:
    case K::Loop:
      return child == K::Alien || child == K::Loop || child == K::Statement || child == K::Call;
    case K::Statement: return false;
    case K::Call: return child == K::Call;
  }
  return false;
}

namespace schema {

std::span<const AttrSpec> attributes(Kind k) {
  using A = Attr;
  static constexpr AttrSpec root[] = {{"i", A::Id, true}, {"version", A::Version, true},
                                      {"n", A::Name, false}};
  static constexpr AttrSpec lm[] = {{"i", A::Id, true}, {"n", A::Name, true},
                                    {"has-calls", A::HasCalls, true}, {"v", A::VRanges, false}};
  static constexpr AttrSpec f[] = {{"i", A::Id, true}, {"n", A::Name, true}};
  static constexpr AttrSpec p[] = {{"i", A::Id, true},        {"n", A::Name, true},
                                   {"ln", A::LinkName, false}, {"s", A::StaticId, false},
                                   {"l", A::Line, false},      {"v", A::VRanges, false}};
  static constexpr AttrSpec a[] = {{"i", A::Id, true},    {"l", A::Line, false},
                                   {"f", A::File, false}, {"n", A::Name, false},
                                   {"ln", A::LinkName, false}, {"v", A::VRanges, false}};
  static constexpr AttrSpec l[] = {{"i", A::Id, true}, {"l", A::Line, true},
                                   {"f", A::File, false}, {"v", A::VRanges, false}};
  static constexpr AttrSpec s[] = {{"i", A::Id, true}, {"l", A::Line, true},
                                   {"v", A::VRanges, false}};
  static constexpr AttrSpec c[] = {{"i", A::Id, true},       {"l", A::Line, true},
                                   {"v", A::VRanges, false}, {"t", A::Target, false},
                                   {"d", A::Device, false}};
  switch (k) {
    case Kind::Root: return root;
    case Kind::LoadModule: return lm;
    case Kind::File: return f;
    case Kind::Procedure: return p;
    case Kind::Alien: return a;
    case Kind::Loop: return l;
    case Kind::Statement: return s;
    case Kind::Call: return c;
  }
  return {};
}

void append_addr(std::string& out, uint64_t a) {
  if (a == 0) {
    out += '0';
    return;
  }
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, a);
  out += buf;
}

std::optional<Kind> kind_of(std::string_view tag) {
  // Every element of a file asks (hundreds of thousands in a large binary's): by its first
  // letter, not by comparing it with each name in turn.
  if (tag.size() == 1) {
    switch (tag[0]) {
      case 'F': return Kind::File;
      case 'P': return Kind::Procedure;
      case 'A': return Kind::Alien;
      case 'L': return Kind::Loop;
      case 'S': return Kind::Statement;
      case 'C': return Kind::Call;
      default: return std::nullopt;
    }
  }
  if (tag == tag_name(Kind::LoadModule)) return Kind::LoadModule;
  if (tag == tag_name(Kind::Root)) return Kind::Root;
  return std::nullopt;
}

}  // namespace schema

namespace {

bool parse_addr(std::string_view s, uint64_t& out) {
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s.remove_prefix(2);
    base = 16;
  }
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out, base);
  return ec == std::errc() && p == s.data() + s.size();
}


}  // namespace

std::string format_vranges(const VRanges& v) {
  std::string out = "{";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ' ';
    out += '[';
    schema::append_addr(out, v[i].begin);
    out += '-';
    schema::append_addr(out, v[i].end);
    out += ')';
  }
  out += '}';
  return out;
}

Expected<VRanges> parse_vranges(std::string_view text) {
  VRanges out;
  HPC_RETURN_IF_ERROR(parse_vranges(text, out));
  return out;
}

Status parse_vranges(std::string_view text, VRanges& out) {
  auto bad = [&](const char* why) {
    return Status::error("bad address range set \"" + std::string(text.substr(0, 80)) +
                         "\": " + why);
  };
  out.clear();
  if (text.size() < 2 || text.front() != '{' || text.back() != '}') return bad("not in {...}");
  std::string_view body = text.substr(1, text.size() - 2);
  out.reserve(size_t(std::count(body.begin(), body.end(), '[')));  // one allocation, not one a doubling
  size_t i = 0;
  while (true) {
    while (i < body.size() && is_xml_space(body[i])) ++i;
    if (i == body.size()) break;
    if (body[i] != '[') return bad("expected '['");
    size_t dash = body.find('-', i);
    size_t close = body.find(')', i);
    if (dash == std::string_view::npos || close == std::string_view::npos || dash > close)
      return bad("expected [begin-end)");
    VRange r;
    if (!parse_addr(body.substr(i + 1, dash - i - 1), r.begin) ||
        !parse_addr(body.substr(dash + 1, close - dash - 1), r.end))
      return bad("bad address");
    if (r.end < r.begin) return bad("range ends before it begins");
    out.push_back(r);
    i = close + 1;
    if (i < body.size() && !is_xml_space(body[i])) return bad("ranges must be separated by spaces");
  }
  return Status();
}

}  // namespace hpc::structfile
