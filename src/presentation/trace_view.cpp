#include "presentation/trace_view.hpp"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>

namespace hpc::present {

namespace {

std::vector<db::TraceElem>::const_iterator last_at_or_before(const std::vector<db::TraceElem>& line,
                                                                   std::vector<db::TraceElem>::const_iterator from,
                                                                   uint64_t t) {
  auto it = std::upper_bound(from, line.end(), t, [](uint64_t v, const db::TraceElem& x) { return v < x.timestamp; });
  return it == line.begin() ? line.end() : it - 1;
}

}  // namespace

uint32_t context_at_depth(const Experiment& e, uint32_t ctx, uint32_t depth) {
  if (!e.has(ctx)) return ctx;
  uint32_t k = e.node(ctx).callDepth;
  if (k == 0) return ctx;
  uint32_t target = std::min(depth + 1, k);
  uint32_t c = ctx;
  // Climb to the function context whose call depth is `target` (the first one with it).
  while (c != kNoCtx) {
    const Node& n = e.node(c);
    if (n.callDepth == target && e.function_of(c) != db::kNone) return c;
    c = n.parent;
  }
  return ctx;
}

Expected<std::vector<TraceRow>> trace_pixels(const Experiment& e, const TraceQuery& q) {
  HPC_ASSIGN_OR_RETURN(const db::TraceDb* trace, e.trace());
  if (!trace) return Status::error((e.dir() / "trace.db").string() + ": the database has no traces");
  if (q.t1 <= q.t0) return Status::error("empty time range: t1 must be greater than t0");
  if (q.width == 0 || q.width > kMaxTraceWidth)
    return Status::error("width must be between 1 and " + std::to_string(kMaxTraceWidth));
  if (q.rows == 0 || q.rows > kMaxTraceRows)
    return Status::error("rows must be between 1 and " + std::to_string(kMaxTraceRows));
  if (q.line1 <= q.line0 || q.line1 > trace->traces.size())
    return Status::error("trace lines must satisfy line0 < line1 <= " + std::to_string(trace->traces.size()));

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
  const unsigned __int128 span = q.t1 - q.t0;
  for (uint32_t r = 0; r < nrows; ++r) {
    uint32_t li = q.line0 + uint32_t((uint64_t(2 * r + 1) * count) / (2 * uint64_t(nrows)));
    const db::Trace& tr = trace->traces[li];
    TraceRow& row = out[r];
    row.line = li, row.profIndex = tr.profIndex;
    auto from = tr.line.begin();
    for (uint32_t x = 0; x < q.width; ++x) {
      uint64_t t = q.t0 + uint64_t(span * (2 * x + 1) / (2 * uint64_t(q.width)));
      auto it = last_at_or_before(tr.line, from, t);
      uint32_t key;
      if (it == tr.line.end()) key = kTraceIdle;
      else {
        from = it;
        key = colourOf(it->ctxId);
      }
      if (!row.runs.empty() && row.runs.back().first == key) ++row.runs.back().second;
      else row.runs.push_back({key, 1});
    }
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
  HPC_ASSIGN_OR_RETURN(const db::TraceDb* trace, e.trace());
  if (!trace) return Status::error((e.dir() / "trace.db").string() + ": the database has no traces");
  if (line >= trace->traces.size()) return Status::error("no trace line " + std::to_string(line));
  const auto& l = trace->traces[line].line;
  TraceSample s;
  auto it = last_at_or_before(l, l.begin(), t);
  if (it == l.end()) return s;
  s.found = true;
  s.start = it->timestamp;
  s.end = it + 1 != l.end() ? (it + 1)->timestamp : trace->maxTimestamp;
  s.ctx = it->ctxId;
  if (e.has(s.ctx))
    for (uint32_t c = s.ctx; c != kNoCtx; c = c == 0 ? kNoCtx : e.node(c).parent) s.stack.push_back(c);
  std::reverse(s.stack.begin(), s.stack.end());
  return s;
}

}  // namespace hpc::present
