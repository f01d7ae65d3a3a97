// Public entry point of binary analysis: a binary in, its Structure out.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>

#include "common/status.hpp"
#include "structure/cfg.hpp"
#include "structure/model.hpp"

namespace hpc::structure {

struct Options {
  int jobs = 1;          // threads analysing procedures; the result does not depend on it
  bool gpucfg = false;   // control flow of GPU code (sass.hpp, or nvdisasm where installed)
  bool nvdisasm = true;  // gpucfg: run nvdisasm where installed; false: the SASS reading alone
  bool nested = false;   // run in the caller's oneTBB task arena, which bounds the threads
  size_t batch = 256;    // procedures in flight at a time in write_binary_structure
  // write_binary_structure: bytes of formatted procedures held in memory while they wait for
  // their turn in the output (procedures are analysed by compilation unit, written by file);
  // beyond it they wait in a temporary file next to the output.
  size_t hold_bytes = size_t(16) << 20;
  // Bytes of DWARF line tables and inline trees kept between procedures (compilation units
  // are re-read when evicted); bounds memory on binaries with very large debug info.
  size_t debug_cache = size_t(128) << 20;
  // Called after each procedure with (procedures done, procedures in all), from the
  // analysing threads: it must be thread-safe. Never affects the result.
  std::function<void(size_t, size_t)> progress;
};

// Errors name the binary. Warnings (e.g. no nvdisasm for --gpucfg) go to `warnings`.
Expected<Structure> analyze_binary(const std::string& path, const Options& opt, std::string* warnings = nullptr);

// Analyses `path` into the structure file `output`, holding only a batch of procedures at
// a time: memory does not grow with the number of procedures. Same bytes as
// write_structure_file(analyze_binary(...)). Errors name the binary or the output.
Status write_binary_structure(const std::string& path, const Options& opt, const std::string& output,
                              std::string* warnings = nullptr);

// A binary opened for analysis one procedure at a time, for callers that need only some of
// its procedures (hpcprof without structure files: the procedures its samples fell in).
// A procedure comes out as analyze_binary's would, whichever others are analysed.
class ProcedureAnalyzer {
public:
  // Errors name the binary.
  static Expected<std::unique_ptr<ProcedureAnalyzer>> open(const std::string& path, const Options& opt,
                                                           std::string* warnings = nullptr);
  ~ProcedureAnalyzer();
  ProcedureAnalyzer(const ProcedureAnalyzer&) = delete;
  ProcedureAnalyzer& operator=(const ProcedureAnalyzer&) = delete;

  size_t size() const;
  uint64_t begin(size_t i) const;  // where procedure i's code begins
  // The procedure whose code holds `addr` (procedures never overlap), if any.
  std::optional<size_t> find(uint64_t addr) const;
  // MT: thread-safe.
  Procedure analyze(size_t i) const;
  // The calls of GPU procedure i whose callee is known, as analyze(i) places them (its C
  // elements), without analysing the rest of it: a whole cubin's call graph for the cost
  // of reading its calls. Empty for CPU code, or where its GPU control flow is not read.
  // MT: thread-safe.
  std::vector<CallSite> call_sites(size_t i) const;
  // The binary without procedures: names its files, for emit's procedure_model.
  const Structure& shell() const;

private:
  ProcedureAnalyzer() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hpc::structure
