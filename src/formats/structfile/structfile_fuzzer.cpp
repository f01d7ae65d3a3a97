// Fuzz target: any input parses cleanly or fails with a Status; a parse survives
// write -> parse unchanged; and a file that parses is read lazily as it is whole: it is
// indexed, and each unit's own document (units_document, with unit_prolog's prolog) parses
// to the very scopes of that unit in the whole parse, with its file's. Any input indexed in
// chunks, or by the scanner, gets expat's one pass's index, and none where it refuses it.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "formats/structfile/structfile.hpp"

namespace {

using namespace hpc::structfile;

[[noreturn]] void fault(int line) {
  std::fprintf(stderr, "structfile_fuzzer: check at line %d failed\n", line);
  std::abort();
}
#define CHECK(cond) \
  do {              \
    if (!(cond)) fault(__LINE__); \
  } while (0)

// The units of a whole parse in document order, as index_units finds them: each child of a
// module but its files, and each child of those files; with the file each is in (or null).
void unitsOf(const Scope& root, std::vector<std::pair<const Scope*, const Scope*>>& out) {
  for (const Scope& lm : root.children)
    for (const Scope& c : lm.children) {
      if (c.kind != Kind::File) {
        out.push_back({&c, nullptr});
        continue;
      }
      for (const Scope& u : c.children) out.push_back({&u, &c});
    }
}

// The tags alike, children aside. Not by copies without children: a copy of a whole file
// scope per unit made a file of 1,750 procedures take 11 s a run under AddressSanitizer.
bool sameTag(const Scope& a, const Scope& b) {
  auto tag = [](const Scope& s) {
    return std::tie(s.kind, s.id, s.name, s.link_name, s.file, s.line, s.static_id, s.vranges, s.target,
                    s.device, s.version, s.has_calls);
  };
  return tag(a) == tag(b);
}

const std::filesystem::path& fileOf(std::string_view in) {
  static const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("structfile-fuzz-" + std::to_string(::getpid()) + ".xml");
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(in.data(), std::streamsize(in.size()));
  return path;
}

// Indexed in chunks of 64 bytes: never where the one pass refuses the file, else its index.
// The scanner likewise, and index_units (either, then expat) gives expat's index or error.
void checkChunks(const std::filesystem::path& path, const hpc::Expected<UnitIndex>& whole) {
  auto scanned = index_units_scanned(path);
  if (!whole.ok()) CHECK(!scanned);
  else if (scanned) CHECK(*whole == *scanned);
  auto any = index_units(path);
  CHECK(any.ok() == whole.ok());
  if (!whole.ok()) CHECK(any.status().message() == whole.status().message());
  else CHECK(*any == *whole);
  ForEachIndex each = [](size_t n, const std::function<void(size_t)>& f) {
    for (size_t i = 0; i < n; ++i) f(i);
  };
  auto parts = index_units_in_chunks(path, 64, each);
  if (!whole.ok()) CHECK(!parts);
  else if (parts) CHECK(*whole == *parts);
}

void checkLazy(std::string_view in, const Scope& whole, const std::filesystem::path& path) {
  auto index = index_units(path);
  CHECK(index.ok());  // parse_model took it whole
  std::vector<std::pair<const Scope*, const Scope*>> units;
  unitsOf(whole, units);
  CHECK(units.size() == index->units.size());
  const std::string prolog = unit_prolog(in.substr(0, index->prolog_end), *index);
  ReadBytes read = [&](uint64_t offset, uint64_t length, std::string& out) {
    if (offset > in.size() || length > in.size() - offset) return hpc::Status::error("out of the file");
    out.append(in.substr(offset, length));
    return hpc::Status();
  };
  for (uint32_t k = 0; k < index->units.size(); ++k) {
    auto doc = units_document(read, *index, prolog, std::span(&k, 1));
    CHECK(doc.ok());
    auto part = parse_model(*doc, "fuzz-unit");
    CHECK(part.ok());
    CHECK(part->children.size() == 1 && part->children.front().children.size() == 1);
    const Scope& lm = part->children.front();
    const Scope& first = lm.children.front();
    const auto [unit, file] = units[k];
    if (file) {
      CHECK(first.kind == Kind::File && sameTag(first, *file) && first.children.size() == 1);
      CHECK(first.children.front() == *unit);
    } else {
      CHECK(first == *unit);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const std::filesystem::path& path = fileOf(in);
  checkChunks(path, index_units_expat(path));
  auto s = parse_model(in, "fuzz");
  {  // the scanner reads what expat reads, alike, and nothing it refuses
    auto e = parse_model_expat(in, "fuzz");
    CHECK(e.ok() == s.ok());
    if (e.ok()) CHECK(*e == *s);
    else CHECK(e.status().message() == s.status().message());
  }
  if (!s.ok()) {
    CHECK(s.status().message().find("fuzz") != std::string::npos);
    return 0;
  }
  std::string text = to_string(*s);
  CHECK(!text.empty());
  auto again = parse_model(text, "fuzz-rewritten");
  CHECK(again.ok() && *again == *s);
  if (!s->children.empty()) {
    AddressIndex index(s->children.front());
    (void)index.path(0x1000);
  }
  checkLazy(in, *s, path);
  return 0;
}
