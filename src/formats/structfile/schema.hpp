// The DTD as tables, shared by the reader and the writer so both enforce the same rules.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "formats/structfile/structfile.hpp"

namespace hpc::structfile::schema {

enum class Attr : uint8_t { Id, Name, LinkName, File, Line, StaticId, VRanges, Target, Device,
                            Version, HasCalls };

struct AttrSpec {
  std::string_view xml;
  Attr attr;
  bool required;
};

// In the order the reference writes them.
std::span<const AttrSpec> attributes(Kind k);
std::optional<Kind> kind_of(std::string_view tag);
// The reference prints addresses with std::showbase: "0x1f", but plain "0" for zero.
void append_addr(std::string& out, uint64_t a);
// Deepest nesting accepted; guards recursion in consumers of the model.
inline constexpr int kMaxDepth = 4096;

}  // namespace hpc::structfile::schema
