#include "analysis/pipeline.hpp"

#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_pipeline.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <unordered_map>

#include "analysis/expand.hpp"
#include "analysis/progress.hpp"
#include "analysis/propagate.hpp"
#include "analysis/stages.hpp"
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

void unifyProfiles(std::span<const std::unique_ptr<ProfileSource>> profiles, const Expander& expander,
                   const PipelineOptions& options, tbb::task_arena& arena, std::vector<Unified>& out) {
  out.clear();
  out.resize(profiles.size());
  Progress progress(options.progress, "reading calling contexts", profiles.size());
  arena.execute([&] {
    tbb::parallel_for(size_t(0), profiles.size(), [&](size_t i) {
      Unified& u = out[i];
      struct Tick {
        Progress& p;
        ~Tick() { p.tick(); }
      } tick{progress};
      auto tree = profiles[i]->readTree();
      if (!tree.ok()) {
        std::fprintf(stderr, "hpcprof: warning: skipping %s: %s\n", profiles[i]->path().c_str(),
                     tree.status().message().c_str());
        return;
      }
      if (!options.onlyExe.empty()) {
        std::string prog = tree->programName.substr(tree->programName.rfind('/') + 1);
        if (std::find(options.onlyExe.begin(), options.onlyExe.end(), prog) == options.onlyExe.end()) {
          u.header.state = ProfileState::Filtered;  // on purpose: not counted as skipped
          return;
        }
      }
      auto map = expander.unify(*tree);
      if (!map.ok()) {
        std::fprintf(stderr, "hpcprof: warning: skipping %s: %s\n", profiles[i]->path().c_str(),
                     map.status().message().c_str());
        return;
      }
      u.header.metrics = std::move(tree->metrics);
      u.header.descs = std::move(tree->descs);
      u.header.ids = std::move(tree->idTuple);
      u.header.hasTrace = tree->hasTrace;
      u.header.program = std::move(tree->programName);
      u.header.state = ProfileState::Ok;
    });
  });
}

// The database's metrics for metrics/default.yaml as the measurements describe them, in
// order of first appearance: each measured metric (name-only when its profile gave no
// descriptors) and each derived one whose formula names measured metrics only, its #N / $N
// rewritten from the profile's metric ids to indices in plan.metricNames.
static std::vector<MetricDescIn> metricDescs(std::span<const ProfileHeader* const> headers, const Plan& plan) {
  std::unordered_map<std::string, uint32_t> global;
  for (uint32_t i = 0; i < plan.metricNames.size(); ++i) global.emplace(plan.metricNames[i], i);
  std::vector<MetricDescIn> out;
  std::unordered_map<std::string, size_t> seen;
  for (size_t i : plan.live) {
    const ProfileHeader& h = *headers[i];
    if (h.descs.empty())
      for (const std::string& m : h.metrics)
        if (seen.emplace(m, out.size()).second) out.push_back({m, m, "", "", 1, 1});
    for (const MetricDescIn& d : h.descs) {
      MetricDescIn desc = d;
      if (!d.formula.empty()) {
        if (global.count(d.name)) continue;  // measured somewhere: not derived
        std::string f;
        bool good = true;
        for (size_t k = 0; k < d.formula.size();) {
          char c = d.formula[k];
          size_t end = k + 1;
          while (end < d.formula.size() && std::isdigit(static_cast<unsigned char>(d.formula[end]))) ++end;
          if ((c == '#' || c == '$') && end > k + 1) {
            uint64_t local = 0;
            for (size_t j = k + 1; j < end && local <= h.descs.size(); ++j) local = local * 10 + uint64_t(d.formula[j] - '0');
            auto g = local < h.descs.size() ? global.find(h.descs[local].name) : global.end();
            good = good && g != global.end();
            if (g != global.end()) f += c + std::to_string(g->second);
            k = end;
          } else {
            f += c;
            ++k;
          }
        }
        if (!good) continue;
        desc.formula = std::move(f);
      }
      auto [it, added] = seen.emplace(d.name, out.size());
      if (added) out.push_back(std::move(desc));
      else if (out[it->second].description == d.name && out[it->second].format.empty() && d.formula.empty())
        out[it->second] = std::move(desc);  // a name-only entry gets its descriptor
    }
  }
  return out;
}

