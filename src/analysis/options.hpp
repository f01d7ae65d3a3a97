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
  PipelineOptions options;
};
// `tool` prefixes the warnings it prints (unimplemented options, missing structure).
Expected<Job> prepareJob(const CommandLine& cl, const std::string& tool);

}  // namespace hpc::analysis
