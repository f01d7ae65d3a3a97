// hpcprof: command line of the reference (see shared/reference/man/hpcprof.rst).
#include <CLI/CLI.hpp>
#include <tbb/global_control.h>

#include <cstdio>
#include <thread>

#include "analysis/io.hpp"
#include "analysis/pipeline.hpp"
#include "common/file.hpp"

namespace fs = std::filesystem;
using namespace hpc;
using namespace hpc::analysis;

namespace {

int fail(const std::string& msg) {
  std::fprintf(stderr, "hpcprof: error: %s\n", msg.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hpcprof: attributes call-path profiles to source structure and writes a database"};
  std::vector<std::string> measurements, structs, replacePaths, metricsOpt, onlyExe;
  std::string output, title;
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  bool verbose = false, foreign = false, ignoreStructs = false;
  uint64_t budgetMiB = 1024;
  app.add_option("measurements", measurements, "Measurement directories or profiles")->required();
  app.add_option("-j,--threads", threads, "Analysis threads (default: all available)")
      ->check(CLI::Range(1u, 4096u));
  app.add_option("-o,--db,--output", output, "Database to write (default ./hpctoolkit-<app>-database)");
  app.add_option("-S,--structure", structs, "Structure file from hpcstruct (repeatable)");
  app.add_option("-R,--replace-path", replacePaths, "OLD=NEW prefix replacement (repeatable)");
  app.add_option("--title,--name", title, "Database title");
  app.add_option("-M,--metric", metricsOpt, "sum | stats | thread (repeatable)")
      ->check(CLI::IsMember({"sum", "stats", "thread"}));
  app.add_option("--only-exe", onlyExe, "Only profiles of this executable (repeatable)");
  app.add_flag("--foreign", foreign, "Do not read the measured binaries; use only structure files");
  app.add_flag("--ignore-structs", ignoreStructs, "Ignore <measurements>/structs/");
  app.add_option("--transpose-memory", budgetMiB, "Memory bound for building cct.db, MiB")
      ->check(CLI::Range(uint64_t(1), uint64_t(1) << 30));
  app.add_flag("-v,--verbose", verbose, "Per-phase times and messages on stderr");
  app.set_version_flag("-V,--version", "hpcprof (hpctoolkit-cpp) 0.1.0");
  CLI11_PARSE(app, argc, argv);

  tbb::global_control parallelism(tbb::global_control::max_allowed_parallelism, threads);
  std::vector<fs::path> meas(measurements.begin(), measurements.end());
  auto inputs = discoverInputs(meas, ignoreStructs);
  if (!inputs.ok()) return fail(inputs.status().message());
  std::vector<fs::path> structFiles = inputs->structs;
  structFiles.insert(structFiles.end(), structs.begin(), structs.end());
  if (!foreign && structFiles.empty() && verbose)
    std::fprintf(stderr, "hpcprof: no structure files; reading binaries is not implemented, "
                         "instructions stay unattributed to source\n");
  if (!replacePaths.empty())
    std::fprintf(stderr, "hpcprof: warning: -R/--replace-path is not implemented yet\n");

  std::unique_ptr<StructureSource> structure;
  if (!structFiles.empty()) {
    auto s = loadStructure(structFiles, threads);
    if (!s.ok()) return fail(s.status().message());
    structure = std::move(*s);
  }

  std::vector<fs::path> measDirs;
  for (const fs::path& m : meas)
    if (fs::is_directory(m)) measDirs.push_back(m);
  structure = withMeasuredSymbols(std::move(structure), measDirs);

  std::vector<std::unique_ptr<ProfileSource>> profiles;
  for (size_t i = 0; i < inputs->profiles.size(); ++i)
    profiles.push_back(openHpcrunProfile(inputs->profiles[i], inputs->traces[i]));

  PipelineOptions opt;
  opt.threads = threads;
  opt.verbose = verbose;
  opt.title = title;
  opt.transposeBudget = budgetMiB << 20;
  opt.onlyExe = onlyExe;
  for (const std::string& m : metricsOpt) opt.stats |= m == "stats";

  if (output.empty()) {
    std::string app0 = fs::path(inputs->profiles[0]).filename().string();
    app0 = app0.substr(0, app0.find('-') == std::string::npos ? app0.size() : app0.find('-'));
    output = "hpctoolkit-" + app0 + "-database";
  }
  AtomicOutput out(output, AtomicOutput::Kind::Directory);
  if (Status st = out.begin(); !st.ok()) return fail(st.message());
  auto sink = createDatabase(out.temp_path());
  if (!sink.ok()) return fail(sink.status().message());
  auto result = runPipeline(profiles, structure.get(), **sink, opt);
  if (!result.ok()) return fail(result.status().message());
  sink->reset();  // closes the files before the rename
  if (Status st = out.commit(); !st.ok()) return fail(st.message());
  if (result->skipped)
    std::fprintf(stderr, "hpcprof: %u of %u profiles were unreadable and skipped\n", result->skipped,
                 result->skipped + result->profiles);
  if (verbose)
    std::fprintf(stderr, "hpcprof: wrote %s: %u profiles, %u contexts\n", output.c_str(),
                 result->profiles, result->contexts);
  return 0;
}