Expected<Plan> makePlan(std::span<const ProfileHeader* const> headers, const PipelineOptions& options) {
  Plan plan;
  plan.localToGlobal.resize(headers.size());
  std::unordered_map<std::string, uint32_t> metricIndex;
  std::vector<std::vector<IdIn>> rawIds;
  for (size_t i = 0; i < headers.size(); ++i) {
    const ProfileHeader& h = *headers[i];
    if (h.state == ProfileState::Unreadable) ++plan.skipped;
    if (h.state != ProfileState::Ok) continue;
    plan.live.push_back(i);
    // Metrics in order of first appearance, profiles taken in order.
    for (const std::string& m : h.metrics) {
      auto [it, added] = metricIndex.emplace(m, uint32_t(plan.metricNames.size()));
      if (added) plan.metricNames.push_back(m);
      plan.localToGlobal[i].push_back(it->second);
    }
    rawIds.push_back(h.ids);
    plan.anyTrace |= h.hasTrace;
  }
  if (plan.live.empty()) return Status::error("no usable profiles among the measurements given");
  plan.metricDescs = metricDescs(headers, plan);
  plan.idTuples = resolveIdTuples(rawIds);
  plan.title = options.title.empty() ? headers[plan.live[0]]->program : options.title;
  return plan;
}

Status computeProfile(ProfileSource& source, const Expander& expander, const Unified& u,
                      const std::vector<uint32_t>& localToGlobal, Propagator& propagator,
                      std::span<std::atomic<uint64_t>> nonzeros, PropagatedProfile& out) {
  out.row.clear();
  out.trace.clear();
  out.hasTrace = u.header.hasTrace;
  // Values first: only the nodes they and the trace name need their contexts found.
  Expected<ProfileValues> values = source.readValues();
  Expected<ProfileTree> tree = Status::error("unread");
  if (values.ok()) tree = source.readTree();
  Expected<NodeMap> nodes = Status::error("unread");
  if (values.ok() && tree.ok()) {
    std::vector<uint32_t> wanted;
    wanted.reserve(values->values.size() + values->trace.size());
    for (const PointValue& v : values->values) wanted.push_back(v.node);
    if (u.header.hasTrace)
      for (const TraceRecord& r : values->trace) wanted.push_back(r.node);
    nodes = expander.find(*tree, wanted);
  }
  if (!nodes.ok()) {
    const Status& why = !values.ok() ? values.status() : !tree.ok() ? tree.status() : nodes.status();
    std::fprintf(stderr, "hpcprof: warning: %s: values unreadable, profile left empty: %s\n",
                 source.path().c_str(), why.message().c_str());
    out.hasTrace = false;
    return Status();
  }
  std::vector<ContextValue> points;
  points.reserve(values->values.size());
  for (const PointValue& v : values->values) {
    Context* c = nodes->find(v.node);
    if (!c || v.metric >= localToGlobal.size()) continue;
    points.push_back({c->id(), localToGlobal[v.metric], v.value});
  }
  propagator.run(points, out.row);
  for (size_t j = 0; j < out.row.ctx.size(); ++j)
    nonzeros[out.row.ctx[j]].fetch_add(out.row.start[j + 1] - out.row.start[j], std::memory_order_relaxed);
  if (u.header.hasTrace) {
    out.trace.reserve(values->trace.size());
    for (const TraceRecord& r : values->trace) {
      Context* c = nodes->find(r.node);
      uint32_t ctx = c ? c->listed()->id() : 0;
      out.trace.push_back({r.time, ctx});
    }
    std::stable_sort(out.trace.begin(), out.trace.end(),
                     [](const TracePoint& a, const TracePoint& b) { return a.time < b.time; });
  }
  return Status();
}

