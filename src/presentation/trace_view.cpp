#include "presentation/trace_view.hpp"

#include <algorithm>
#include <cstdio>
#include <fcntl.h>
#include <unistd.h>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>

namespace hpc::present {

uint32_t context_at_depth(const Experiment& e, uint32_t ctx, uint32_t depth) {
  if (!e.has(ctx)) return ctx;
  // One walk up: the function contexts on the path, innermost first; the one at call
  // depth d (outermost 1) is fns[k - d].
  uint32_t fns[256];
  std::vector<uint32_t> more;
  size_t k = 0;
  for (uint32_t c = ctx; c != kNoCtx && c != 0; c = e.parent(c))
    if (e.function_of(c) != db::kNone) {
      if (k < 256) fns[k] = c;
      else more.push_back(c);
      ++k;
    }
  if (k == 0) return ctx;
  size_t i = k - std::min<size_t>(size_t(depth) + 1, k);
  return i < 256 ? fns[i] : more[i - 256];
}

namespace {

constexpr size_t kPiece = 16u << 10;  // TraceEncoder's output pieces: about this size

// Trace lines up to this size are read with pread into a request buffer instead of through
// the mapping: a read fault maps a whole page-cache folio (up to 2 MiB on Linux 6.18), so
// sweeping lines through the mapping keeps megabytes resident per thread. Longer lines,
// whose sweeps touch few of their pages, are read through the mapping.
constexpr size_t kCopyLine = 1u << 20;

// Reads trace lines of trace.db into one buffer; falls back to the mapped view.
class LineReader {
public:
  explicit LineReader(const Experiment& e, const db::LazyTraceDb& t)
      : trace_(t), fd_(::open((e.dir() / "trace.db").c_str(), O_RDONLY | O_CLOEXEC)) {}
  ~LineReader() {
    if (fd_ >= 0) ::close(fd_);
  }
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;
  // The line, and whether it came through the mapping (its pages then need releasing).
  db::TraceLineView read(uint32_t li, bool& mapped) {
    const db::TraceLineView& l = trace_.line(li);
    mapped = true;
    if (fd_ < 0 || l.bytes() > kCopyLine || l.bytes() == 0) return l;
    buf_.resize(l.bytes());
    const off_t at = off_t(l.data() - trace_.data());
    size_t got = 0;
    while (got < buf_.size()) {
      ssize_t n = ::pread(fd_, buf_.data() + got, buf_.size() - got, at + off_t(got));
      if (n <= 0) return l;  // the mapping still has it
      got += size_t(n);
    }
    mapped = false;
    return db::TraceLineView(buf_.data(), l.size(), l.profIndex());
  }

private:
  const db::LazyTraceDb& trace_;
  int fd_;
  std::vector<uint8_t> buf_;
};

// ctxId -> colour key memo of fixed size (direct-mapped): a request's scratch stays bounded
// however many contexts its lines visit, and a row's few hot contexts stay in it.
class KeyMemo {
public:
  template <typename F> uint32_t get(uint32_t ctx, F&& compute) {
    Slot& s = slots_[(ctx * 2654435761u) >> (32 - kBits)];
    if (s.ctx != ctx) s = {ctx, compute(ctx)};
    return s.key;
  }

private:
  static constexpr int kBits = 12;
  struct Slot {
    uint32_t ctx = kNoCtx, key = 0;
  };
  std::vector<Slot> slots_ = std::vector<Slot>(size_t(1) << kBits);
};

// The colour key of contexts at one call depth: the function at call depth `depth` + 1 on
// the context's path from the root (context_at_depth), else the innermost one; with
// kInnermost, the innermost function (the first one up). The contexts asked for go in a
// KeyMemo; a walk up the path also stops at the first checkpoint it meets: ancestors at
// every kEvery-th tree depth, each with its call depth and key, kept in a fixed-size
// direct-mapped table by the walks that passed them. Down a deep call chain (recursion
// hundreds of thousands of calls deep) a context then costs about kEvery steps, not the
// whole path; on ordinary trees walks are short and no checkpoint is made.
class DepthColours {
public:
  static constexpr uint64_t kInnermost = UINT64_MAX;
  // `exact`: a context whose path is not that deep is idle (the depth view), not its innermost function.
  DepthColours(const Experiment& e, uint64_t depth, bool exact = false)
      : e_(e), want_(depth == kInnermost ? depth : depth + 1), exact_(exact) {}
  uint32_t operator()(uint32_t ctx) {
    if (ctx == 0) return kTraceIdle;
    return memo_.get(ctx, [&](uint32_t c) { return e_.has(c) ? walk(c) : kTraceUnknown; });
  }

private:
  static constexpr uint32_t kEvery = 64;
  static constexpr int kBits = 12;
  struct Point {
    uint32_t ctx = kNoCtx, treeDepth = 0, callDepth = 0, key = 0;
  };
  Point& slot(uint32_t ctx) { return points_[(ctx * 2654435761u) >> (32 - kBits)]; }
  uint32_t key_of(uint32_t fnCtx) const {
    uint32_t fn = e_.function_of(fnCtx);
    return fn == db::kNone ? kTraceNoFunction : fn;
  }

