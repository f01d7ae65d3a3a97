// Fuzz target for hpcprof's whole pipeline, reader to database, on damaged measurements:
// what a corrupt profile may do is be skipped with a warning, or fail the run with an
// error; never crash, hang or write a database that does not hold what the run reported.
//
// The input is a measurement directory in one piece: files separated by kSeparator, each a
// .hpcrun profile or, after one, that profile's .hpctrace (told apart by their magic). So a
// seed of two threads of one run (tests/fuzz/) takes the paths a profile like the one before
// it takes (byte-equal node lists, the positional and the keyed templates), and a mutation
// damages one thread of them. The files are written into a temporary directory of this
// process and analysed in memory (MemorySink), at -j1, or at -j2 where the input's size is
// odd (the first profile's templates seeded into the other thread). Where the input holds a
// GPU kernel's placeholder, every module has a made-up structure of GPU code with calls
// (below), so that PC samples in called functions go through GPU calling-context
// reconstruction (seed gpu-calls.bin: gen_gpu_calls' profiles, whose samples fall in those
// procedures).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <tbb/global_control.h>

#include "analysis/io.hpp"
#include "analysis/memory_sink.hpp"
#include "analysis/pipeline.hpp"
#include "formats/hpcrun/hpcrun.hpp"

namespace fs = std::filesystem;
using namespace hpc;
using namespace hpc::analysis;

namespace {

constexpr std::string_view kSeparator = "\n--hpcprof-fuzz-file--\n";

const fs::path& scratch() {
  static const fs::path dir = [] {
    std::string base = fs::exists("/dev/shm") ? "/dev/shm" : fs::temp_directory_path().string();
    std::string tmpl = base + "/hpcprof-fuzz-XXXXXX";
    if (!::mkdtemp(tmpl.data())) std::abort();
    return fs::path(tmpl);
  }();
  return dir;
}

// Any module: a procedure every 0x100 bytes of [0x11000, 0x16000); in each, the instruction
// at +0x40 calls the next procedure, the one at +0x80 the one before (recursion through the
// whole range) and the one at +0xc0 the procedure 0x800 further (diamonds).
class GpuCalls final : public StructureSource {
public:
  static constexpr uint64_t kBegin = 0x11000, kEnd = 0x16000;
  GpuCalls() {
    for (uint64_t p = kBegin; p < kEnd; p += 0x100) names_[(p - kBegin) >> 8] = "p" + std::to_string(p);
  }
  bool lookup(const std::string&, uint64_t a, std::vector<ScopeStep>& out) const override {
    out.clear();
    if (a < kBegin || a >= kEnd) return false;
    const uint64_t proc = a & ~uint64_t(0xff);
    out.push_back({ScopeStep::Kind::Procedure, names_[(proc - kBegin) >> 8], "gpu.cu", 1, proc, 0});
    out.push_back({ScopeStep::Kind::Line, "", "gpu.cu", uint32_t(a - proc) / 16 + 2, 0, 0});
    return true;
  }
  void callSites(const std::string&, std::vector<CallSite>& out) const override {
    out.clear();
    for (uint64_t p = kBegin; p < kEnd; p += 0x100) {
      if (p + 0x100 < kEnd) out.push_back({p + 0x40, p, p + 0x100});
      if (p > kBegin) out.push_back({p + 0x80, p, p - 0x100});
      if (p + 0x800 < kEnd) out.push_back({p + 0xc0, p, p + 0x800});
    }
  }

private:
  std::string names_[(kEnd - kBegin) >> 8];  // each procedure's name
};

void writeFile(const fs::path& p, std::span<const uint8_t> bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  if (!f) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Split at the separators.
  std::vector<std::span<const uint8_t>> parts;
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  for (size_t at = 0;;) {
    const size_t next = all.find(kSeparator, at);
    const size_t end = next == std::string_view::npos ? size : next;
    parts.push_back({data + at, end - at});
    if (next == std::string_view::npos) break;
    at = next + kSeparator.size();
  }
  if (parts.size() > 8) return 0;  // a few threads say it all

  const fs::path& dir = scratch();
  for (const auto& e : fs::directory_iterator(dir)) fs::remove_all(e.path());
  std::vector<std::unique_ptr<ProfileSource>> profiles;
  std::vector<fs::path> paths, traces;
  for (std::span<const uint8_t> part : parts) {
    const bool trace = hpcrun::sniff(part) == hpcrun::FileKind::Trace;
    if (trace && !paths.empty() && traces.back().empty()) {
      traces.back() = dir / (paths.back().stem().string() + ".hpctrace");
      writeFile(traces.back(), part);
      continue;
    }
    char name[64];
    std::snprintf(name, sizeof name, "fuzz-000000-%03zu-00000000-1-0.hpcrun", paths.size());
    paths.push_back(dir / name);
    traces.emplace_back();
    writeFile(paths.back(), part);
  }
  for (size_t i = 0; i < paths.size(); ++i) profiles.push_back(openHpcrunProfile(paths[i], traces[i]));

  PipelineOptions options;
  // 1, 2 or 3 threads; at 3 the scratch bound allows none, so unify (after the first
  // profile) and pass 2 run in arenas of 2.
  options.threads = 1 + unsigned(size % 3);
  if (options.threads == 3) options.scratchBudget = 1;
  options.scratchDir = dir;
  options.transposeBudget = 1 << 20;  // rounds even on small trees
  options.rowBucketsAbove = 1;        // row buckets from two profiles up
  tbb::global_control parallelism(tbb::global_control::max_allowed_parallelism, options.threads);
  MemorySink sink;
  sink.streamTraces = size % 4 >= 2;  // traces in pieces (as into trace.db) or whole
  static const GpuCalls gpu;
  const bool kernels = all.find("GPUKernl") != std::string_view::npos;
  Expected<PipelineResult> result = runPipeline(profiles, kernels ? &gpu : nullptr, sink, options);
  if (!result.ok()) return 0;  // an error, as hpcprof would report it
  // A run that succeeded wrote what it reported: every analysed profile's row, the summary,
  // and a context count that bounds every row's contexts.
  if (!sink.finished || result->profiles == 0 || result->profiles + result->skipped != paths.size() ||
      sink.numProfiles != result->profiles + 1 || sink.rows.size() != sink.numProfiles ||
      sink.numContexts != result->contexts)
    std::abort();
  for (const SparseRow& row : sink.rows)
    for (uint32_t c : row.ctx)
      if (c >= result->contexts) std::abort();
  // Every trace line names known contexts, in time order.
  for (const std::vector<TracePoint>& line : sink.traceLines)
    for (size_t k = 0; k < line.size(); ++k)
      if (line[k].ctx >= result->contexts || (k && line[k].time < line[k - 1].time)) std::abort();
  return 0;
}