Status writeProfile(DatabaseSink& sink, uint32_t index, const std::vector<IdOut>& idTuple,
                    const PropagatedProfile& p) {
  HPC_RETURN_IF_ERROR(sink.writeProfile(index, idTuple, p.row));
  if (p.hasTrace) return sink.writeTrace(index, p.trace);
  return Status();
}

Status propagateProfile(ProfileSource& source, const Expander& expander, const Unified& u,
                        const std::vector<uint32_t>& localToGlobal, uint32_t index,
                        const std::vector<IdOut>& idTuple, Propagator& propagator,
                        std::span<std::atomic<uint64_t>> nonzeros, DatabaseSink& sink) {
  PropagatedProfile p;
  HPC_RETURN_IF_ERROR(computeProfile(source, expander, u, localToGlobal, propagator, nonzeros, p));
  return writeProfile(sink, index, idTuple, p);
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

  std::vector<Unified> unified;
  unifyProfiles(profiles, expander, options, arena, unified);
  timer.lap("unify calling contexts");

  std::vector<const ProfileHeader*> headers;
  for (const Unified& u : unified) headers.push_back(&u.header);
  HPC_ASSIGN_OR_RETURN(Plan plan, makePlan(headers, options));
  PipelineResult result;
  result.skipped = plan.skipped;
  result.profiles = uint32_t(plan.live.size());
  cct.finalize();
  names.finalize();
  result.contexts = cct.size();
  analysis->metrics = std::make_unique<MetricTable>(plan.metricNames, options.stats);
  const MetricTable& metrics = *analysis->metrics;
  PropagationShape shape(cct);
  timer.lap("finalize tree and metrics");

  const uint32_t numProfiles = uint32_t(plan.live.size() + 1);
  HPC_RETURN_IF_ERROR(sink.begin(numProfiles, cct.size(), plan.anyTrace));
  std::vector<std::atomic<uint64_t>> nonzeros(cct.size());
  tbb::enumerable_thread_specific<Propagator> propagators(std::cref(shape), metrics.size());
  std::vector<Status> errors(plan.live.size());
  Progress progress(options.progress, "writing profiles", plan.live.size());
  // Profiles are propagated in parallel and written in profile order, so that profile.db
  // and trace.db are laid out the same at any -j; a few profiles are in flight at a time.
  struct InFlight {
    size_t k = 0;
    Status status;
    PropagatedProfile p;
  };
  const size_t tokens = 2 * size_t(std::max(1u, options.threads));
  size_t next = 0;
  arena.execute([&] {
    tbb::parallel_pipeline(
        tokens,
        tbb::make_filter<void, InFlight*>(tbb::filter_mode::serial_in_order,
                                          [&](tbb::flow_control& fc) -> InFlight* {
                                            if (next == plan.live.size()) {
                                              fc.stop();
                                              return nullptr;
                                            }
                                            auto* f = new InFlight;
                                            f->k = next++;
                                            return f;
                                          }) &
            tbb::make_filter<InFlight*, InFlight*>(tbb::filter_mode::parallel,
                                                   [&](InFlight* f) {
                                                     size_t i = plan.live[f->k];
                                                     f->status = computeProfile(
                                                         *profiles[i], expander, unified[i], plan.localToGlobal[i],
                                                         propagators.local(), nonzeros, f->p);
                                                     return f;
                                                   }) &
            tbb::make_filter<InFlight*, void>(tbb::filter_mode::serial_in_order, [&](InFlight* f) {
              std::unique_ptr<InFlight> owned(f);
              errors[f->k] = f->status.ok()
                                 ? writeProfile(sink, uint32_t(f->k + 1), plan.idTuples[f->k], f->p)
                                 : f->status;
              progress.tick();
            }));
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
  HPC_RETURN_IF_ERROR(transpose(sink, metrics, numProfiles, counts, topt));
  timer.lap("transpose, summary statistics");

  MetaInput meta{plan.title, &cct, &names, &metrics, plan.skipped, &options.replacePaths, &plan.metricDescs};
  HPC_RETURN_IF_ERROR(sink.finish(meta));
  timer.lap("write meta.db");
  result.analysis = std::move(analysis);
  return result;
}

}  // namespace hpc::analysis
