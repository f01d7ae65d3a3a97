#include "analysis/pipeline.hpp"

#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <unordered_map>

#include "analysis/expand.hpp"
#include "analysis/propagate.hpp"
#include "analysis/transpose.hpp"

namespace hpc::analysis {

namespace {

enum : uint8_t { kBothValid = 0, kLogicLocal = 1, kLogicGlobal = 2, kLogicOnly = 3 };

class PhaseTimer {
public:
  explicit PhaseTimer(bool on) : on_(on), t0_(std::chrono::steady_clock::now()) {}
  void lap(const char* what) {
    if (!on_) return;
    auto now = std::chrono::steady_clock::now();
    std::fprintf(stderr, "hpcprof: %-28s %8.3f s\n", what,
                 std::chrono::duration<double>(now - t0_).count());
    t0_ = now;
  }

private:
  bool on_;
  std::chrono::steady_clock::time_point t0_;
};

// What the first pass keeps of a profile until its second pass.
struct Unified {
  bool ok = false;
  NodeMap nodes;
  std::vector<std::string> metrics;
  std::vector<IdIn> ids;
  std::string program;
  bool hasTrace = false;
};

}  // namespace

std::vector<std::vector<IdOut>> resolveIdTuples(const std::vector<std::vector<IdIn>>& in) {
  // Distinct physical ids per (kind, scope); scope is the tuple prefix for local ids.
  std::map<std::pair<uint16_t, std::vector<uint64_t>>, std::set<uint64_t>> seen;
  auto scopeOf = [](const std::vector<IdIn>& t, size_t i, bool local) {
    std::vector<uint64_t> s;
    if (local)
      for (size_t j = 0; j < i; ++j) s.insert(s.end(), {t[j].kind, t[j].physical});
    return s;
  };
  for (const auto& t : in)
    for (size_t i = 0; i < t.size(); ++i)
      if (t[i].interpret == kLogicLocal || t[i].interpret == kLogicGlobal)
        seen[{t[i].kind, scopeOf(t, i, t[i].interpret == kLogicLocal)}].insert(t[i].physical);

  std::vector<std::vector<IdOut>> out(in.size());
  for (size_t p = 0; p < in.size(); ++p) {
    for (size_t i = 0; i < in[p].size(); ++i) {
      const IdIn& id = in[p][i];
      IdOut o;
      o.kind = id.kind;
      switch (id.interpret) {
      case kLogicOnly:
        o.logical = uint32_t(id.logical);
        o.physical = id.logical;
        break;
      case kLogicLocal:
      case kLogicGlobal: {
        const auto& s = seen[{id.kind, scopeOf(in[p], i, id.interpret == kLogicLocal)}];
        o.isPhysical = true;
        o.physical = id.physical;
        o.logical = uint32_t(std::distance(s.begin(), s.find(id.physical)));
        break;
      }
      default:
        o.isPhysical = true;
        o.physical = id.physical;
        o.logical = uint32_t(id.logical);
      }
      out[p].push_back(o);
    }
  }
  return out;
}

Expected<PipelineResult> runPipeline(std::vector<std::unique_ptr<ProfileSource>>& profiles,
                                     const StructureSource* structure, DatabaseSink& sink,
                                     const PipelineOptions& options) {
  PhaseTimer timer(options.verbose);
  tbb::task_arena arena(int(std::max(1u, options.threads)));
  auto analysis = std::make_shared<Analysis>();
  Cct& cct = analysis->cct;
  Names& names = analysis->names;
  Expander expander(cct, names, structure);

  // Pass 1 (class 1): unify every profile's tree into the shared CCT.
  std::vector<Unified> unified(profiles.size());
  std::vector<uint8_t> unreadable(profiles.size(), 0);
  arena.execute([&] {
    tbb::parallel_for(size_t(0), profiles.size(), [&](size_t i) {
      auto tree = profiles[i]->readTree();
      if (!tree.ok()) {
        std::fprintf(stderr, "hpcprof: warning: skipping %s: %s\n", profiles[i]->path().c_str(),
                     tree.status().message().c_str());
        unreadable[i] = 1;
        return;
      }
      if (!options.onlyExe.empty()) {
        std::string prog = tree->programName.substr(tree->programName.rfind('/') + 1);
        if (std::find(options.onlyExe.begin(), options.onlyExe.end(), prog) == options.onlyExe.end())
          return;  // filtered out on purpose: not counted as skipped
      }
      auto map = expander.unify(*tree);
      if (!map.ok()) {
        std::fprintf(stderr, "hpcprof: warning: skipping %s: %s\n", profiles[i]->path().c_str(),
                     map.status().message().c_str());
        unreadable[i] = 1;
        return;
      }
      Unified& u = unified[i];
      u.nodes = std::move(*map);
      u.metrics = std::move(tree->metrics);
      u.ids = std::move(tree->idTuple);
      u.hasTrace = tree->hasTrace;
      u.program = std::move(tree->programName);
      u.ok = true;
    });
  });
  timer.lap("unify calling contexts");

  std::vector<size_t> live;  // input positions of the usable profiles, in order
  for (size_t i = 0; i < unified.size(); ++i)
    if (unified[i].ok) live.push_back(i);
  PipelineResult result;
  result.skipped = uint32_t(std::count(unreadable.begin(), unreadable.end(), 1));
  result.profiles = uint32_t(live.size());
  if (live.empty()) return Status::error("no usable profiles among the measurements given");

  cct.finalize();
  names.finalize();
  result.contexts = cct.size();
  // Metrics in order of first appearance, profiles taken in order.
  std::vector<std::string> metricNames;
  std::unordered_map<std::string, uint32_t> metricIndex;
  std::vector<std::vector<uint32_t>> localToGlobal(profiles.size());
  std::vector<std::vector<IdIn>> rawIds;
  bool anyTrace = false;
  for (size_t i : live) {
    for (const std::string& m : unified[i].metrics) {
      auto [it, added] = metricIndex.emplace(m, uint32_t(metricNames.size()));
      if (added) metricNames.push_back(m);
      localToGlobal[i].push_back(it->second);
    }
    rawIds.push_back(unified[i].ids);
    anyTrace |= unified[i].hasTrace;
  }
  analysis->metrics = std::make_unique<MetricTable>(std::move(metricNames), options.stats);
  const MetricTable& metrics = *analysis->metrics;
  auto idTuples = resolveIdTuples(rawIds);
  PropagationShape shape(cct);
  timer.lap("finalize tree and metrics");

  // Pass 2 (class 2): per profile, propagate and write its row and trace line.
  HPC_RETURN_IF_ERROR(sink.begin(uint32_t(live.size() + 1), cct.size(), anyTrace));
  std::vector<std::atomic<uint64_t>> nonzeros(cct.size());
  tbb::enumerable_thread_specific<Propagator> propagators(std::cref(shape), metrics.size());
  std::vector<Status> errors(live.size());
  arena.execute([&] {
    tbb::parallel_for(size_t(0), live.size(), [&](size_t k) {
      size_t i = live[k];
      uint32_t index = uint32_t(k + 1);
      Unified& u = unified[i];
      auto values = profiles[i]->readValues();
      if (!values.ok()) {
        std::fprintf(stderr, "hpcprof: warning: %s: values unreadable, profile left empty: %s\n",
                     profiles[i]->path().c_str(), values.status().message().c_str());
        errors[k] = sink.writeProfile(index, idTuples[k], SparseRow());
        u.nodes = NodeMap();
        return;
      }
      std::vector<ContextValue> points;
      points.reserve(values->values.size());
      for (const PointValue& v : values->values) {
        auto it = u.nodes.find(v.node);
        if (it == u.nodes.end() || !it->second || v.metric >= localToGlobal[i].size()) continue;
        points.push_back({it->second->id(), localToGlobal[i][v.metric], v.value});
      }
      SparseRow row;
      propagators.local().run(points, row);
      for (size_t j = 0; j < row.ctx.size(); ++j)
        nonzeros[row.ctx[j]].fetch_add(row.start[j + 1] - row.start[j], std::memory_order_relaxed);
      Status st = sink.writeProfile(index, idTuples[k], row);
      if (st.ok() && u.hasTrace) {
        std::vector<TracePoint> trace;
        trace.reserve(values->trace.size());
        for (const TraceRecord& r : values->trace) {
          auto it = u.nodes.find(r.node);
          uint32_t ctx = (it == u.nodes.end() || !it->second) ? 0 : it->second->listed()->id();
          trace.push_back({r.time, ctx});
        }
        std::stable_sort(trace.begin(), trace.end(),
                         [](const TracePoint& a, const TracePoint& b) { return a.time < b.time; });
        st = sink.writeTrace(index, trace);
      }
      errors[k] = st;
      u.nodes = NodeMap();  // this profile is done: free its map
    });
  });
  for (const Status& e : errors) HPC_RETURN_IF_ERROR(e);
  timer.lap("propagate, write profiles");

  // Class 3 and cct.db: the transpose.
  std::vector<uint64_t> counts(nonzeros.size());
  for (size_t c = 0; c < counts.size(); ++c) counts[c] = nonzeros[c].load();
  TransposeOptions topt;
  topt.budgetBytes = options.transposeBudget;
  topt.threads = options.threads;
  topt.shape = &shape;
  HPC_RETURN_IF_ERROR(transpose(sink, metrics, uint32_t(live.size() + 1), counts, topt));
  timer.lap("transpose, summary statistics");

  std::string title = options.title.empty() ? unified[live[0]].program : options.title;
  MetaInput meta{title, &cct, &names, &metrics};
  HPC_RETURN_IF_ERROR(sink.finish(meta));
  timer.lap("write meta.db");
  result.analysis = std::move(analysis);
  return result;
}

}  // namespace hpc::analysis
