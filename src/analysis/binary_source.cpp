// Adapter: the measured binaries themselves -> StructureSource, for modules that no
// structure file covers (hpcprof without hpcstruct, and without --foreign). Each binary is
// analysed once, on first use, by the same code as hpcstruct and read back through the
// structure-file adapter, so a database is the same with or without a prior hpcstruct run.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>

#include "analysis/io.hpp"
#include "common/interrupt.hpp"
#include "structure/emit.hpp"
#include "structure/structure.hpp"

namespace hpc::analysis {

namespace fs = std::filesystem;

namespace {

std::mutex warningsMu;
std::vector<std::string> warnings;

class MeasuredBinaries final : public StructureSource {
public:
  MeasuredBinaries(std::unique_ptr<StructureSource> inner, std::vector<PathReplacement> replace)
      : inner_(std::move(inner)), replace_(std::move(replace)) {}
  ~MeasuredBinaries() override {
    std::error_code ec;
    if (!scratch_.empty()) fs::remove_all(scratch_, ec);
    if (!scratch_.empty()) drop_temporary(scratch_);
  }
  MeasuredBinaries(const MeasuredBinaries&) = delete;
  MeasuredBinaries& operator=(const MeasuredBinaries&) = delete;

  // MT: thread-safe; the first caller for a module analyses it, others for it wait.
  bool lookup(const std::string& modulePath, uint64_t offset,
              std::vector<ScopeStep>& out) const override {
    if (inner_ && inner_->lookup(modulePath, offset, out)) return true;
    if (modulePath.empty() || modulePath[0] != '/') return false;  // vdso/ copies, placeholders
    const StructureSource* s = module(modulePath);
    return s && s->lookup(modulePath, offset, out);
  }

  // A binary that is not on this machine (or gave no structure) covers nothing: its
  // instructions then skip the expander's instruction cache, which would only double the
  // tree's own table (the benchmark's 500 synthetic profiles at -j2, 10 interleaved runs:
  // median 0.147 -> 0.143 s).
  bool mayCover(const std::string& modulePath) const override {
    if (inner_ && inner_->mayCover(modulePath)) return true;
    return !modulePath.empty() && modulePath[0] == '/' && module(modulePath);
  }

private:
  struct Entry {
    std::once_flag once;
    std::unique_ptr<StructureSource> source;
  };

  const StructureSource* module(const std::string& path) const {
    Entry* e;
    {
      std::lock_guard lock(mu_);
      auto& slot = modules_[path];
      if (!slot) slot = std::make_unique<Entry>();
      e = slot.get();
    }
    std::call_once(e->once, [&] { e->source = analyse(path, e); });
    return e->source.get();
  }

  std::unique_ptr<StructureSource> analyse(const std::string& path, const Entry* e) const {
    std::error_code ec;
    std::string onDisk = path;
    for (const PathReplacement& r : replace_)
      if (onDisk.rfind(r.from, 0) == 0) {
        onDisk = r.to + onDisk.substr(r.from.size());
        break;
      }
    if (!fs::is_regular_file(onDisk, ec)) {
      // Said once a binary (each is looked for once): why its code shows as addresses.
      addBinaryWarning(onDisk +
           ": not found here, so its code is attributed to addresses only (run hpcstruct on the measurements "
           "where the binary is, or map its directory with -R OLD=NEW)");
      return nullptr;
    }
    // The scratch directory for structure files, made on the first binary found (most
    // analyses find none: no directory made and removed on every run).
    std::call_once(scratchOnce_, [&] {
      char tmpl[] = "/tmp/hpcprof-structs-XXXXXX";
      if (mkdtemp(tmpl)) scratch_ = tmpl;
      if (!scratch_.empty()) add_temporary(scratch_);
    });
    if (scratch_.empty()) return nullptr;
    auto s = structure::analyze_binary(onDisk, structure::Options{});
    if (s.ok() && onDisk != path) s->binary_path = path;  // keyed by the measured path
    fs::path file = scratch_ / (std::to_string(reinterpret_cast<uintptr_t>(e)) + ".hpcstruct");
    Status st = s.ok() ? structure::write_structure_file(*s, file.string()) : s.status();
    if (st.ok()) {
      auto loaded = loadStructure({file}, 1);
      fs::remove(file, ec);
      if (loaded.ok()) return std::move(*loaded);
      st = loaded.status();
    }
    addBinaryWarning(path + ": no structure from the binary: " + st.message());
    return nullptr;
  }

  std::unique_ptr<StructureSource> inner_;
  std::vector<PathReplacement> replace_;
  mutable std::once_flag scratchOnce_;
  mutable fs::path scratch_;
  mutable std::mutex mu_;
  mutable std::map<std::string, std::unique_ptr<Entry>> modules_;
};

}  // namespace

std::unique_ptr<StructureSource> withMeasuredBinaries(std::unique_ptr<StructureSource> structs,
                                                      std::vector<PathReplacement> replace) {
  return std::make_unique<MeasuredBinaries>(std::move(structs), std::move(replace));
}

void addBinaryWarning(std::string line) {
  std::lock_guard lock(warningsMu);
  warnings.push_back(std::move(line));
}

std::vector<std::string> takeBinaryWarnings() {
  std::lock_guard lock(warningsMu);
  std::vector<std::string> taken;
  taken.swap(warnings);
  std::sort(taken.begin(), taken.end());
  return taken;
}

}  // namespace hpc::analysis
