// Structure of one procedure: its code split into pieces of constant (loop, inline
// chain, source line), loops placed in the inline tree, statements attached.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "structure/cfg.hpp"
#include "structure/functions.hpp"
#include "structure/model.hpp"

namespace hpc::structure {

class ElfImage;
class DebugInfo;

struct AnalysisContext {
  const ElfImage& image;
  const DebugInfo& debug;
  std::function<bool(uint64_t)> noreturn;  // calls to these addresses never return
  bool loops = true;                       // false: no control flow analysis
  bool gpu = false;                        // GPU code: the reference's GPU conventions
  // GPU code: the control flow of the procedure [begin, end) (nvdisasm's graph, or the
  // SASS read by sass.hpp), or nothing. Made when the procedure is analysed: a cubin's
  // graphs are never all held at once.
  std::function<std::optional<Cfg>(uint64_t, uint64_t)> gpu_cfg;
  std::string gpu_device;  // "NVIDIA sm_75": what call sites say of their callee's device
};

// MT: thread-safe; reads only shared immutable data.
Procedure analyze_procedure(const AnalysisContext& ctx, const FunctionSpec& fn);

}  // namespace hpc::structure
