#include "analysis/gpu_calls.hpp"

#include <algorithm>
#include <map>
#include <string>

namespace hpc::analysis {

GpuCallGraph::GpuCallGraph(std::vector<CallSite> sites) : byCallee_(std::move(sites)) {
  std::sort(byCallee_.begin(), byCallee_.end(), [](const CallSite& a, const CallSite& b) {
    return a.callee != b.callee ? a.callee < b.callee : a.site < b.site;
  });
  byCallee_.erase(std::unique(byCallee_.begin(), byCallee_.end()), byCallee_.end());
}

std::span<const CallSite> GpuCallGraph::callersOf(uint64_t entry) const {
  auto lo = std::lower_bound(byCallee_.begin(), byCallee_.end(), entry,
                             [](const CallSite& c, uint64_t e) { return c.callee < e; });
  auto hi = lo;
  while (hi != byCallee_.end() && hi->callee == entry) ++hi;
  return {byCallee_.data() + (lo - byCallee_.begin()), size_t(hi - lo)};
}

namespace {

// One kernel's samples in one module: its call graph, reduced to what reaches them.
class Kernel {
public:
  Kernel(std::span<const GpuSample> samples, std::span<const uint32_t> mine, std::span<const double> weights)
      : samples_(samples) {
    const GpuCallGraph& graph = *samples[mine.front()].graph;
    for (uint32_t s : mine) {
      sampled_[samples[s].proc].push_back(s);
      weightAt_[samples[s].pc] += weights[s];
    }
    // 1. The sampled procedures and their callers, transitively; every call into them.
    std::vector<uint64_t> todo;
    for (const auto& [proc, _] : sampled_) {
      index_.emplace(proc, 0);
      todo.push_back(proc);
    }
    while (!todo.empty()) {
      const uint64_t callee = todo.back();
      todo.pop_back();
      for (const CallSite& c : graph.callersOf(callee)) {
        calls_.push_back(c);
        if (index_.emplace(c.caller, 0).second) todo.push_back(c.caller);
      }
    }
    procs_.reserve(index_.size());
    for (auto& [proc, at] : index_) {
      at = uint32_t(procs_.size());
      procs_.push_back(proc);
    }
    std::sort(calls_.begin(), calls_.end(), [](const CallSite& a, const CallSite& b) { return a.site < b.site; });
    in_.resize(procs_.size());
    for (uint32_t e = 0; e < calls_.size(); ++e) {
      from_.push_back(index_.at(calls_[e].caller));
      to_.push_back(index_.at(calls_[e].callee));
      auto w = weightAt_.find(calls_[e].site);
      weight_.push_back(w == weightAt_.end() ? 0.0 : w->second);
      in_[to_.back()].push_back(e);
    }
  }

  // Emits the values of the samples left to reconstruction; false where the paths passed
  // kGpuMaxPaths (nothing emitted then).
  bool reconstruct(const std::vector<std::vector<std::pair<uint16_t, double>>>& valuesOf, const GpuPlace& place,
                   const GpuEmit& emit) {
    assignUnweighted();
    components();
    if (!countPaths()) return false;
    for (uint32_t c = 0; c < members_.size(); ++c)
      if (into_[c].empty()) walk(c, valuesOf, place, emit);
    return true;
  }

private:
  // 2. A procedure that must pass samples up (it has some, or a call it makes carries
  // weight) and whose calls all weigh zero: each weighs one. The procedures so met are the
  // live ones: those that reach a sample over calls of weight (the rest take no share).
  void assignUnweighted() {
    live_.assign(procs_.size(), 0);
    std::vector<uint32_t> todo;
    for (const auto& [proc, _] : sampled_) {
      live_[index_.at(proc)] = 1;
      todo.push_back(index_.at(proc));
    }
    for (size_t k = 0; k < todo.size(); ++k) {
      const std::vector<uint32_t>& in = in_[todo[k]];
      if (std::all_of(in.begin(), in.end(), [&](uint32_t e) { return weight_[e] <= 0; }))
        for (uint32_t e : in) weight_[e] = 1;
      for (uint32_t e : in)
        if (weight_[e] > 0 && !live_[from_[e]]) {
          live_[from_[e]] = 1;
          todo.push_back(from_[e]);
        }
    }
  }
  bool active(uint32_t e) const { return weight_[e] > 0 && live_[from_[e]] && live_[to_[e]]; }

