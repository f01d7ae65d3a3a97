// Pass 2's traces: a profile's records read again from its source (pass 1 kept only the table
// of the nodes they name, SpilledTraceNode) and converted to the database's listed contexts,
// written to the sink a chunk at a time or returned whole.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "analysis/input.hpp"
#include "analysis/sink.hpp"
#include "analysis/stages.hpp"

namespace hpc::analysis {

// A trace's records converted by their nodes, from the profile's table of them: the listed
// ids by node id, zero for any other node (left zero for the next profile: the index is this
// thread's, only grown).
class TraceConverter {
public:
  // MT: one at a time in a thread (the index is the thread's). `ids`: the tree's.
  TraceConverter(const SpilledTraceNode* table, uint32_t n, const ContextIds& ids);
  ~TraceConverter();
  TraceConverter(const TraceConverter&) = delete;
  TraceConverter& operator=(const TraceConverter&) = delete;
  // `in` converted into `out`; false where a record's time is before the one's before it
  // (`previous`: the last time, carried from chunk to chunk).
  bool convertInOrder(std::span<const TraceRecord> in, TracePoint* out, uint64_t& previous) const {
    TracePoint* const __restrict to = out;
    const TraceRecord* const __restrict from = in.data();
    const uint32_t* const __restrict ids = idOf().data();
    const size_t n = in.size(), direct = direct_;
    const bool anyFar = !farIds().empty();
    uint64_t last = previous;
    bool inOrder = true;
    for (size_t k = 0; k < n; ++k) {
      const uint32_t node = from[k].node;
      inOrder &= from[k].time >= last;
      last = from[k].time;
      to[k] = {last, node < direct ? ids[node] : anyFar ? far(node) : 0};
    }
    previous = last;
    return inOrder;
  }

private:
  static std::vector<uint32_t>& idOf() {
    thread_local std::vector<uint32_t> v;
    return v;
  }
  static std::vector<std::pair<uint32_t, uint32_t>>& farIds() {  // (node, listed id)
    thread_local std::vector<std::pair<uint32_t, uint32_t>> v;
    return v;
  }
  static uint32_t far(uint32_t node) {
    const auto& v = farIds();
    auto it = std::lower_bound(v.begin(), v.end(), std::pair<uint32_t, uint32_t>(node, 0));
    return it != v.end() && it->first == node ? it->second : 0;
  }
  const SpilledTraceNode* table_;
  uint32_t n_;
  size_t direct_ = 0;
};

// The whole trace, converted, into `out`, sorted by time (stable: records of one time keep
// their order); at most `most` records.
Status readWholeTrace(ProfileSource& source, const TraceConverter& conv, uint64_t most, std::vector<TracePoint>& out);

// Written a chunk at a time to `lines` as it is read, where it is in time order (as a trace
// is: out of order, it is read again whole and sorted, into `whole`); at most the `placed`
// records pass 1 counted. An unreadable trace is warned about and its line left empty; a
// failed write is returned.
Status streamTrace(ProfileSource& source, const TraceConverter& conv, uint64_t placed, TraceLines& lines,
                   uint32_t index, std::vector<TracePoint>& whole);

}  // namespace hpc::analysis