  uint32_t walk(uint32_t c) {
    // Up from c to the root or the first checkpoint, noting the function contexts passed
    // (innermost first); with kInnermost the first one is the answer.
    fns_.clear();
    Point base;  // the root: tree and call depth 0, no function
    base.key = kTraceNoFunction;
    uint32_t steps = 0, a = c;
    for (; a != kNoCtx && a != 0; a = e_.parent(a), ++steps) {
      if (const Point& p = slot(a); p.ctx == a) {
        base = p;
        break;
      }
      if (e_.function_of(a) != db::kNone) {
        fns_.push_back(a);
        if (want_ == kInnermost) return key_of(a);
      }
    }
    const uint64_t m = fns_.size(), cd = base.callDepth + m;
    const uint32_t key = base.callDepth >= want_ ? base.key  // the function at that depth is above the stop
                         : cd >= want_           ? key_of(fns_[cd - want_])
                         : exact_                ? kTraceIdle
                         : m                     ? key_of(fns_[0])  // not that deep: the innermost
                                                 : base.key;
    if (steps >= kEvery) {  // a long walk: checkpoints on the way, at every kEvery-th tree depth
      uint64_t below = 0;   // function contexts passed below the one at hand
      uint32_t i = 0;
      for (uint32_t x = c; x != a; x = e_.parent(x), ++i) {
        const uint32_t treeDepth = base.treeDepth + steps - i;
        const uint64_t callDepth = cd - below;
        if (treeDepth % kEvery == 0)
          slot(x) = {x, treeDepth, uint32_t(callDepth),
                     callDepth >= want_ ? key : below < m ? key_of(fns_[below]) : base.key};
        if (e_.function_of(x) != db::kNone) ++below;
      }
    }
    return key;
  }

