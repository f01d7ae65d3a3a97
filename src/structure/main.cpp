// hpcstruct: recover program structure from a binary and write a structure file.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <thread>

#include "structure/cache.hpp"
#include "structure/emit.hpp"
#include "structure/structure.hpp"

int main(int argc, char** argv) {
  CLI::App app{"hpcstruct: recover functions, inlined code, loops and source lines from a binary"};
  int jobs = 0;
  std::string output, cacheDir, gpucfg = "no", binary;
  bool nocache = false;
  app.add_option("-j,--jobs", jobs, "threads to use (default: half the CPUs)");
  app.add_option("-o,--output", output, "structure file to write (default: ./BINARY.hpcstruct)");
  app.add_flag("--nocache", nocache, "do not use the structure cache");
  app.add_option("-c,--cache", cacheDir, "structure cache directory (or $HPCTOOLKIT_HPCSTRUCT_CACHE)");
  app.add_option("--gpucfg", gpucfg, "recover loops in GPU code (yes|no)")->check(CLI::IsMember({"yes", "no"}));
  app.add_option("binary", binary, "binary to analyse")->required();
  CLI11_PARSE(app, argc, argv);

  if (jobs <= 0) jobs = std::max(1u, std::thread::hardware_concurrency() / 2);
  if (output.empty()) output = std::filesystem::path(binary).filename().string() + ".hpcstruct";
  if (std::filesystem::is_directory(binary)) {
    std::fprintf(stderr, "hpcstruct: %s: measurement directories are not supported yet\n", binary.c_str());
    return 1;
  }
  if (cacheDir.empty())
    if (const char* env = std::getenv("HPCTOOLKIT_HPCSTRUCT_CACHE")) cacheDir = env;
  if (nocache) cacheDir.clear();

  hpc::structure::Options opt;
  opt.jobs = jobs;
  opt.gpucfg = gpucfg == "yes";
  hpc::structure::Cache cache(cacheDir);
  if (cache.enabled()) {
    auto hit = cache.lookup(binary, opt);
    if (!hit.ok()) {
      std::fprintf(stderr, "hpcstruct: %s\n", hit.status().message().c_str());
      return 1;
    }
    if (*hit && cache.copy_out(**hit, output)) {
      std::fprintf(stderr, "hpcstruct: %s: copied from cache\n", binary.c_str());
      return 0;
    }
  }
  std::string warnings;
  auto s = hpc::structure::analyze_binary(binary, opt, &warnings);
  if (!warnings.empty()) std::fprintf(stderr, "hpcstruct: warning: %s", warnings.c_str());
  if (!s) {
    std::fprintf(stderr, "hpcstruct: %s\n", s.status().message().c_str());
    return 1;
  }
  if (auto st = hpc::structure::write_structure_file(*s, output); !st) {
    std::fprintf(stderr, "hpcstruct: %s: %s\n", output.c_str(), st.message().c_str());
    return 1;
  }
  if (cache.enabled()) cache.store(binary, opt, output);
  return 0;
}
