// Start and end tags checked against the DTD tables, one Scope per open element.
#include "formats/structfile/checker.hpp"

#include <charconv>

#include "formats/structfile/schema.hpp"

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

bool is_text(schema::Attr attr) {
  using A = schema::Attr;
  return attr == A::Name || attr == A::LinkName || attr == A::File || attr == A::Device;
}

Status set(Scope& s, schema::Attr attr, std::string_view v, VRanges& spare) {
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
    case A::VRanges:
      HPC_RETURN_IF_ERROR(parse_vranges(v, spare));
      s.vranges.emplace(std::move(spare));
      break;
    case A::Name: s.name = std::string(v); break;
    case A::LinkName: s.link_name = std::string(v); break;
    case A::File: s.file = std::string(v); break;
    case A::Device: s.device = std::string(v); break;
    case A::Version: s.version = std::string(v); break;
  }
  return Status();
}

}  // namespace

Status Checker::start(std::string_view tag, std::span<const Attribute> attributes, uint64_t offset,
                      uint64_t length) {
  const std::optional<Kind> kind = schema::kind_of(tag);
  if (!kind) return Status::error("unknown element <" + std::string(tag) + ">");
  return start(*kind, tag, attributes, offset, length);
}

Status Checker::start(Kind kind, std::string_view tag, std::span<const Attribute> attributes, uint64_t offset,
                      uint64_t length) {
  if (depth_ == 0) {
    if (kind != Kind::Root || root_done_)
      return Status::error("<" + std::string(tag) + "> where <HPCToolkitStructure> was expected");
  } else if (!allowed_child(stack_[depth_ - 1].kind, kind)) {
    return Status::error("<" + std::string(tag) + "> is not allowed inside <" +
                         std::string(tag_name(stack_[depth_ - 1].kind)) + ">");
  }
  if (depth_ >= size_t(schema::kMaxDepth)) return Status::error("elements nested too deeply");
  // The scope of this depth's last element, cleared (its ranges' storage kept for the next).
  if (depth_ == stack_.size()) {
    stack_.emplace_back();
    spare_.emplace_back();
  }
  Scope& s = stack_[depth_];
  clear(s, spare_[depth_]);
  s.kind = kind;
  auto specs = schema::attributes(kind);
  uint32_t seen = 0;
  const bool text = visitor_.wants_text(kind);
  for (const Attribute& a : attributes) {
    const std::string_view key = a.name;
    size_t idx = 0;
    // Names of one or two letters mostly: compared in place (== calls memcmp).
    auto same = [&](std::string_view spec) {
      if (spec.size() != key.size()) return false;
      for (size_t i = 0; i < key.size(); ++i)
        if (spec[i] != key[i]) return false;
      return true;
    };
    while (idx < specs.size() && !same(specs[idx].xml)) ++idx;
    if (idx == specs.size())
      return Status::error("attribute " + std::string(key) + " is not allowed on <" + std::string(tag) + ">");
    seen |= 1u << idx;
    if (!text && is_text(specs[idx].attr)) continue;  // any text is valid
    if (Status st = set(s, specs[idx].attr, a.value, spare_[depth_]); !st.ok())
      return Status::error("attribute " + std::string(key) + ": " + st.message());
  }
  for (size_t i = 0; i < specs.size(); ++i)
    if (specs[i].required && !(seen & (1u << i)))
      return Status::error("<" + std::string(tag) + "> lacks attribute " + std::string(specs[i].xml));
  ++depth_;
  visitor_.at(offset, length);
  if (Status st = visitor_.enter(s, int(depth_) - 1); !st.ok()) {
    visitor_failed_ = true;
    return st;
  }
  return Status();
}

Status Checker::end(uint64_t offset, uint64_t length) {
  if (depth_ == 0) return Status();
  visitor_.at(offset, length);
  const Scope& s = stack_[depth_ - 1];
  if (Status st = visitor_.leave(s, int(depth_) - 1); !st.ok()) {
    visitor_failed_ = true;
    return st;
  }
  if (s.kind == Kind::Root) root_done_ = true;
  --depth_;
  return Status();
}

void Checker::clear(Scope& s, VRanges& spare) {
  s.id = 0;
  s.name.reset();
  s.link_name.reset();
  s.file.reset();
  s.line.reset();
  s.static_id.reset();
  if (s.vranges) {
    spare = std::move(*s.vranges);
    s.vranges.reset();
  }
  s.target.reset();
  s.device.reset();
  s.version.clear();
  s.has_calls = false;
}

}  // namespace hpc::structfile