  // 3. Tarjan's strongly connected components over the live procedures and weighted calls,
  // iteratively (a chain of calls as deep as the module's functions must not overflow the
  // stack). Components come out callees first.
  void components() {
    const uint32_t n = uint32_t(procs_.size());
    std::vector<std::vector<uint32_t>> out(n);
    for (uint32_t e = 0; e < calls_.size(); ++e)
      if (active(e)) out[from_[e]].push_back(e);
    comp_.assign(n, UINT32_MAX);
    std::vector<uint32_t> order(n, UINT32_MAX), low(n, 0), stack;
    std::vector<uint8_t> onStack(n, 0);
    uint32_t next = 0;
    struct Frame {
      uint32_t v, edge;
    };
    std::vector<Frame> frames;
    for (uint32_t root = 0; root < n; ++root) {
      if (!live_[root] || order[root] != UINT32_MAX) continue;
      frames.push_back({root, 0});
      order[root] = low[root] = next++;
      stack.push_back(root);
      onStack[root] = 1;
      while (!frames.empty()) {
        Frame& f = frames.back();
        if (f.edge < out[f.v].size()) {
          const uint32_t w = to_[out[f.v][f.edge++]];
          if (order[w] == UINT32_MAX) {
            order[w] = low[w] = next++;
            stack.push_back(w);
            onStack[w] = 1;
            frames.push_back({w, 0});
          } else if (onStack[w]) {
            low[f.v] = std::min(low[f.v], order[w]);
          }
          continue;
        }
        const uint32_t v = f.v;
        frames.pop_back();
        if (!frames.empty()) low[frames.back().v] = std::min(low[frames.back().v], low[v]);
        if (low[v] != order[v]) continue;
        const uint32_t c = uint32_t(members_.size());
        members_.emplace_back();
        for (uint32_t w = UINT32_MAX; w != v;) {
          w = stack.back();
          stack.pop_back();
          onStack[w] = 0;
          comp_[w] = c;
          members_[c].push_back(w);
        }
        std::sort(members_[c].begin(), members_[c].end());
      }
    }
    // Calls between components: into each (its total weight) and out of each, by address.
    into_.assign(members_.size(), {});
    outOf_.assign(members_.size(), {});
    total_.assign(members_.size(), 0.0);
    for (uint32_t e = 0; e < calls_.size(); ++e) {
      if (!active(e) || comp_[from_[e]] == comp_[to_[e]]) continue;
      into_[comp_[to_[e]]].push_back(e);
      outOf_[comp_[from_[e]]].push_back(e);
      total_[comp_[to_[e]]] += weight_[e];
    }
  }

  // The paths into each component, counted callers first (components come out of
  // Tarjan's callees first; every live one is reached from one without calls into it);
  // false where the walk would pass kGpuMaxPaths.
  bool countPaths() {
    const size_t k = members_.size();
    std::vector<size_t> paths(k, 0);
    for (size_t i = k; i-- > 0;) {
      if (into_[i].empty()) paths[i] = 1;
      for (uint32_t e : outOf_[i]) {
        const uint32_t callee = comp_[to_[e]];
        paths[callee] = std::min(paths[callee] + paths[i], kGpuMaxPaths + 1);
      }
    }
    size_t all = 0;
    for (size_t i = 0; i < k; ++i) all = std::min(all + paths[i], kGpuMaxPaths + 1);
    return all <= kGpuMaxPaths;
  }

