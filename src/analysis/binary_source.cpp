// Adapter: the measured binaries themselves -> StructureSource, for modules that no
// structure file covers (hpcprof without hpcstruct, and without --foreign). Each binary is
// opened once, on first use, and each of its procedures analysed once, when an instruction
// in it is first looked up: by the same code as hpcstruct, into the model a structure file
// would hold of that procedure, read through the structure-file adapter's lookup. So a
// database attributes the same as with a prior hpcstruct run, and a large binary costs only
// the procedures its samples fell in.
#include <oneapi/tbb/collaborative_call_once.h>
#include <oneapi/tbb/parallel_for.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "analysis/io.hpp"
#include "common/file.hpp"
#include "formats/structfile/structfile.hpp"
#include "structure/emit.hpp"
#include "structure/structure.hpp"

namespace hpc::analysis {

namespace fs = std::filesystem;

namespace {

std::mutex warningsMu;
std::vector<std::string> warnings;
constexpr const char* kNotFoundHere =
    ": not found here, so its code is attributed to addresses only (run hpcstruct on the measurements where the "
    "binary is, or map its directory with -R OLD=NEW)";
std::atomic<size_t> binariesOpened{0}, proceduresOpened{0}, proceduresAnalysed{0};
std::atomic<uint64_t> analysisNanoseconds{0};

// One binary's procedures, each analysed on first lookup. MT: lookup is thread-safe; two
// threads asking for one procedure at once wait for one analysis.
class BinaryProcedures final : public StructureSource {
public:
  BinaryProcedures(std::unique_ptr<structure::ProcedureAnalyzer> binary, std::string measuredPath)
      : binary_(std::move(binary)), slots_(std::make_unique<Slot[]>(binary_->size())) {
    binariesOpened.fetch_add(1, std::memory_order_relaxed);
    proceduresOpened.fetch_add(binary_->size(), std::memory_order_relaxed);
    // Named by the measured path (which -R may have rewritten to find it), as a structure
    // file from hpcstruct on the measurements would be.
    shell_.binary_path = std::move(measuredPath);
    shell_.debug = binary_->shell().debug;
    shell_.gpu = binary_->shell().gpu;
    shell_.gpu_cfg = binary_->shell().gpu_cfg;
  }

  bool lookup(const std::string&, uint64_t offset, std::vector<ScopeStep>& out) const override {
    const std::optional<size_t> i = binary_->find(offset);
    if (!i) return false;
    // Inline sites told apart across procedures: each procedure's ids above its own base.
    return structureSteps(procedure(*i).index, offset, out, uint64_t(*i + 1) << 32);
  }

  // The procedures holding these offsets, analysed in parallel.
  void prepare(const std::string&, std::vector<uint64_t>& offsets) const override {
    std::sort(offsets.begin(), offsets.end());
    std::vector<size_t> todo;
    for (size_t k = 0; k < offsets.size();) {
      const std::optional<size_t> i = binary_->find(offsets[k]);
      if (!i) {
        ++k;
        continue;
      }
      if (!slots_[*i].done.load(std::memory_order_acquire)) todo.push_back(*i);
      // Past this procedure's offsets: it ends before the next procedure begins.
      const uint64_t next = *i + 1 < binary_->size() ? binary_->begin(*i + 1) : UINT64_MAX;
      k = size_t(std::lower_bound(offsets.begin() + k, offsets.end(), next) - offsets.begin());
    }
    tbb::parallel_for(size_t(0), todo.size(), [&](size_t k) { procedure(todo[k]); });
  }

  // A GPU binary's call sites: every procedure's calls read (not the procedures analysed: a
  // library's cubin holds thousands, its samples fall in a few). A CPU binary's calls are
  // in the measured call paths: none asked of it.
  void callSites(const std::string&, std::vector<CallSite>& out) const override {
    out.clear();
    if (!shell_.gpu) return;
    std::vector<std::vector<structure::CallSite>> calls(binary_->size());
    tbb::parallel_for(size_t(0), binary_->size(), [&](size_t i) { calls[i] = binary_->call_sites(i); });
    for (size_t i = 0; i < calls.size(); ++i)
      for (const structure::CallSite& c : calls[i]) out.push_back({c.addr, binary_->begin(i), c.target});
  }

private:
  struct Analysed {
    Analysed(const structure::Structure& shell, const structure::Procedure& p)
        : model(structure::procedure_model(shell, p)), index(model) {}
    structfile::Scope model;  // the load module, its file, the procedure
    structfile::AddressIndex index;
  };
  struct Slot {
    std::once_flag once;
    std::atomic<bool> done{false};
    std::unique_ptr<Analysed> procedure;
  };
  const Analysed& procedure(size_t i) const {
    Slot& slot = slots_[i];
    std::call_once(slot.once, [&] {
      const auto start = std::chrono::steady_clock::now();
      slot.procedure = std::make_unique<Analysed>(shell_, binary_->analyze(i));
      slot.done.store(true, std::memory_order_release);
      proceduresAnalysed.fetch_add(1, std::memory_order_relaxed);
      analysisNanoseconds.fetch_add(
          uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count()),
          std::memory_order_relaxed);
    });
    return *slot.procedure;
  }
  std::unique_ptr<structure::ProcedureAnalyzer> binary_;
  structure::Structure shell_;
  std::unique_ptr<Slot[]> slots_;
};

class MeasuredBinaries final : public StructureSource {
public:
  MeasuredBinaries(std::unique_ptr<StructureSource> inner, std::vector<PathReplacement> replace,
                   int64_t measuredUntilNs)
      : inner_(std::move(inner)), replace_(std::move(replace)), measuredUntilNs_(measuredUntilNs) {}
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

