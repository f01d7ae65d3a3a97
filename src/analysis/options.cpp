#include "analysis/options.hpp"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <ostream>
#include <thread>

#include "analysis/io.hpp"

namespace hpc::analysis {

namespace fs = std::filesystem;

std::variant<CommandLine, int> parseCommandLine(int argc, char** argv, const std::string& tool,
                                                bool quiet) {
  CLI::App app{tool + ": attributes call-path profiles to source structure and writes a database"};
  CommandLine cl;
  cl.threads = std::max(1u, std::thread::hardware_concurrency());
  app.add_option("measurements", cl.measurements, "Measurement directories or profiles")->required();
  app.add_option("-j,--threads", cl.threads, "Analysis threads (default: all available)")
      ->check(CLI::Range(1u, 4096u));
  app.add_option("-o,--db,--output", cl.output, "Database to write (default ./hpctoolkit-<app>-database)");
  app.add_option("-S,--structure", cl.structs, "Structure file from hpcstruct (repeatable)");
  app.add_option("-R,--replace-path", cl.replacePaths, "OLD=NEW prefix replacement (repeatable)");
  app.add_option("--title,--name", cl.title, "Database title");
  app.add_option("-M,--metric", cl.metrics, "sum | stats | thread (repeatable)")
      ->check(CLI::IsMember({"sum", "stats", "thread"}));
  app.add_option("--only-exe", cl.onlyExe, "Only profiles of this executable (repeatable)");
  app.add_flag("--foreign", cl.foreign, "Do not read the measured binaries; use only structure files");
  app.add_flag("--ignore-structs", cl.ignoreStructs, "Ignore <measurements>/structs/");
  app.add_option("--transpose-memory", cl.budgetMiB, "Memory bound for building cct.db, MiB")
      ->check(CLI::Range(uint64_t(1), uint64_t(1) << 30));
  app.add_flag("-v,--verbose", cl.verbose,
               "Per-phase wall and CPU time, peak memory, bytes read and written and the time those "
               "calls took, on stderr");
  app.set_version_flag("-V,--version", tool + " (hpctoolkit-cpp) 0.1.0");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (!quiet) return app.exit(e);
    std::ostream none(nullptr);
    return app.exit(e, none, none);
  }
  return cl;
}

Expected<Job> prepareJob(const CommandLine& cl, const std::string& tool) {
  std::vector<fs::path> meas(cl.measurements.begin(), cl.measurements.end());
  HPC_ASSIGN_OR_RETURN(Inputs inputs, discoverInputs(meas, cl.ignoreStructs));
  std::vector<fs::path> structFiles = inputs.structs;
  structFiles.insert(structFiles.end(), cl.structs.begin(), cl.structs.end());
  std::vector<PathReplacement> replace;
  for (const std::string& r : cl.replacePaths) {
    size_t eq = r.find('=');
    if (eq == std::string::npos || eq == 0)
      return Status::error("-R/--replace-path '" + r + "': expected OLD=NEW");
    replace.push_back({r.substr(0, eq), r.substr(eq + 1)});
  }

  Job job;
  if (!structFiles.empty()) {
    HPC_ASSIGN_OR_RETURN(job.structure, loadStructure(structFiles, cl.threads));
  }
  job.options.replacePaths = replace;
  if (!cl.foreign) job.structure = withMeasuredBinaries(std::move(job.structure), std::move(replace));
  std::vector<fs::path> measDirs;
  for (const fs::path& m : meas)
    if (fs::is_directory(m)) measDirs.push_back(m);
  job.structure = withMeasuredSymbols(std::move(job.structure), measDirs);

  for (size_t i = 0; i < inputs.profiles.size(); ++i) {
    job.profiles.push_back(openHpcrunProfile(inputs.profiles[i], inputs.traces[i]));
    if (tool == "hpcprof") continue;  // the sizes weigh hpcprof-mpi's shares only
    std::error_code ec;
    uint64_t bytes = fs::file_size(inputs.profiles[i], ec);
    if (ec) bytes = 0;
    if (!inputs.traces[i].empty()) {
      uint64_t t = fs::file_size(inputs.traces[i], ec);
      if (!ec) bytes += t;
    }
    job.profileBytes.push_back(bytes);
  }

  PipelineOptions& opt = job.options;
  opt.threads = cl.threads;
  opt.verbose = cl.verbose;
  opt.progress = tool == "hpcprof";  // hpcprof-mpi ranks share one terminal
  opt.title = cl.title;
  opt.transposeBudget = cl.budgetMiB << 20;
  opt.onlyExe = cl.onlyExe;
  for (const std::string& m : cl.metrics) opt.stats |= m == "stats";

  job.output = cl.output;
  if (job.output.empty()) {
    std::string app0 = inputs.profiles[0].filename().string();
    app0 = app0.substr(0, app0.find('-') == std::string::npos ? app0.size() : app0.find('-'));
    job.output = "hpctoolkit-" + app0 + "-database";
  }
  // The spill of pass 1 goes beside the database (on its file system, not in memory).
  opt.scratchDir = job.output.parent_path().empty() ? fs::path(".") : job.output.parent_path();
  return job;
}

}  // namespace hpc::analysis
