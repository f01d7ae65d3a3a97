// The trace view over trace.db: for a time range x a range of trace lines x a call depth,
// the function shown at each pixel. Work is proportional to pixels: each pixel column
// finds its sample by binary search in the line, never by walking the line.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
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
  // hpcviewer's "expose GPU traces": on a GPU stream's line (is_gpu_profile) a pixel shows the
  // first operation running at any time within it, not only at its middle, so that short
  // kernels between long idle gaps stay visible (the shares of time are then overstated).
  bool exposeGpu = false;
  // hpcviewer's filter of execution contexts: where not empty, the trace lines shown are
  // these (trace.db order, each below the line count), [line0, line1) indexing this list.
  std::vector<uint32_t> lines = {};
};

struct TraceRow {
  uint32_t line = 0, profIndex = 0;
  std::vector<std::pair<uint32_t, uint32_t>> runs;  // (colour key, pixel count), covering width
};

// Limits on a query; larger ones are refused rather than clipped.
inline constexpr uint32_t kMaxTraceWidth = 16384, kMaxTraceRows = 8192;

// Checks a query against the database (time range, width, rows, trace lines).
Status check_trace_query(const Experiment& e, const TraceQuery& q);

// The rows of a query one at a time, in order: `each` gets each row (its storage reused for
// the next) and stops the walk by returning false. Scratch stays bounded whatever the
// screen (one row, a fixed-size context memo) and the lines' mapped pages leave the process
// as it goes, so a reply can be written while it is computed. MT: thread-safe.
Status trace_rows(const Experiment& e, const TraceQuery& q, const std::function<bool(const TraceRow&)>& each);

// All rows of the query (tests, benchmarks); errors for a bad range or no traces.
Expected<std::vector<TraceRow>> trace_pixels(const Experiment& e, const TraceQuery& q);

// hpcviewer's depth view: one trace line over [t0, t1) at `width` pixels, a row per call
// depth from the outermost (0) down: the function at that depth on the path of the sample at
// each pixel, idle where the path is not that deep. Rows stop at the first depth no pixel
// reaches, or at maxDepths (at most kMaxTraceDepths).
inline constexpr uint32_t kMaxTraceDepths = 512;
struct TraceDepthRows {
  uint32_t line = 0, profIndex = 0;
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> depths;  // runs (colour key, pixels) by depth
};
Expected<TraceDepthRows> trace_depth_rows(const Experiment& e, uint32_t line, uint64_t t0, uint64_t t1, uint32_t width,
                                          uint32_t maxDepths);

// The function context (or entry, or the context itself if none) shown for `ctx` at call
// `depth`: the function context at that depth on its path, else the deepest one.
uint32_t context_at_depth(const Experiment& e, uint32_t ctx, uint32_t depth);

// Colour keys as the API writes them: function indices; -1 idle, -2 unknown context, -3 no
// function on the path.
inline long long api_key(uint32_t key) {
  return key == kTraceIdle ? -1 : key == kTraceUnknown ? -2 : key == kTraceNoFunction ? -3 : (long long)key;
}

// hpcserver's /api/trace reply written as rows arrive, in bounded pieces.
//   Json: `"lines":[{"line":L,"profile":P,"runs":[[key,n],...]},...],"functions":{"key":"name",...}`
//     (the members after the caller's own; it wraps them in braces).
//   Binary: frames, each a u32 LE length, that many bytes of JSON {"lines":[{"line","profile",
//     "runs": count}], "functions": {names first used in the frame}} (the first frame also
//     carries `head`'s members), then the frame's runs as (i32 key, u32 pixels) LE pairs.
// `out` receives the pieces (16 KiB and one row at most each) and returns false when the client left.
class TraceEncoder {
public:
  enum class Format { Json, Binary };
  TraceEncoder(const Experiment& e, Format f, std::string head, std::function<bool(std::string_view)> out);
  TraceEncoder(const TraceEncoder&) = delete;
  TraceEncoder& operator=(const TraceEncoder&) = delete;
  bool row(const TraceRow& r);
  bool finish();

private:
  bool flush_frame();
  void name_new_keys(const TraceRow& r, std::string& names);
  const Experiment& e_;
  Format f_;
  std::string head_;  // binary: the first frame's query members
  std::function<bool(std::string_view)> out_;
  std::vector<bool> named_;  // function keys already named
  std::string buf_, lines_, names_;  // json: text; binary: the frame's runs, lines, names
  size_t rows_ = 0;
};

// The rows as the JSON members above, whole (tests).
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
