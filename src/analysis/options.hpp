// hpcprof's command line and what it resolves to, shared by hpcprof and hpcprof-mpi
// (the reference's options; see shared/reference/man/hpcprof.rst).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "analysis/input.hpp"
#include "analysis/pipeline.hpp"

namespace hpc::analysis {

struct CommandLine {
  std::vector<std::string> measurements, structs, replacePaths, metrics, onlyExe;
  std::string output, title;
  unsigned threads = 1;
  bool verbose = false, foreign = false, ignoreStructs = false;
  uint64_t budgetMiB = 32;
};

// Parses argv; on --help, --version or a usage error returns the exit status instead,
// having printed what CLI11 prints (unless `quiet`). `tool` names the program.
std::variant<CommandLine, int> parseCommandLine(int argc, char** argv, const std::string& tool,
                                                bool quiet = false);

// The inputs a command line names, opened: profiles in database order, the structure,
// the database path and the pipeline's options.
struct Job {
  std::vector<std::unique_ptr<ProfileSource>> profiles;
  std::vector<uint64_t> profileBytes;  // size of each .hpcrun (and .hpctrace) file; hpcprof-mpi only
  std::unique_ptr<StructureSource> structure;
  std::filesystem::path output;
  // Without -o, where the default database exists already (output is then beside it).
  std::filesystem::path defaultTaken;
  PipelineOptions options;
  // What was found and checked before any profile is read (hpcprof -v says it).
  size_t structureFiles = 0;
  uint64_t structureBytes = 0;
};
// `tool` prefixes the warnings it prints (unimplemented options, missing structure).
Expected<Job> prepareJob(const CommandLine& cl, const std::string& tool);

// -R's argument: OLD=NEW split at the first '=' not escaped by a backslash ("\=" is an '='
// within a path, as the reference reads it).
Expected<PathReplacement> parseReplacement(const std::string& arg);
// The database's path when -o is not given, as the reference names it: beside a single
// measurement directory hpctoolkit-APP-measurements[-N], hpctoolkit-APP-database[-N]; beside
// any other single directory DIR, DIR-database; else ./hpctoolkit-APP-database, APP the
// program of the first profile (its file name less hpcrun's five trailing fields).
std::filesystem::path defaultDatabase(const std::vector<std::filesystem::path>& measurements,
                                      const std::filesystem::path& firstProfile);
// `path`, or where it exists already, the first of path-2, path-3, ... that does not: the
// default database never replaces an earlier one (an explicit -o does).
std::filesystem::path unusedPath(const std::filesystem::path& path);

}  // namespace hpc::analysis
