// Pass 2's traces (trace_lines.hpp).
#include "analysis/trace_lines.hpp"

#include <string>

namespace hpc::analysis {

TraceConverter::TraceConverter(const SpilledTraceNode* table, uint32_t n, const ContextIds& ids)
    : table_(table), n_(n) {
  uint32_t most = 0;
  for (uint32_t c = 0; c < n; ++c) most = std::max(most, table[c].node);
  // A hostile file's ids go up to 2^32: those beyond a few times the table's size are
  // looked up in it (sorted) instead.
  direct_ = std::min<size_t>(size_t(most) + 1, std::max<size_t>(size_t(n) * 64, 1 << 16));
  if (idOf().size() < direct_) idOf().resize(direct_, 0);
  std::vector<std::pair<uint32_t, uint32_t>>& far = farIds();
  far.clear();
  // Each context's listed id from the tree's table by where it lies, not from the context
  // (scattered in memory, mostly outside the caches by now).
  uint32_t* const index = idOf().data();
  for (uint32_t c = 0; c < n; ++c) {
    const uint32_t id = table[c].ctx ? ids.listedId(table[c].ctx) : 0;
    if (table[c].node < direct_) index[table[c].node] = id;
    else far.emplace_back(table[c].node, id);
  }
  std::sort(far.begin(), far.end());
}

TraceConverter::~TraceConverter() {
  uint32_t* const index = idOf().data();
  for (uint32_t c = 0; c < n_; ++c)
    if (table_[c].node < direct_) index[table_[c].node] = 0;
}

Status readWholeTrace(ProfileSource& source, const TraceConverter& conv, uint64_t most, std::vector<TracePoint>& out) {
  out.clear();
  uint64_t last = 0;
  bool sorted = true;
  Status st = source.readTrace([&](std::span<const TraceRecord> chunk) -> Expected<bool> {
    const size_t had = out.size(), n = size_t(std::min<uint64_t>(chunk.size(), most - had));
    out.resize(had + n);
    sorted &= conv.convertInOrder(chunk.first(n), out.data() + had, last);
    return out.size() < most;
  });
  auto byTime = [](const TracePoint& a, const TracePoint& b) { return a.time < b.time; };
  if (st.ok() && !sorted) std::stable_sort(out.begin(), out.end(), byTime);
  return st;
}

Status streamTrace(ProfileSource& source, const TraceConverter& conv, uint64_t placed, TraceLines& lines,
                   uint32_t index, std::vector<TracePoint>& whole) {
  thread_local std::vector<TracePoint> part;  // a chunk, converted
  uint64_t written = 0, first = 0, last = 0;
  bool sorted = true;
  Status wrote;
  Status read = source.readTrace([&](std::span<const TraceRecord> chunk) -> Expected<bool> {
    const size_t n = size_t(std::min<uint64_t>(chunk.size(), placed - written));
    if (n == 0) return written < placed;
    if (part.size() < n) part.resize(n);
    if (!conv.convertInOrder(chunk.first(n), part.data(), last)) {
      sorted = false;
      return false;
    }
    if (written == 0) first = chunk.front().time;
    wrote = lines.writePart(index, written, std::span<const TracePoint>(part).first(n));
    if (!wrote.ok()) return false;
    written += n;
    return written < placed;
  });
  HPC_RETURN_IF_ERROR(wrote);
  if (read.ok() && !sorted) {
    read = readWholeTrace(source, conv, placed, whole);
    written = read.ok() ? whole.size() : 0;
    if (written) {
      first = whole.front().time;
      last = whole.back().time;
      HPC_RETURN_IF_ERROR(lines.writePart(index, 0, whole));
    }
    whole.clear();
  }
  if (!read.ok()) {
    warnProfile("trace unreadable now, profile kept without it: ", source.path(), read.message());
    written = 0;
  } else if (written < placed) {
    warnProfile("trace shorter than when first read, kept what it has now: ", source.path(),
                std::to_string(written) + " records, " + std::to_string(placed) + " then");
  }
  return lines.end(index, written, first, last);
}

}  // namespace hpc::analysis
