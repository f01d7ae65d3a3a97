// Fuzz target: any input parses cleanly or fails with a Status; a parse survives
// write -> parse unchanged.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "formats/structfile/structfile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hpc::structfile;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  auto s = parse_model(in, "fuzz");
  if (!s.ok()) {
    if (s.status().message().find("fuzz") == std::string::npos) std::abort();
    return 0;
  }
  std::string text = to_string(*s);
  if (text.empty()) std::abort();
  auto again = parse_model(text, "fuzz-rewritten");
  if (!again.ok() || !(*again == *s)) std::abort();
  if (!s->children.empty()) {
    AddressIndex index(s->children.front());
    (void)index.path(0x1000);
  }
  return 0;
}
