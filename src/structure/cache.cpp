#include "structure/cache.hpp"

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/file.hpp"
#include "structure/dwp.hpp"
#include "structure/elf_image.hpp"

namespace hpc::structure {
namespace {

// Two independent 64-bit multiply-rotate streams over 8-byte words (byte-wise FNV made a
// cache hit on a 100 MB library take seconds): 128 bits make accidental collisions moot.
struct Hash128 {
  uint64_t a = 0xcbf29ce484222325ull, b = 0x84222325cbf29ce4ull;
  static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
  void word(uint64_t w) {
    a = rotl((a ^ w) * 0x9e3779b97f4a7c15ull, 29);
    b = rotl((b ^ rotl(w, 32)) * 0xc2b2ae3d27d4eb4full, 31);
  }
  void add(std::span<const uint8_t> bytes) {
    size_t i = 0;
    for (; i + 8 <= bytes.size(); i += 8) {
      uint64_t w;
      std::memcpy(&w, bytes.data() + i, 8);
      word(w);
    }
    uint64_t tail = 0;
    if (i < bytes.size()) std::memcpy(&tail, bytes.data() + i, bytes.size() - i);
    word(tail ^ (static_cast<uint64_t>(bytes.size()) << 3));
  }
  void add(const std::string& s) { add({reinterpret_cast<const uint8_t*>(s.data()), s.size()}); }
  std::string hex() const {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(a),
                  static_cast<unsigned long long>(b));
    return buf;
  }
};

constexpr const char* kFormatVersion = "hpcstruct-cpp-7";  // 7: stripped main/_start named; 6: Rust names demangled, split DWARF read; 5: BRX targets, sm_90 CALL.REL

}  // namespace

Expected<std::string> Cache::entry_path(const std::string& binary, const Options& opt) const {
  auto f = MappedFile::open(binary);
  if (!f) return Status::error(binary + ": " + f.status().message());
  Hash128 h;
  h.add(f->bytes());
  h.add(std::string(kFormatVersion) + (opt.gpucfg ? "+gpucfg" : "") + "\n" + binary);
  // A separate debug file changes the result: its path, size and time are in the key (a
  // -dbgsym package installed later is read, not a structure cached without it).
  // So does a DWARF package (.dwp).
  auto add = [&](const char* what, const std::string& file) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(file, ec);
    const auto time = std::filesystem::last_write_time(file, ec).time_since_epoch().count();
    h.add(std::string("\n") + what + " " + file + " " + std::to_string(size) + " " + std::to_string(time));
  };
  if (auto img = ElfImage::open(binary); img.ok()) {
    const std::string dbg = find_debug_file(**img);
    if (!dbg.empty()) add("debug", dbg);
    if (std::string dwp = find_package(binary, dbg); !dwp.empty()) add("package", dwp);
  }
  return (std::filesystem::path(dir_) / (h.hex() + ".hpcstruct")).string();
}

Expected<std::optional<std::string>> Cache::lookup(const std::string& binary, const Options& opt) const {
  HPC_ASSIGN_OR_RETURN(std::string p, entry_path(binary, opt));
  std::error_code ec;
  if (std::filesystem::is_regular_file(p, ec)) return std::optional<std::string>(p);
  return std::optional<std::string>();
}

bool Cache::copy_out(const std::string& cached, const std::string& output) const {
  auto text = read_text_file(cached);
  return text.ok() && write_file_atomically(output, *text).ok();
}

void Cache::store(const std::string& binary, const Options& opt, const std::string& produced) const {
  auto p = entry_path(binary, opt);
  if (!p) return;
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  auto text = read_text_file(produced);
  if (text.ok()) (void)write_file_atomically(*p, *text);
}

}  // namespace hpc::structure
