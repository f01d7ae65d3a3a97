// Function names from ELF symbol tables for binaries copied into a measurement
// directory (vdso/<md5>.vdso), used where no structure file covers a module. The
// reference does the same even with --foreign, since these files belong to the
// measurement, not to the machine it ran on.
//
// And the names of code outside every module (JIT compilers', stubs generated at run
// time): hpcrun records it against a module jit/<app>-<pid>-<gen>.map whose offsets are
// addresses, and copies there the perf map the process wrote (`/tmp/perf-<pid>.map`: a line
// `START SIZE NAME` a function, START and SIZE in hex, as JVMs with -XX:+DumpPerfMapAtExit,
// node with --perf-basic-prof and Python 3.12 with -X perf write it). An address no line
// covers, or a process that wrote no map, is one function: <generated code>.
//
// And Python frames (`hpcrun -a python`): hpcrun records them against a module
// python/<app>-<pid>-<gen>.txt at offsets (index << 24 | line), the file a line per code object
// ("qualified name<TAB>file<TAB>first line", index 1 the first line). Each is its function
// (named by its qualified name, defined in its file at its first line) and the line in it.
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <system_error>

#include "analysis/io.hpp"
#include "structure/elf_image.hpp"

namespace hpc::analysis {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kGeneratedCode = "<generated code>";

bool isPerfMapModule(const std::string& modulePath) { return modulePath.rfind("jit/", 0) == 0; }

// A perf map's functions, by start; where lines cover an address twice (code the JIT freed
// and used again), the later line's.
class PerfMap {
public:
  struct Fn {
    uint64_t start, end;
    uint32_t order;  // line number
    std::string name;
  };

  static std::unique_ptr<PerfMap> read(const fs::path& p) {
    std::ifstream in(p);
    if (!in) return nullptr;
    auto m = std::make_unique<PerfMap>();
    std::string line;
    for (uint32_t order = 0; std::getline(in, line); ++order) {
      size_t at = 0;
      uint64_t start = 0, size = 0;
      if (!hex(line, at, start) || !hex(line, at, size) || at >= line.size() || size == 0) continue;
      std::string name = line.substr(at);
      while (!name.empty() && (name.back() == '\r' || name.back() == ' ')) name.pop_back();
      if (name.empty() || start + size < start) continue;
      m->fns_.push_back(Fn{start, start + size, order, std::move(name)});
    }
    std::sort(m->fns_.begin(), m->fns_.end(),
              [](const Fn& a, const Fn& b) { return a.start != b.start ? a.start < b.start : a.order < b.order; });
    return m;
  }

  // The function holding addr: of the last 32 starting at or below it, the latest line's.
  const Fn* find(uint64_t addr) const {
    auto it = std::upper_bound(fns_.begin(), fns_.end(), addr, [](uint64_t a, const Fn& f) { return a < f.start; });
    const Fn* best = nullptr;
    for (int n = 0; it != fns_.begin() && n < 32; ++n) {
      --it;
      if (addr < it->end && (!best || it->order > best->order)) best = &*it;
    }
    return best;
  }

private:
  // One hex number, with or without 0x, after spaces; at moves past it and one space.
  static bool hex(const std::string& s, size_t& at, uint64_t& v) {
    while (at < s.size() && s[at] == ' ') ++at;
    if (at + 1 < s.size() && s[at] == '0' && (s[at + 1] == 'x' || s[at + 1] == 'X')) at += 2;
    const size_t begin = at;
    v = 0;
    for (; at < s.size(); ++at) {
      const char c = s[at];
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) break;
      if (v >> 60) return false;
      v = v << 4 | uint64_t(d);
    }
    if (at == begin || (at < s.size() && s[at] != ' ')) return false;
    if (at < s.size()) ++at;
    return true;
  }

  std::vector<Fn> fns_;
};

bool isPythonModule(const std::string& modulePath) { return modulePath.rfind("python/", 0) == 0; }

// A Python code objects' table.
class PythonTable {
public:
  struct Code {
    std::string name, file;
    uint32_t line = 0;
  };

  static std::unique_ptr<PythonTable> read(const fs::path& p) {
    std::ifstream in(p);
    if (!in) return nullptr;
    auto t = std::make_unique<PythonTable>();
    std::string line;
    while (std::getline(in, line)) {
      Code c;
      const size_t a = line.find('\t'), b = a == std::string::npos ? a : line.find('\t', a + 1);
      if (b == std::string::npos) {
        c.name = line;
      } else {
        c.name = line.substr(0, a);
        c.file = line.substr(a + 1, b - a - 1);
        c.line = uint32_t(std::strtoul(line.c_str() + b + 1, nullptr, 10));
      }
      if (c.name.empty()) c.name = "<python>";
      t->codes_.push_back(std::move(c));
    }
    return t;
  }

  const Code* find(uint64_t index) const { return index >= 1 && index <= codes_.size() ? &codes_[index - 1] : nullptr; }

private:
  std::vector<Code> codes_;
};