  void prepare(const std::string& modulePath, std::vector<uint64_t>& offsets) const override {
    if (inner_ && inner_->mayCover(modulePath)) return inner_->prepare(modulePath, offsets);  // a structure file
    if (modulePath.empty() || modulePath[0] != '/') return;
    if (const StructureSource* s = module(modulePath)) s->prepare(modulePath, offsets);
  }

  void callSites(const std::string& modulePath, std::vector<CallSite>& out) const override {
    out.clear();
    if (inner_ && inner_->mayCover(modulePath)) return inner_->callSites(modulePath, out);  // a structure file
    if (modulePath.empty() || modulePath[0] != '/') return;
    if (const StructureSource* s = module(modulePath)) s->callSites(modulePath, out);
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
    // Collaborative: a thread that asks for a binary while another opens it helps with the
    // opening's parallel passes instead of waiting idle.
    tbb::collaborative_once_flag once;
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
    tbb::collaborative_call_once(e->once, [&] { e->source = analyse(path); });
    return e->source.get();
  }

  std::unique_ptr<StructureSource> analyse(const std::string& path) const {
    std::error_code ec;
    std::string onDisk = path;
    for (const PathReplacement& r : replace_)
      if (onDisk.rfind(r.from, 0) == 0) {
        onDisk = r.to + onDisk.substr(r.from.size());
        break;
      }
    if (!fs::is_regular_file(onDisk, ec)) {
      // Said once a binary (each is looked for once): why its code shows as addresses.
      addBinaryWarning(onDisk + kNotFoundHere);
      return nullptr;
    }
    // Its passes over all the procedures (the search for those only calls reach) on the
    // threads of the caller's task arena: the first profile's binaries are opened while the
    // other threads have nothing else to do.
    structure::Options options;
    options.jobs = 2;
    options.nested = true;
    // GPU loops and call sites from our reading of the SASS (sass.hpp), where its SM is one
    // it knows; never a run of nvdisasm per function.
    options.gpucfg = true;
    options.nvdisasm = false;
    // A binary rebuilt (or a library upgraded) after the run: its addresses are no longer
    // the measured ones. Analysed all the same (often only a little moved), and said.
    if (std::string w = changed_since_measured(onDisk, measuredUntilNs_); !w.empty()) addBinaryWarning(std::move(w));
    auto opened = structure::ProcedureAnalyzer::open(onDisk, options);
    if (!opened.ok()) {
      addBinaryWarning(path + ": no structure from the binary: " + opened.status().message());
      return nullptr;
    }
    return std::make_unique<BinaryProcedures>(std::move(*opened), path);
  }

  std::unique_ptr<StructureSource> inner_;
  std::vector<PathReplacement> replace_;
  int64_t measuredUntilNs_;
  mutable std::mutex mu_;
  mutable std::map<std::string, std::unique_ptr<Entry>> modules_;
};

}  // namespace

std::unique_ptr<StructureSource> withMeasuredBinaries(std::unique_ptr<StructureSource> structs,
                                                      std::vector<PathReplacement> replace, int64_t measuredUntilNs) {
  return std::make_unique<MeasuredBinaries>(std::move(structs), std::move(replace), measuredUntilNs);
}

BinaryAnalysis binaryAnalysis() {
  return {binariesOpened.load(), proceduresOpened.load(), proceduresAnalysed.load(),
          double(analysisNanoseconds.load()) / 1e9};
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

std::vector<std::string> summarizeBinaryWarnings(const std::vector<std::string>& lines) {
  const std::string suffix = kNotFoundHere;
  std::vector<std::string> out, missing;
  for (const std::string& l : lines) {
    if (l.size() > suffix.size() && l.compare(l.size() - suffix.size(), suffix.size(), suffix) == 0)
      missing.push_back(l.substr(0, l.size() - suffix.size()));
    else
      out.push_back(l);
  }
  constexpr size_t kEach = 4;  // up to this many missing binaries get a line each
  if (missing.size() <= kEach) {
    for (const std::string& m : missing) out.push_back(m + suffix);
    std::sort(out.begin(), out.end());
    return out;
  }
  // Many (a Python program's modules, measured on another machine): one line, with the
  // directories they were in, which is what -R maps.
  std::sort(missing.begin(), missing.end());
  std::map<std::string, size_t> dirs;
  for (const std::string& m : missing) ++dirs[fs::path(m).parent_path().string()];
  std::vector<std::pair<size_t, std::string>> byCount;
  for (const auto& [d, n] : dirs) byCount.push_back({n, d});
  std::stable_sort(byCount.begin(), byCount.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string line = std::to_string(missing.size()) +
                     " measured binaries are not found here, so their code is attributed to addresses only (run "
                     "hpcstruct on the measurements where they are, or map their directories with -R OLD=NEW): ";
  for (size_t i = 0; i < 3; ++i) line += (i ? ", " : "") + missing[i];
  line += " and " + std::to_string(missing.size() - 3) + " more; in ";
  for (size_t i = 0; i < byCount.size() && i < 4; ++i)
    line += (i ? ", " : "") + byCount[i].second + " (" + std::to_string(byCount[i].first) + ")";
  if (byCount.size() > 4) line += " and " + std::to_string(byCount.size() - 4) + " more directories";
  out.push_back(line);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace hpc::analysis
