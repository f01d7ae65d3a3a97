// hpcstruct: recover program structure from a binary and write a structure file.
#include <CLI/CLI.hpp>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for_each.h>
#include <oneapi/tbb/task_arena.h>

#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "common/cpus.hpp"
#include "common/interrupt.hpp"
#include "structure/cache.hpp"
#include "structure/emit.hpp"
#include "structure/measdir.hpp"
#include "structure/structure.hpp"

namespace {

// A one-line progress indicator on stderr, only when stderr is a terminal: the output
// file and anything piped are never touched. MT: update() is thread-safe.
class Progress {
public:
  Progress() : tty_(isatty(STDERR_FILENO) == 1) {}
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  ~Progress() { clear(); }

  bool enabled() const { return tty_; }
  // Redraws at most every 200 ms; a caller finding another one drawing skips.
  void update(const std::string& what, size_t done, size_t total) {
    if (!tty_) return;
    std::unique_lock lock(mu_, std::try_to_lock);
    if (!lock.owns_lock()) return;
    auto now = std::chrono::steady_clock::now();
    if (shown_ && now - last_ < std::chrono::milliseconds(200) && done != total) return;
    last_ = now;
    shown_ = true;
    std::fprintf(stderr, "\r\033[Khpcstruct: %s: %zu/%zu (%zu%%)", what.c_str(), done, total,
                 total ? done * 100 / total : 100);
    std::fflush(stderr);
  }
  // Shows `what` until the next update: a stage with no count yet.
  void note(const std::string& what) {
    if (!tty_) return;
    std::lock_guard lock(mu_);
    std::fprintf(stderr, "\r\033[Khpcstruct: %s", what.c_str());
    std::fflush(stderr);
    shown_ = true;
    last_ = {};
  }
  // Erases the line, so that messages start on a clean one.
  void clear() {
    if (!tty_) return;
    std::lock_guard lock(mu_);
    if (!shown_) return;
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    shown_ = false;
  }

private:
  bool tty_;
  std::mutex mu_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point last_{};
};

int gVerbose = 1;  // -v: 0 errors and warnings only, 1 each file written, 2 times too

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// Whether a measured binary is a GPU binary (hpcstruct --cpu / --gpu): one the directory's
// gpubins/ holds, or an ELF file for NVIDIA's or AMD's GPUs.
bool is_gpu_binary(const std::string& path) {
  if (std::filesystem::path(path).parent_path().filename() == "gpubins") return true;
  unsigned char h[20] = {};
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  const bool elf = std::fread(h, 1, sizeof h, f) == sizeof h && h[0] == 0x7f && h[1] == 'E' && h[2] == 'L' && h[3] == 'F';
  std::fclose(f);
  const unsigned machine = h[5] == 2 ? unsigned(h[18]) << 8 | h[19] : unsigned(h[19]) << 8 | h[18];
  return elf && (machine == 190 || machine == 224);  // EM_CUDA, EM_AMDGPU
}

// hpcstruct --pretty-print: the structure file again with each element indented by its depth
// (two spaces a level; the DTD before the document as it was), through a temporary file
// renamed into place. Our writer puts one element on a line.
bool pretty_print(const std::string& path) {
  const std::string tmp = path + ".pretty-tmp";
  {
    std::ifstream in(path);
    std::ofstream out(tmp);
    if (!in || !out) return false;
    std::string line;
    size_t depth = 0;
    bool body = false;
    while (std::getline(in, line)) {
      body = body || line.rfind("<HPCToolkitStructure", 0) == 0;
      if (!body || line.empty() || line[0] != '<') {
        out << line << '\n';
        continue;
      }
      const bool closing = line.rfind("</", 0) == 0;
      if (closing && depth > 0) --depth;
      out << std::string(2 * depth, ' ') << line << '\n';
      if (!closing && line.back() == '>' && line[line.size() - 2] != '/') ++depth;
    }
    if (!out.flush()) return false;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) std::filesystem::remove(tmp, ec);
  return !ec;
}

// Analyses one binary into `output`, through the cache when it is enabled.
// `progress` shows this binary's procedures when `perProcedure`. MT: thread-safe.
int analyse_one(const std::string& binary, const std::string& output, hpc::structure::Options opt,
                const hpc::structure::Cache& cache, Progress& progress, bool perProcedure) {
  if (cache.enabled()) {
    auto hit = cache.lookup(binary, opt);
    if (!hit.ok()) {
      std::fprintf(stderr, "hpcstruct: %s\n", hit.status().message().c_str());
      return 1;
    }
    if (*hit && cache.copy_out(**hit, output)) {
      if (gVerbose >= 1) std::fprintf(stderr, "hpcstruct: %s: copied from cache\n", binary.c_str());
      return 0;
    }
  }
  std::string warnings;
  if (progress.enabled() && perProcedure) {
    std::string what = std::filesystem::path(binary).filename().string() + ": procedures";
    opt.progress = [&progress, what](size_t done, size_t total) { progress.update(what, done, total); };
    progress.note(std::filesystem::path(binary).filename().string() + ": reading symbols and debug info");
  }
  // Procedures are analysed and written in batches: memory does not grow with the binary.
  auto st = hpc::structure::write_binary_structure(binary, opt, output, &warnings);
  if (opt.progress) progress.clear();
  if (!warnings.empty()) std::fprintf(stderr, "hpcstruct: warning: %s", warnings.c_str());
  if (!st) {
    std::fprintf(stderr, "hpcstruct: %s\n", st.message().c_str());
    return 1;
  }
  // A result short of what was asked (no nvdisasm for --gpucfg) is not kept.
  if (cache.enabled() && warnings.empty()) cache.store(binary, opt, output);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  hpc::remove_temporaries_on_signal();  // before any thread: an interrupted run leaves no temporaries
  CLI::App app{"hpcstruct: recover functions, inlined code, loops and source lines from a binary,\n"
               "or from every binary the profiles of a measurement directory used"};
  int jobs = 0;
  std::string output, cacheDir, gpucfg = "no", binary, cpu = "yes", gpu = "yes";
  bool nocache = false, pretty = false, timing = false;
  int verbose = 1;
  size_t dwarfCacheMb = 128;
  app.add_option("-j,--jobs", jobs, "threads to use (default: half the CPUs this process may run on)");
  app.add_option("-o,--output", output, "structure file to write (default: ./BINARY.hpcstruct)");
  app.add_flag("--nocache", nocache, "do not use the structure cache");
  app.add_option("-c,--cache", cacheDir, "structure cache directory (or $HPCTOOLKIT_HPCSTRUCT_CACHE)");
  app.add_option("--gpucfg", gpucfg, "recover loops and call sites in GPU code (yes|no): CUDA's nvdisasm where it is on PATH or in /usr/local/cuda/bin, else (and where it refuses) hpcstruct's own reading of sm_50-sm_62 and sm_70-sm_90 code; other SMs need nvdisasm")->check(CLI::IsMember({"yes", "no"}));
  app.add_option("--dwarf-cache", dwarfCacheMb,
                 "MiB of DWARF line tables and inline trees kept in memory per binary; units beyond it\n"
                 "are read again when needed (default: 128)");
  app.add_option("--cpu", cpu, "in a measurement directory, analyse its CPU binaries (yes|no, default yes)")
      ->check(CLI::IsMember({"yes", "no"}));
  app.add_option("--gpu", gpu, "in a measurement directory, analyse its GPU binaries (yes|no, default yes)")
      ->check(CLI::IsMember({"yes", "no"}));
  app.add_option("-v,--verbose", verbose,
                 "messages on stderr: 0 errors and warnings only, 1 (default) also each structure file\n"
                 "written, 2 or more also the times and peak memory (as --time)");
  app.add_flag("--time", timing, "print each binary's analysis time, and the run's time and peak memory");
  app.add_flag("--pretty-print", pretty, "indent the structure file's elements by their depth");
  // The reference's tuning and developer options, accepted so that its scripts run: oneTBB
  // shares -j's threads among binaries and procedures as they come, with no stack to size.
  std::string ignored;
  app.add_option("--psize", ignored, "accepted, without effect (the reference's size of a large binary)");
  app.add_option("-s,--stack", ignored, "accepted, without effect (the reference's OpenMP stack size)");
  std::string ignoredJobs[3];
  app.add_option("--jobs-struct", ignoredJobs[0], "accepted, without effect: -j sets every phase's threads");
  app.add_option("--jobs-parse", ignoredJobs[1], "accepted, without effect: -j sets every phase's threads");
  app.add_option("--jobs-symtab", ignoredJobs[2], "accepted, without effect: -j sets every phase's threads");
  bool showGaps = false;
  app.add_flag("--show-gaps", showGaps, "accepted, without effect: no gaps file is written");
  app.add_option("-M", ignored, "accepted, without effect (the reference's scripts pass the measurement directory)");
  app.add_option("binary", binary,
                 "binary to analyse, or a measurement directory: each binary its profiles used\n"
                 "is analysed into DIR/structs/<name>.hpcstruct")->required();
  app.footer(
      "Separate debug files (-dbgsym packages, objcopy --only-keep-debug) are found by build ID and\n"
      ".gnu_debuglink under $HPCTOOLKIT_DEBUG_DIRS (colon-separated directories) and /usr/lib/debug.");
  CLI11_PARSE(app, argc, argv);

  gVerbose = verbose;
  timing = timing || verbose >= 2;
  const auto start = std::chrono::steady_clock::now();
  auto seconds = [](std::chrono::steady_clock::time_point since) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
  };
  // --time: the run's wall and CPU time and peak memory, at its end.
  auto report = [&](int rc) {
    if (timing) {
      rusage u{};
      getrusage(RUSAGE_SELF, &u);
      std::fprintf(stderr, "hpcstruct: %.2f s, %.2f s CPU, peak memory %.1f MiB\n", seconds(start), cpu_seconds(),
                   double(u.ru_maxrss) / 1024.0);
    }
    return rc;
  };
  // After a structure file is written: --pretty-print, and -v's line.
  auto finish = [&](const std::string& b, const std::string& out, std::chrono::steady_clock::time_point since,
                    bool dirMode) {
    if (pretty && !pretty_print(out)) {
      std::fprintf(stderr, "hpcstruct: %s: cannot indent it (--pretty-print)\n", out.c_str());
      return 1;
    }
    if (timing) std::fprintf(stderr, "hpcstruct: %s: %.2f s\n", b.c_str(), seconds(since));
    if (dirMode && gVerbose >= 1) std::fprintf(stderr, "hpcstruct: %s -> %s\n", b.c_str(), out.c_str());
    return 0;
  };