class MeasuredSymbols final : public StructureSource {
public:
  MeasuredSymbols(std::unique_ptr<StructureSource> inner, std::vector<fs::path> dirs)
      : inner_(std::move(inner)), dirs_(std::move(dirs)) {}

  bool lookup(const std::string& modulePath, uint64_t offset,
              std::vector<ScopeStep>& out) const override {
    if (inner_ && inner_->lookup(modulePath, offset, out)) return true;
    if (isPerfMapModule(modulePath)) {
      const PerfMap* map = perfMap(modulePath);
      const PerfMap::Fn* f = map ? map->find(offset) : nullptr;
      ScopeStep st;
      st.kind = ScopeStep::Kind::Procedure;
      st.name = f ? std::string_view(f->name) : kGeneratedCode;
      st.offset = 0;  // a method compiled again (tiers, on-stack replacement) is one function
      st.moduleless = true;  // and one in every process
      out.assign(1, std::move(st));
      return true;
    }
    if (isPythonModule(modulePath)) {
      const PythonTable* table = pythonTable(modulePath);
      const uint64_t index = offset >> 24;
      const PythonTable::Code* c = table ? table->find(index) : nullptr;
      if (!c) return false;
      const auto line = uint32_t(offset & 0xffffff);
      out.resize(2);
      out[0] = ScopeStep{};
      out[0].kind = ScopeStep::Kind::Procedure;
      out[0].name = c->name;
      out[0].file = c->file;
      out[0].line = c->line;
      out[0].offset = index << 24;
      out[0].moduleless = true;
      out[1] = ScopeStep{};
      out[1].kind = ScopeStep::Kind::Line;
      out[1].file = c->file;
      out[1].line = line;
      return true;
    }
    if (modulePath.rfind("vdso/", 0) != 0) return false;
    const structure::ElfImage* elf = image(modulePath);
    if (!elf) return false;
    const auto& fns = elf->functions();
    auto it = std::upper_bound(fns.begin(), fns.end(), offset,
                               [](uint64_t a, const structure::SymbolFunction& f) { return a < f.addr; });
    if (it == fns.begin()) return false;
    const structure::SymbolFunction& f = *std::prev(it);
    uint64_t end = f.size ? f.addr + f.size : (it == fns.end() ? UINT64_MAX : it->addr);
    if (offset >= end || f.plt) return false;
    ScopeStep st;
    st.kind = ScopeStep::Kind::Procedure;
    st.name = f.name;
    st.offset = f.addr;
    out.assign(1, std::move(st));
    return true;
  }

  void prepare(const std::string& modulePath, std::vector<uint64_t>& offsets) const override {
    if (inner_) inner_->prepare(modulePath, offsets);
  }

  void callSites(const std::string& modulePath, std::vector<CallSite>& out) const override {
    out.clear();
    if (inner_) inner_->callSites(modulePath, out);
  }

  bool mayCover(const std::string& modulePath) const override {
    return (inner_ && inner_->mayCover(modulePath)) || isPerfMapModule(modulePath) || isPythonModule(modulePath) ||
           (modulePath.rfind("vdso/", 0) == 0 && image(modulePath));
  }

private:
  // The file modulePath names in the first measurement directory that holds it, read once by
  // `read` (a path to a unique_ptr, null where unreadable) into `cache`. MT: thread-safe.
  template <class T, class Read>
  const T* measured(std::map<std::string, std::unique_ptr<T>>& cache, const std::string& modulePath,
                    Read read) const {
    std::lock_guard lock(mu_);
    auto it = cache.find(modulePath);
    if (it != cache.end()) return it->second.get();
    std::unique_ptr<T> found;
    for (const fs::path& d : dirs_) {
      std::error_code ec;
      fs::path p = d / modulePath;
      if (!fs::is_regular_file(p, ec)) continue;
      found = read(p);
      break;
    }
    return cache.emplace(modulePath, std::move(found)).first->second.get();
  }

  const structure::ElfImage* image(const std::string& modulePath) const {
    return measured(images_, modulePath, [](const fs::path& p) {
      auto img = structure::ElfImage::open(p.string());
      return img.ok() ? std::move(*img) : std::unique_ptr<structure::ElfImage>();
    });
  }
  const PerfMap* perfMap(const std::string& modulePath) const { return measured(maps_, modulePath, PerfMap::read); }
  const PythonTable* pythonTable(const std::string& modulePath) const {
    return measured(tables_, modulePath, PythonTable::read);
  }

  std::unique_ptr<StructureSource> inner_;
  std::vector<fs::path> dirs_;
  mutable std::mutex mu_;
  mutable std::map<std::string, std::unique_ptr<structure::ElfImage>> images_;
  mutable std::map<std::string, std::unique_ptr<PerfMap>> maps_;
  mutable std::map<std::string, std::unique_ptr<PythonTable>> tables_;
};

}  // namespace

std::unique_ptr<StructureSource> withMeasuredSymbols(std::unique_ptr<StructureSource> structs,
                                                     std::vector<fs::path> measurementDirs) {
  return std::make_unique<MeasuredSymbols>(std::move(structs), std::move(measurementDirs));
}

}  // namespace hpc::analysis
