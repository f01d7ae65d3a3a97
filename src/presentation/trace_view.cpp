#include "presentation/trace_view.hpp"

#include <algorithm>
#include <cstdio>
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

Expected<std::vector<TraceRow>> trace_pixels(const Experiment& e, const TraceQuery& q) {
  HPC_ASSIGN_OR_RETURN(const db::LazyTraceDb* trace, e.trace());
  if (!trace) return Status::error((e.dir() / "trace.db").string() + ": the database has no traces");
  if (q.t1 <= q.t0) return Status::error("empty time range: t1 must be greater than t0");
  if (q.width == 0 || q.width > kMaxTraceWidth)
    return Status::error("width must be between 1 and " + std::to_string(kMaxTraceWidth));
  if (q.rows == 0 || q.rows > kMaxTraceRows)
    return Status::error("rows must be between 1 and " + std::to_string(kMaxTraceRows));
  if (q.line1 <= q.line0 || q.line1 > trace->size())
    return Status::error("trace lines must satisfy line0 < line1 <= " + std::to_string(trace->size()));

  std::unordered_map<uint32_t, uint32_t> colour;  // ctxId -> colour key at q.depth
  auto colourOf = [&](uint32_t ctx) {
    if (ctx == 0) return kTraceIdle;
    auto [it, fresh] = colour.try_emplace(ctx, 0);
    if (fresh) {
      if (!e.has(ctx)) it->second = kTraceUnknown;
      else {
        uint32_t fn = e.function_of(context_at_depth(e, ctx, q.depth));
        it->second = fn == db::kNone ? kTraceNoFunction : fn;
      }
    }
    return it->second;
  };

  uint32_t count = q.line1 - q.line0, nrows = std::min(count, q.rows);
  std::vector<TraceRow> out(nrows);
  db::PageReleaser pages;  // the lines' pages leave the process a few MiB at a time
  const unsigned __int128 span = q.t1 - q.t0;
  for (uint32_t r = 0; r < nrows; ++r) {
    uint32_t li = q.line0 + uint32_t((uint64_t(2 * r + 1) * count) / (2 * uint64_t(nrows)));
    const db::TraceLineView& tr = trace->line(li);
    TraceRow& row = out[r];
    row.line = li, row.profIndex = tr.profIndex();
    uint64_t from = 0;
    for (uint32_t x = 0; x < q.width; ++x) {
      uint64_t t = q.t0 + uint64_t(span * (2 * x + 1) / (2 * uint64_t(q.width)));
      uint64_t it = tr.last_at_or_before(t, from);
      uint32_t key;
      if (it == tr.size()) key = kTraceIdle;
      else {
        from = it;
        key = colourOf(tr.ctx(it));
      }
      if (!row.runs.empty() && row.runs.back().first == key) ++row.runs.back().second;
      else row.runs.push_back({key, 1});
    }
    pages.touched(tr.data(), tr.bytes());
  }
  return out;
}

std::string trace_rows_json(const Experiment& e, const std::vector<TraceRow>& rows) {
  std::string out = "\"lines\":[";
  std::vector<uint32_t> used;
  char buf[64];
  for (size_t r = 0; r < rows.size(); ++r) {
    const TraceRow& row = rows[r];
    std::snprintf(buf, sizeof buf, "%s{\"line\":%u,\"profile\":%u,\"runs\":[", r ? "," : "", row.line, row.profIndex);
    out += buf;
    for (size_t i = 0; i < row.runs.size(); ++i) {
      auto [key, n] = row.runs[i];
      long long k = key == kTraceIdle ? -1 : key == kTraceUnknown ? -2 : key == kTraceNoFunction ? -3 : (long long)key;
      if (k >= 0) used.push_back(key);
      std::snprintf(buf, sizeof buf, "%s[%lld,%u]", i ? "," : "", k, n);
      out += buf;
    }
    out += "]}";
  }
  out += "],\"functions\":{";
  std::sort(used.begin(), used.end());
  used.erase(std::unique(used.begin(), used.end()), used.end());
  for (size_t i = 0; i < used.size(); ++i)
    out += (i ? ",\"" : "\"") + std::to_string(used[i]) + "\":" +
           nlohmann::json(e.function_name(used[i])).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return out + "}";
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
  const unsigned __int128 span = t1 - t0;
  const double dt = double(t1 - t0) / samples;
  auto timeOf = [&](uint32_t x) { return t0 + uint64_t(span * (2 * x + 1) / (2 * uint64_t(samples))); };
  // Pass 1: which sample times have every GPU line idle (no sample yet, or context 0).
  std::vector<uint8_t> idle(samples, gpu.empty() ? 0 : 1);
  db::PageReleaser pages;
  for (uint32_t li : gpu) {
    const db::TraceLineView& l = trace->line(li);
    uint64_t from = 0;
    for (uint32_t x = 0; x < samples; ++x) {
      if (!idle[x]) continue;
      uint64_t it = l.last_at_or_before(timeOf(x), from);
      if (it == l.size()) continue;
      from = it;
      if (l.ctx(it) != 0) idle[x] = 0;
    }
    pages.touched(l.data(), l.bytes());
  }
  // Pass 2: at each idle time, the CPU lines running something share its blame equally.
  std::vector<std::vector<uint32_t>> activeAt(samples);  // innermost function key per active CPU line
  std::unordered_map<uint32_t, uint32_t> fnOf;           // ctxId -> function key
  auto fnKey = [&](uint32_t ctx) {
    auto [it, fresh] = fnOf.try_emplace(ctx, kTraceNoFunction);
    if (fresh) {
      if (!e.has(ctx)) it->second = kTraceUnknown;
      else
        for (uint32_t c = ctx; c != kNoCtx && c != 0; c = e.parent(c))
          if (uint32_t fn = e.function_of(c); fn != db::kNone) {
            it->second = fn;
            break;
          }
    }
    return it->second;
  };
  for (uint32_t li : cpu) {
    const db::TraceLineView& l = trace->line(li);
    uint64_t from = 0;
    for (uint32_t x = 0; x < samples; ++x) {
      if (!idle[x]) continue;
      uint64_t it = l.last_at_or_before(timeOf(x), from);
      if (it == l.size()) continue;
      from = it;
      uint32_t ctx = l.ctx(it);
      if (ctx != 0) activeAt[x].push_back(fnKey(ctx));
    }
    pages.touched(l.data(), l.bytes());
  }
  std::unordered_map<uint32_t, double> blame;
  for (uint32_t x = 0; x < samples; ++x) {
    if (!idle[x]) continue;
    b.idleTime += dt;
    if (activeAt[x].empty()) {
      b.unattributed += dt;
      continue;
    }
    for (uint32_t k : activeAt[x]) blame[k] += dt / double(activeAt[x].size());
  }
  for (auto [k, v] : blame) b.rows.push_back({k, v});
  std::sort(b.rows.begin(), b.rows.end(), [](auto& a, auto& c) { return a.blame != c.blame ? a.blame > c.blame : a.key < c.key; });
  return b;
}

}  // namespace hpc::present
