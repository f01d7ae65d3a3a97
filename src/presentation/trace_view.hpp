// The trace view over trace.db: for a time range x a range of trace lines x a call depth,
// the function shown at each pixel. Work is proportional to pixels: each pixel column
// finds its sample by binary search in the line, never by walking the line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "presentation/experiment.hpp"

namespace hpc::present {

// Colour keys besides function indices (meta.functions).
inline constexpr uint32_t kTraceIdle = UINT32_MAX;          // before the first sample, or ctx 0
inline constexpr uint32_t kTraceUnknown = UINT32_MAX - 1;   // ctxId not listed in meta.db
inline constexpr uint32_t kTraceNoFunction = UINT32_MAX - 2;  // no function on the call path

struct TraceQuery {
  uint64_t t0 = 0, t1 = 0;          // time range [t0, t1), t1 > t0
  uint32_t line0 = 0, line1 = 0;    // trace lines [line0, line1) in trace.db order
  uint32_t rows = 0;                // at most this many lines, evenly sampled
  uint32_t width = 0;               // pixels across
  uint32_t depth = 0;               // call depth: 0 is the outermost function
};

struct TraceRow {
  uint32_t line = 0, profIndex = 0;
  std::vector<std::pair<uint32_t, uint32_t>> runs;  // (colour key, pixel count), covering width
};

// Limits on a query; larger ones are refused rather than clipped.
inline constexpr uint32_t kMaxTraceWidth = 16384, kMaxTraceRows = 8192;

// Rows for the query; errors for a bad range or a database without traces.
Expected<std::vector<TraceRow>> trace_pixels(const Experiment& e, const TraceQuery& q);

// The function context (or entry, or the context itself if none) shown for `ctx` at call
// `depth`: the function context at that depth on its path, else the deepest one.
uint32_t context_at_depth(const Experiment& e, uint32_t ctx, uint32_t depth);

// The rows as JSON members for hpcserver's /api/trace, written directly (a full screen
// holds about a million runs): `"lines":[{"line":L,"profile":P,"runs":[[key,n],...]},...],
// "functions":{"key":"name",...}`, keys as function indices, -1 idle, -2 unknown context,
// -3 no function. The caller wraps it in braces with its other members.
std::string trace_rows_json(const Experiment& e, const std::vector<TraceRow>& rows);

struct TraceSample {
  bool found = false;
  uint64_t start = 0, end = 0;  // the sample's time span (end: next sample, or trace end)
  uint32_t ctx = 0;
  std::vector<uint32_t> stack;  // ctxIds from the outermost down to ctx (empty if unknown)
};
// The sample of trace line `line` in effect at time `t`.
Expected<TraceSample> trace_sample(const Experiment& e, uint32_t line, uint64_t t);

// ---- GPU idleness blame (seed 004 §5.1): over [t0, t1) at `samples` evenly spaced times,
// the times when every GPU stream line (id tuple with a GPUSTREAM or GPUCONTEXT kind) is
// idle (no sample yet, or context 0) are blamed on the innermost functions the CPU lines
// are running then, shared equally among those lines. Work: samples x trace lines.
bool is_gpu_profile(const Experiment& e, uint32_t profIndex);
struct GpuBlame {
  uint64_t t0 = 0, t1 = 0;
  uint32_t samples = 0, gpuLines = 0, cpuLines = 0;
  double idleTime = 0;      // time units (ns) with every GPU line idle
  double unattributed = 0;  // part of idleTime with no CPU line running either
  struct Row {
    uint32_t key;  // function index, or kTraceUnknown / kTraceNoFunction
    double blame;  // time units
  };
  std::vector<Row> rows;  // hottest first
};
Expected<GpuBlame> gpu_idle_blame(const Experiment& e, uint64_t t0, uint64_t t1, uint32_t samples);

}  // namespace hpc::present