  if (jobs <= 0) jobs = int(std::max(1u, hpc::usable_cpus() / 2));
  if (cacheDir.empty())
    if (const char* env = std::getenv("HPCTOOLKIT_HPCSTRUCT_CACHE")) cacheDir = env;
  if (nocache) cacheDir.clear();

  // -j N is N threads, also above the CPU count (oneTBB caps its pool there by default).
  tbb::global_control threads(tbb::global_control::max_allowed_parallelism, static_cast<size_t>(jobs));
  hpc::structure::Options opt;
  opt.jobs = jobs;
  opt.gpucfg = gpucfg == "yes";
  opt.debug_cache = dwarfCacheMb << 20;
  hpc::structure::Cache cache(cacheDir);
  Progress progress;

  if (std::filesystem::is_directory(binary)) {
    auto binaries = hpc::structure::measured_binaries(binary);
    if (!binaries.ok()) {
      std::fprintf(stderr, "hpcstruct: %s\n", binaries.status().message().c_str());
      return 1;
    }
    if (binaries->empty()) {
      std::fprintf(stderr, "hpcstruct: %s: none of the binaries its profiles used exist on this machine\n",
                   binary.c_str());
      return 1;
    }
    // --cpu no, --gpu no: the binaries of one kind alone.
    std::erase_if(*binaries, [&](const std::string& b) { return (is_gpu_binary(b) ? gpu : cpu) == "no"; });
    if (binaries->empty()) {
      if (gVerbose >= 1)
        std::fprintf(stderr, "hpcstruct: %s: no binary to analyse (--cpu %s --gpu %s)\n", binary.c_str(), cpu.c_str(),
                     gpu.c_str());
      return report(0);
    }
    std::filesystem::path structs = std::filesystem::path(binary) / "structs";
    std::filesystem::create_directories(structs);
    // Binaries concurrently, each one's procedures too; one pool of `jobs` threads in all.
    // A binary that fails is reported and the others are still analysed.
    std::atomic<int> failed{0};
    std::atomic<size_t> done{0};
    hpc::structure::Options nested = opt;
    nested.nested = true;
    tbb::task_arena arena(jobs);
    arena.execute([&] {
      tbb::parallel_for_each(binaries->begin(), binaries->end(), [&](const std::string& b) {
        std::string out = (structs / (std::filesystem::path(b).filename().string() + ".hpcstruct")).string();
        const auto since = std::chrono::steady_clock::now();
        if (analyse_one(b, out, nested, cache, progress, false) != 0) {
          failed.fetch_add(1);
        } else {
          progress.clear();
          if (finish(b, out, since, true) != 0) failed.fetch_add(1);
        }
        progress.update("binaries", done.fetch_add(1) + 1, binaries->size());
      });
    });
    progress.clear();
    if (!failed) return report(0);
    std::fprintf(stderr, "hpcstruct: %d of %zu binaries could not be analysed\n", failed.load(), binaries->size());
    return report(1);
  }
  if (output.empty()) output = std::filesystem::path(binary).filename().string() + ".hpcstruct";
  // A directory is never replaced by a structure file: said before the analysis, not after.
  if (std::error_code ec; std::filesystem::is_directory(output, ec)) {
    std::fprintf(stderr, "hpcstruct: %s: is a directory; name the structure file to write (it is left as it is)\n",
                 output.c_str());
    return 1;
  }
  if (const int rc = analyse_one(binary, output, opt, cache, progress, true); rc != 0) return report(rc);
  return report(finish(binary, output, start, false));
}
