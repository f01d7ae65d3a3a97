// GPU calling contexts reconstructed from PC samples (seed 001 §6.3; DESIGN.md, class 1).
// A GPU PC sample carries no call path: hpcrun places it directly below its kernel's
// `<gpu kernel>` operation. Where the sample lies in a device function that is not inlined
// (one that the module's static call graph says is called), the function's samples are
// apportioned among the call paths that reach it from the kernel, in each profile by that
// profile's samples of the call instructions (gprof's assumption: every call of a function
// costs the same):
//   1. the static call graph of the module: its call sites with known callees (structure
//      files' C elements, or hpcprof's own reading of the SASS), the sampled functions'
//      callers and theirs; a call's weight is the profile's samples of its instruction;
//   2. a function with samples (or one that passes samples on) whose calls all weigh
//      zero has each of them weigh one, and so on up through its callers;
//   3. strongly connected components (recursion) become one node: the calls between
//      their functions are dropped, each of their functions sits below every call into
//      the component from outside;
//   4. each component's samples go to the calls into it in proportion to their weights,
//      and on up: a call path's share is the product of its calls' shares.
// Each sample's values then land on the contexts of its call paths: below the kernel's
// call instruction, the callee function, its lines and the sample's own instruction, then
// any further call along the path, as a CPU call path is expanded. Values become fractions;
// a function's values over all its paths sum to what it had.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "analysis/cct.hpp"
#include "analysis/input.hpp"
#include "analysis/model.hpp"

namespace hpc::analysis {

// One GPU module's static call graph. MT: const.
class GpuCallGraph {
public:
  explicit GpuCallGraph(std::vector<CallSite> sites);
  bool empty() const { return byCallee_.empty(); }
  // Whether some call site of the module calls the procedure entered at `entry`.
  bool hasCallers(uint64_t entry) const { return !callersOf(entry).empty(); }
  // The calls of the procedure entered at `entry`, by call instruction address.
  std::span<const CallSite> callersOf(uint64_t entry) const;

private:
  std::vector<CallSite> byCallee_;  // sorted by (callee, site)
};

// A kernel's PC sample as unification left it.
struct GpuSample {
  uint32_t node = 0;    // the profile's node
  uint32_t opNode = 0;  // its `<gpu kernel>` placeholder node
  Context* op = nullptr;  // that placeholder's operation context
  const Module* module = nullptr;
  const GpuCallGraph* graph = nullptr;  // the module's, not empty
  uint64_t pc = 0;
  uint64_t proc = 0;      // the entry of the procedure holding pc
  Context* ctx = nullptr;  // its context; nullptr: left to reconstruction (a called function)
};

// One of a profile's values of a sample (samples[sample]).
struct GpuSampleValue {
  uint32_t sample = 0;
  uint16_t metric = 0;
  double value = 0;
};

// Makes the context of the instruction at `addr` of `module` below `parent`: below the
// kernel's operation for the first call site of a path (or a sample placed without one),
// below the call site before it for the next, below the last for the sample itself. So a
// path's call sites are expanded once however many samples lie below them.
using GpuPlace = std::function<Context*(Context* parent, const Module* module, uint64_t addr)>;
using GpuEmit = std::function<void(const Context* ctx, uint16_t metric, double value)>;

// Call paths walked for one kernel (operation and module) at most, counting each path to
// each function (or recursive component) that a sampled function is reached through; past
// it, that kernel's called functions' samples stay below the operation, unapportioned (a
// call graph whose paths multiply, diamonds on diamonds, would otherwise make contexts
// without bound; so does a chain of thousands of calls, a context for each).
inline constexpr size_t kGpuMaxPaths = 4096;

// Reconstructs the call paths of one profile's samples (any order) and emits the values of
// every sample left to it (ctx nullptr), apportioned over its paths. `weights[s]` is sample
// s's weight as a call instruction (its instruction samples); `values` its values, any
// order. Returns the number of kernels (operation, module) whose paths passed kGpuMaxPaths.
size_t reconstructGpuContexts(std::span<const GpuSample> samples, std::span<const double> weights,
                              std::span<const GpuSampleValue> values, const GpuPlace& place, const GpuEmit& emit);

}  // namespace hpc::analysis