  // 4. Every path from a component without calls into it: each component's samples at the
  // path's share, below the context of the path's last call site (the operation's for a
  // root), each call site's context made once for the path. Iterative (a chain of calls as
  // deep as the module's functions).
  void walk(uint32_t root, const std::vector<std::vector<std::pair<uint16_t, double>>>& valuesOf,
            const GpuPlace& place, const GpuEmit& emit) {
    struct Frame {
      uint32_t component;
      double share;
      Context* at;  // the path's last call site's context (the operation's for the root)
      size_t next;  // its next call out
    };
    const GpuSample& any = samples_[sampled_.begin()->second.front()];
    std::vector<Frame> frames{{root, 1.0, any.op, 0}};
    emitAt(root, any.op, true, 1.0, valuesOf, place, emit);
    while (!frames.empty()) {
      Frame& f = frames.back();
      if (f.next == outOf_[f.component].size() || !f.at) {
        frames.pop_back();
        continue;
      }
      const uint32_t e = outOf_[f.component][f.next++];
      const uint32_t callee = comp_[to_[e]];
      const double share = total_[callee] > 0 ? f.share * weight_[e] / total_[callee] : 0.0;
      if (share <= 0) continue;
      Context* site = place(f.at, any.module, calls_[e].site);
      emitAt(callee, site, false, share, valuesOf, place, emit);
      frames.push_back({callee, share, site, 0});
    }
  }
  void emitAt(uint32_t c, Context* at, bool root, double share,
              const std::vector<std::vector<std::pair<uint16_t, double>>>& valuesOf, const GpuPlace& place,
              const GpuEmit& emit) {
    if (!at) return;
    for (uint32_t p : members_[c]) {
      auto it = sampled_.find(procs_[p]);
      if (it == sampled_.end()) continue;
      for (uint32_t s : it->second) {
        const GpuSample& g = samples_[s];
        if (root && g.ctx) continue;  // a kernel's own code: unify placed it
        const Context* ctx = place(at, g.module, g.pc);
        if (!ctx) continue;
        for (const auto& [metric, value] : valuesOf[s]) emit(ctx, metric, value * share);
      }
    }
  }

  std::span<const GpuSample> samples_;
  std::map<uint64_t, std::vector<uint32_t>> sampled_;  // procedure -> its samples
  std::map<uint64_t, double> weightAt_;               // instruction -> samples there
  std::map<uint64_t, uint32_t> index_;                // procedure -> its index
  std::vector<uint64_t> procs_;
  std::vector<CallSite> calls_;                       // by address
  std::vector<uint32_t> from_, to_;                   // by call: caller's and callee's index
  std::vector<double> weight_;
  std::vector<std::vector<uint32_t>> in_;             // by procedure: the calls of it
  std::vector<uint8_t> live_;
  std::vector<uint32_t> comp_;                        // by procedure
  std::vector<std::vector<uint32_t>> members_;        // by component
  std::vector<std::vector<uint32_t>> into_, outOf_;   // by component: calls between components
  std::vector<double> total_;                         // by component: the weight of the calls into it
};

}  // namespace

size_t reconstructGpuContexts(std::span<const GpuSample> samples, std::span<const double> weights,
                              std::span<const GpuSampleValue> values, const GpuPlace& place, const GpuEmit& emit) {
  std::vector<std::vector<std::pair<uint16_t, double>>> valuesOf(samples.size());
  for (const GpuSampleValue& v : values)
    if (v.sample < samples.size()) valuesOf[v.sample].emplace_back(v.metric, v.value);
  // One kernel at a time: the samples of one operation in one module.
  std::vector<uint32_t> order(samples.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const GpuSample &x = samples[a], &y = samples[b];
    if (x.opNode != y.opNode) return x.opNode < y.opNode;
    if (x.module != y.module) return x.module->path < y.module->path;
    return x.pc < y.pc;
  });
  size_t tooMany = 0;
  for (size_t b = 0; b < order.size();) {
    size_t e = b + 1;
    while (e < order.size() && samples[order[e]].opNode == samples[order[b]].opNode &&
           samples[order[e]].module == samples[order[b]].module)
      ++e;
    const std::span<const uint32_t> mine(order.data() + b, e - b);
    b = e;
    const bool leftToUs = std::any_of(mine.begin(), mine.end(), [&](uint32_t s) { return !samples[s].ctx; });
    if (!leftToUs) continue;
    Kernel kernel(samples, mine, weights);
    if (kernel.reconstruct(valuesOf, place, emit)) continue;
    // Too many paths: the called functions' samples below the operation, as they were.
    ++tooMany;
    for (uint32_t s : mine) {
      const GpuSample& g = samples[s];
      if (g.ctx) continue;
      if (const Context* ctx = place(g.op, g.module, g.pc))
        for (const auto& [metric, value] : valuesOf[s]) emit(ctx, metric, value);
    }
  }
  return tooMany;
}

}  // namespace hpc::analysis
