#include "analysis/options.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <ostream>
#include <thread>
#include <unordered_set>

#include "analysis/io.hpp"
#include "common/cpus.hpp"

namespace hpc::analysis {

namespace fs = std::filesystem;

std::variant<CommandLine, int> parseCommandLine(int argc, char** argv, const std::string& tool,
                                                bool quiet) {
  CLI::App app{tool + ": attributes call-path profiles to source structure and writes a database"};
  CommandLine cl;
  cl.threads = usable_cpus();
  app.add_option("measurements", cl.measurements, "Measurement directories or profiles")->required();
  app.add_option("-j,--threads", cl.threads, "Analysis threads (default: the CPUs this process may run on)")
      ->check(CLI::Range(1u, 4096u));
  app.add_option("-o,--db,--output", cl.output,
                 "Database to write; an existing one, or an empty directory, is replaced, anything else refused "
                 "(default: hpctoolkit-<app>-database beside hpctoolkit-<app>-measurements, never "
                 "replacing an earlier one: -2, -3, ... instead)");
  app.add_option("-S,--structure", cl.structs, "Structure file from hpcstruct (repeatable)");
  app.add_option("-R,--replace-path", cl.replacePaths, "OLD=NEW prefix replacement, \\= for an = in a path (repeatable)");
  app.add_option("--title,--name", cl.title, "Database title");
  app.add_option("-M,--metric", cl.metrics,
                 "sum (default) | stats (also mean, std. dev., coef. of variation, min, max) | thread "
                 "(per-thread values: always in profile.db) (repeatable)")
      ->check(CLI::IsMember({"sum", "stats", "thread"}));
  app.add_option("--only-exe", cl.onlyExe, "Only profiles of this executable, by file name (repeatable)");
  app.add_flag("--foreign", cl.foreign, "Do not read the measured binaries; use only structure files");
  app.add_flag("--ignore-structs", cl.ignoreStructs, "Ignore <measurements>/structs/");
  app.add_option("--transpose-memory", cl.budgetMiB, "Memory bound for building cct.db, MiB (default 32: larger results take more rounds)")
      ->check(CLI::Range(uint64_t(1), uint64_t(1) << 30));
  app.add_flag("-v,--verbose", cl.verbose,
               "The profiles found and the structure files checked (with the time), per-phase wall and "
               "CPU time, peak memory, bytes read and written and the time those calls took, and how "
               "much of the measured binaries was analysed, on stderr");
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

namespace {

// -o names a place the database may replace (nothing, an empty directory, a database) and
// no measurement lies under it: checked before any work, so a mistyped -o costs nothing.
Status checkOutput(const fs::path& output, const std::vector<fs::path>& measurements) {
  if (Status st = checkDatabaseTarget(output); !st.ok()) return Status::error("-o " + st.message());
  std::error_code ec;
  const fs::path out = fs::weakly_canonical(fs::absolute(output, ec), ec);
  if (ec) return Status();
  // Each directory once: a profile named alone lies where its directory does (a shell's glob
  // names thousands of profiles in one directory).
  std::unordered_set<std::string> checked;
  for (const fs::path& m : measurements) {
    const fs::path where = fs::is_directory(m, ec) ? m : m.parent_path().empty() ? fs::path(".") : m.parent_path();
    if (!checked.insert(where.string()).second) continue;
    const fs::path in = fs::weakly_canonical(fs::absolute(where, ec), ec);
    if (ec) continue;
    auto [o, i] = std::mismatch(out.begin(), out.end(), in.begin(), in.end());
    if (o == out.end())
      return Status::error("-o " + output.string() + ": the measurements " + m.string() +
                           " lie in it, and replacing it would remove them; name another database");
  }
  return Status();
}

}  // namespace

Expected<Job> prepareJob(const CommandLine& cl, const std::string& tool) {
  std::vector<fs::path> meas(cl.measurements.begin(), cl.measurements.end());
  if (!cl.output.empty()) HPC_RETURN_IF_ERROR(checkOutput(cl.output, meas));
  HPC_ASSIGN_OR_RETURN(Inputs inputs, discoverInputs(meas, cl.ignoreStructs));
  if (!tool.empty())
    for (const fs::path& m : inputs.repeated)
      std::fprintf(stderr, "%s: warning: %s: named again among the measurements (itself, or its directory); "
                   "its profiles are analysed once\n", tool.c_str(), m.c_str());
  std::vector<fs::path> structFiles = inputs.structs;
  structFiles.insert(structFiles.end(), cl.structs.begin(), cl.structs.end());
  std::vector<PathReplacement> replace;
  for (const std::string& r : cl.replacePaths) {
    HPC_ASSIGN_OR_RETURN(PathReplacement one, parseReplacement(r));
    replace.push_back(std::move(one));
  }

  Job job;
  job.structureFiles = structFiles.size();
  for (const fs::path& f : structFiles) {
    std::error_code ec;
    const uint64_t bytes = fs::file_size(f, ec);
    if (!ec) job.structureBytes += bytes;
  }
  if (!structFiles.empty()) {
    HPC_ASSIGN_OR_RETURN(job.structure, loadStructure(structFiles, cl.threads, replace));
  }
  job.options.replacePaths = replace;
  if (!cl.foreign)
    job.structure = withMeasuredBinaries(std::move(job.structure), std::move(replace), inputs.measuredUntilNs);
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
    const fs::path chosen = defaultDatabase(meas, inputs.profiles[0]);
    job.output = unusedPath(chosen);
    if (job.output != chosen) job.defaultTaken = chosen;
  }
  // The spill of pass 1 goes beside the database (on its file system, not in memory).
  opt.scratchDir = job.output.parent_path().empty() ? fs::path(".") : job.output.parent_path();
  return job;
}

Expected<PathReplacement> parseReplacement(const std::string& arg) {
  std::string from;
  for (size_t i = 0; i < arg.size(); ++i) {
    if (arg[i] == '\\' && i + 1 < arg.size() && arg[i + 1] == '=') {
      from += '=';
      ++i;
    } else if (arg[i] == '=') {
      std::string to;
      for (size_t j = i + 1; j < arg.size(); ++j) {
        if (arg[j] == '\\' && j + 1 < arg.size() && arg[j + 1] == '=') ++j;
        to += arg[j];
      }
      if (from.empty()) break;
      return PathReplacement{from, to};
    } else {
      from += arg[i];
    }
  }
  return Status::error("-R/--replace-path '" + arg + "': expected OLD=NEW (\\= for an '=' in a path)");
}

fs::path defaultDatabase(const std::vector<fs::path>& measurements, const fs::path& firstProfile) {
  std::error_code ec;
  if (measurements.size() == 1 && fs::is_directory(measurements[0], ec)) {
    fs::path dir = measurements[0];
    if (dir.filename().empty()) dir = dir.parent_path();  // "dir/"
    std::string name = dir.filename().string();
    const std::string head = "hpctoolkit-", tail = "-measurements";
    const size_t at = name.rfind(tail);
    const std::string after = at == std::string::npos ? std::string() : name.substr(at + tail.size());
    // A job id as hpcrun appends it: digits, and after a dot anything a PBS server's name
    // holds (1234, 1234.pbs01); not "12a".
    const size_t digitsEnd = after.find_first_not_of("0123456789", 1);
    const bool numbered =
        after.empty() || (after.size() > 1 && after[0] == '-' && digitsEnd != 1 &&
                          (digitsEnd == std::string::npos ||
                           (after[digitsEnd] == '.' && digitsEnd + 1 < after.size() &&
                            after.find_first_not_of("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ._-",
                                                    digitsEnd) == std::string::npos)));
    if (name.rfind(head, 0) == 0 && at != std::string::npos && at >= head.size() && numbered)
      name = name.substr(0, at) + "-database" + after;
    else
      name += "-database";
    return dir.parent_path() / name;
  }
  // hpcrun names a profile PROGRAM-RANK-THREAD-HOST-PID-GENERATION.hpcrun; PROGRAM may have
  // dashes of its own.
  std::string app = firstProfile.stem().string();
  for (int field = 0; field < 5; ++field) {
    const size_t dash = app.rfind('-');
    if (dash == std::string::npos || dash == 0) break;
    app.resize(dash);
  }
  return "hpctoolkit-" + app + "-database";
}

fs::path unusedPath(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) return path;
  for (unsigned n = 2;; ++n) {
    fs::path next = path;
    next += "-" + std::to_string(n);
    if (!fs::exists(fs::symlink_status(next, ec))) return next;
  }
}

}  // namespace hpc::analysis