  const Experiment& e_;
  uint64_t want_;  // the call depth (outermost 1) whose function is shown; kInnermost
  bool exact_;
  KeyMemo memo_;
  std::vector<Point> points_ = std::vector<Point>(size_t(1) << kBits);
  std::vector<uint32_t> fns_;
};

// `n` instants evenly spread over [t0, t1): the middle of each of n equal parts.
struct Instants {
  uint64_t t0;
  unsigned __int128 span;
  uint32_t n;
  Instants(uint64_t a, uint64_t b, uint32_t count) : t0(a), span(b - a), n(count) {}
  uint64_t at(uint32_t x) const { return t0 + uint64_t(span * (2 * x + 1) / (2 * uint64_t(n))); }
};

// Walks line `l` across the instants (galloping from the previous record), calling
// fn(x, ctx) for each instant x with want(x) at which a record is in effect.
template <typename Want, typename Fn>
void sweep(const db::TraceLineView& l, const Instants& at, Want&& want, Fn&& fn) {
  uint64_t from = 0;
  for (uint32_t x = 0; x < at.n; ++x) {
    if (!want(x)) continue;
    uint64_t it = l.last_at_or_before(at.at(x), from);
    if (it == l.size()) continue;
    from = it;
    fn(x, l.ctx(it));
  }
}

}  // namespace

Status check_trace_query(const Experiment& e, const TraceQuery& q) {
  HPC_ASSIGN_OR_RETURN(const db::LazyTraceDb* trace, e.trace());
  if (!trace) return Status::error((e.dir() / "trace.db").string() + ": the database has no traces");
  if (q.t1 <= q.t0) return Status::error("empty time range: t1 must be greater than t0");
  if (q.width == 0 || q.width > kMaxTraceWidth)
    return Status::error("width must be between 1 and " + std::to_string(kMaxTraceWidth));
  if (q.rows == 0 || q.rows > kMaxTraceRows)
    return Status::error("rows must be between 1 and " + std::to_string(kMaxTraceRows));
  const size_t available = q.lines.empty() ? trace->size() : q.lines.size();
  if (q.line1 <= q.line0 || q.line1 > available)
    return Status::error("trace lines must satisfy line0 < line1 <= " + std::to_string(available));
  for (uint32_t l : q.lines)
    if (l >= trace->size()) return Status::error("trace line " + std::to_string(l) + " is not below " + std::to_string(trace->size()));
  return Status();
}

Status trace_rows(const Experiment& e, const TraceQuery& q, const std::function<bool(const TraceRow&)>& each) {
  HPC_RETURN_IF_ERROR(check_trace_query(e, q));
  const db::LazyTraceDb* trace = *e.trace();
  DepthColours colourOf(e, q.depth);  // ctxId -> colour key at q.depth
  const uint32_t count = q.line1 - q.line0, nrows = std::min(count, q.rows);
  const Instants at(q.t0, q.t1, q.width);
  db::PageReleaser pages(trace->data(), trace->bytes());  // the lines' pages leave the process as it goes
  LineReader lines(e, *trace);
  TraceRow row;
  for (uint32_t r = 0; r < nrows; ++r) {
    uint32_t li = q.line0 + uint32_t((uint64_t(2 * r + 1) * count) / (2 * uint64_t(nrows)));
    if (!q.lines.empty()) li = q.lines[li];
    bool mapped = true;
    const db::TraceLineView tr = lines.read(li, mapped);
    row.line = li, row.profIndex = tr.profIndex();
    row.runs.clear();
    uint32_t x0 = 0;  // pixels before x0 are in runs
    auto put = [&](uint32_t key, uint32_t n) {
      if (!row.runs.empty() && row.runs.back().first == key) row.runs.back().second += n;
      else row.runs.push_back({key, n});
    };
    if (q.exposeGpu && is_gpu_profile(e, tr.profIndex())) {
      // Each pixel's interval [start, end): the record in effect at its start, or, where that
      // is idle (or there is none yet), the first operation that starts within it.
      const unsigned __int128 span = q.t1 - q.t0;
      uint64_t from = 0;
      for (uint32_t x = 0; x < q.width; ++x) {
        const uint64_t start = q.t0 + uint64_t(span * x / q.width), end = q.t0 + uint64_t(span * (x + 1) / q.width);
        uint64_t i = tr.last_at_or_before(start, from);
        uint32_t ctx = 0;
        if (i != tr.size()) from = i, ctx = tr.ctx(i);
        constexpr uint64_t kLook = 64;  // records looked at past the start: operations alternate with idle
        const uint64_t j0 = i == tr.size() ? 0 : i + 1;
        for (uint64_t j = j0; ctx == 0 && j < tr.size() && j < j0 + kLook && tr.time(j) < end; ++j) ctx = tr.ctx(j);
        put(ctx == 0 ? kTraceIdle : colourOf(ctx), 1);
      }
    } else {
      sweep(tr, at, [](uint32_t) { return true; }, [&](uint32_t x, uint32_t ctx) {
        if (x > x0) put(kTraceIdle, x - x0);  // before the line's first record
        put(colourOf(ctx), 1);
        x0 = x + 1;
      });
      if (x0 < q.width) put(kTraceIdle, q.width - x0);
    }
    if (mapped) pages.touched(tr.data(), tr.bytes());
    if (!each(row)) break;
  }
  return Status();
}

Expected<TraceDepthRows> trace_depth_rows(const Experiment& e, uint32_t line, uint64_t t0, uint64_t t1, uint32_t width,
                                          uint32_t maxDepths) {
  const TraceQuery q{t0, t1, line, line + 1, 1, width, 0};
  HPC_RETURN_IF_ERROR(check_trace_query(e, q));
  if (maxDepths == 0 || maxDepths > kMaxTraceDepths)
    return Status::error("depths must be between 1 and " + std::to_string(kMaxTraceDepths));
  const db::LazyTraceDb* trace = *e.trace();
  LineReader lines(e, *trace);
  bool mapped = true;
  const db::TraceLineView tr = lines.read(line, mapped);
  TraceDepthRows out;
  out.line = line, out.profIndex = tr.profIndex();
  std::vector<uint32_t> ctxAt(width, 0);  // 0: idle (before the first record, or context 0)
  sweep(tr, Instants(t0, t1, width), [](uint32_t) { return true; }, [&](uint32_t x, uint32_t ctx) { ctxAt[x] = ctx; });
  if (mapped) db::release_pages(tr.data(), tr.bytes());
  for (uint32_t d = 0; d < maxDepths; ++d) {
    DepthColours colourOf(e, d, /*exact=*/true);
    std::vector<std::pair<uint32_t, uint32_t>> runs;
    bool any = false;
    for (uint32_t x = 0; x < width; ++x) {
      const uint32_t key = colourOf(ctxAt[x]);
      any |= key != kTraceIdle;
      if (!runs.empty() && runs.back().first == key) ++runs.back().second;
      else runs.push_back({key, 1});
    }
    if (!any) break;  // no path this deep: none deeper either
    out.depths.push_back(std::move(runs));
  }
  return out;
}

Expected<std::vector<TraceRow>> trace_pixels(const Experiment& e, const TraceQuery& q) {
  std::vector<TraceRow> out;
  HPC_RETURN_IF_ERROR(trace_rows(e, q, [&](const TraceRow& r) {
    out.push_back(r);
    return true;
  }));
  return out;
}

TraceEncoder::TraceEncoder(const Experiment& e, Format f, std::string head, std::function<bool(std::string_view)> out)
    : e_(e), f_(f), head_(std::move(head)), out_(std::move(out)), named_(e.meta().functions.size(), false) {
  if (f_ == Format::Json) buf_ = "\"lines\":[";
}

// Appends `,"key":"name"` for each function key of `r` not named yet.
void TraceEncoder::name_new_keys(const TraceRow& r, std::string& names) {
  for (auto [key, n] : r.runs) {
    if (key >= named_.size() || named_[key]) continue;  // idle/unknown keys and names given
    named_[key] = true;
    names += (names.empty() ? "\"" : ",\"") + std::to_string(key) + "\":" +
             nlohmann::json(e_.function_name(key)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
}

bool TraceEncoder::row(const TraceRow& r) {
  char b[64];
  if (f_ == Format::Json) {
    std::snprintf(b, sizeof b, "%s{\"line\":%u,\"profile\":%u,\"runs\":[", rows_++ ? "," : "", r.line, r.profIndex);
    buf_ += b;
    for (size_t i = 0; i < r.runs.size(); ++i) {
      std::snprintf(b, sizeof b, "%s[%lld,%u]", i ? "," : "", api_key(r.runs[i].first), r.runs[i].second);
      buf_ += b;
    }
    buf_ += "]}";
    name_new_keys(r, names_);
    if (buf_.size() < kPiece) return true;
    bool ok = out_(buf_);
    buf_.clear();
    return ok;
  }
  std::snprintf(b, sizeof b, "%s{\"line\":%u,\"profile\":%u,\"runs\":%zu}", lines_.empty() ? "" : ",", r.line, r.profIndex,
                r.runs.size());
  lines_ += b;
  name_new_keys(r, names_);
  for (auto [key, n] : r.runs) {
    uint32_t v[2] = {uint32_t(int32_t(api_key(key))), n};
    for (uint32_t w : v)
      for (int i = 0; i < 4; ++i) buf_ += char((w >> (8 * i)) & 0xff);
  }
  ++rows_;
  return buf_.size() < kPiece || flush_frame();
}

bool TraceEncoder::flush_frame() {
  std::string h = "{" + head_ + (head_.empty() ? "" : ",") + "\"lines\":[" + lines_ + "],\"functions\":{" + names_ + "}}";
  head_.clear(), lines_.clear(), names_.clear();
  std::string len(4, '\0');
  for (int i = 0; i < 4; ++i) len[i] = char((h.size() >> (8 * i)) & 0xff);
  bool ok = out_(len) && out_(h) && (buf_.empty() || out_(buf_));
  buf_.clear();
  return ok;
}

bool TraceEncoder::finish() {
  if (f_ == Format::Binary) return (lines_.empty() && head_.empty()) || flush_frame();
  buf_ += "],\"functions\":{" + names_ + "}";
  names_.clear();
  bool ok = out_(buf_);
  buf_.clear();
  return ok;
}

std::string trace_rows_json(const Experiment& e, const std::vector<TraceRow>& rows) {
  std::string out;
  TraceEncoder enc(e, TraceEncoder::Format::Json, "", [&](std::string_view s) {
    out += s;
    return true;
  });
  for (const TraceRow& r : rows) enc.row(r);
  enc.finish();
  return out;
}

Expected<TraceSample> trace_sample(const Experiment& e, uint32_t line, uint64_t t) {
  HPC_ASSIGN_OR_RETURN(const db::LazyTraceDb* trace, e.trace());
  if (!trace) return Status::error((e.dir() / "trace.db").string() + ": the database has no traces");
  if (line >= trace->size()) return Status::error("no trace line " + std::to_string(line));
  const db::TraceLineView& l = trace->line(line);
  TraceSample s;
  uint64_t it = l.last_at_or_before(t);
  if (it == l.size()) return s;
  s.found = true;
  s.start = l.time(it);
  s.end = it + 1 != l.size() ? l.time(it + 1) : trace->maxTimestamp();
  s.ctx = l.ctx(it);
  if (e.has(s.ctx))
    for (uint32_t c = s.ctx; c != kNoCtx; c = e.parent(c)) s.stack.push_back(c);
  std::reverse(s.stack.begin(), s.stack.end());
  return s;
}

}  // namespace hpc::present

namespace hpc::present {

bool is_gpu_profile(const Experiment& e, uint32_t profIndex) {
  const auto& ps = e.profiles();
  if (profIndex >= ps.size() || !ps[profIndex].idTuple) return false;
  const auto& names = e.meta().idNames;
  for (const db::Identifier& id : *ps[profIndex].idTuple) {
    uint8_t k = id.kind & 0x3f;  // the low bits name the kind; the high ones are flags
    if (k < names.size() ? (names[k] == "GPUSTREAM" || names[k] == "GPUCONTEXT") : (k == 5 || k == 6)) return true;
  }
  return false;
}

Expected<GpuBlame> gpu_idle_blame(const Experiment& e, uint64_t t0, uint64_t t1, uint32_t samples) {
  HPC_ASSIGN_OR_RETURN(const db::LazyTraceDb* trace, e.trace());
  if (!trace) return Status::error((e.dir() / "trace.db").string() + ": the database has no traces");
  if (t1 <= t0) return Status::error("empty time range: t1 must be greater than t0");
  if (samples == 0 || samples > kMaxTraceWidth)
    return Status::error("samples must be between 1 and " + std::to_string(kMaxTraceWidth));
  GpuBlame b;
  b.t0 = t0, b.t1 = t1, b.samples = samples;
  std::vector<uint32_t> gpu, cpu;
  for (uint32_t i = 0; i < trace->size(); ++i) (is_gpu_profile(e, trace->line(i).profIndex()) ? gpu : cpu).push_back(i);
  b.gpuLines = uint32_t(gpu.size()), b.cpuLines = uint32_t(cpu.size());
  const Instants at(t0, t1, samples);
  const double dt = double(t1 - t0) / samples;
  // Pass 1: which instants have every GPU line idle (no record yet, or context 0).
  std::vector<uint8_t> idle(samples, gpu.empty() ? 0 : 1);
  db::PageReleaser pages(trace->data(), trace->bytes());
  auto idleAt = [&](uint32_t x) { return idle[x] != 0; };
  for (uint32_t li : gpu) {
    const db::TraceLineView& l = trace->line(li);
    sweep(l, at, idleAt, [&](uint32_t x, uint32_t ctx) {
      if (ctx != 0) idle[x] = 0;
    });
    pages.touched(l.data(), l.bytes());
  }
  // Pass 2: how many CPU lines run something at each idle instant; pass 3: each of them
  // takes an equal share of the instant's blame. Scratch: a count per instant.
  std::vector<uint32_t> running(samples, 0);
  for (uint32_t li : cpu) {
    const db::TraceLineView& l = trace->line(li);
    sweep(l, at, idleAt, [&](uint32_t x, uint32_t ctx) { running[x] += ctx != 0; });
    pages.touched(l.data(), l.bytes());
  }
  DepthColours fnKey(e, DepthColours::kInnermost);  // ctxId -> innermost function key (ctx 0 is never asked)
  std::unordered_map<uint32_t, double> blame;
  for (uint32_t li : cpu) {
    const db::TraceLineView& l = trace->line(li);
    sweep(l, at, [&](uint32_t x) { return idle[x] && running[x]; }, [&](uint32_t x, uint32_t ctx) {
      if (ctx != 0) blame[fnKey(ctx)] += dt / double(running[x]);
    });
    pages.touched(l.data(), l.bytes());
  }
  for (uint32_t x = 0; x < samples; ++x) {
    if (!idle[x]) continue;
    b.idleTime += dt;
    if (!running[x]) b.unattributed += dt;
  }
  for (auto [k, v] : blame) b.rows.push_back({k, v});
  std::sort(b.rows.begin(), b.rows.end(), [](auto& a, auto& c) { return a.blame != c.blame ? a.blame > c.blame : a.key < c.key; });
  return b;
}

}  // namespace hpc::present
