#include "presentation/views.hpp"

#include <algorithm>
#include <queue>

namespace hpc::present {

std::vector<uint32_t> sorted_children(const Experiment& e, uint32_t ctx, const MetricView& m, bool byExclusive) {
  if (!e.has(ctx)) return {};
  std::vector<std::pair<double, uint32_t>> v;
  for (uint32_t k : e.children(ctx))
    v.push_back({byExclusive ? e.exclusive(k, m) : e.inclusive(k, m), k});
  std::stable_sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.first > b.first; });
  std::vector<uint32_t> out;
  for (auto& [_, k] : v) out.push_back(k);
  return out;
}

std::vector<uint32_t> hot_path(const Experiment& e, uint32_t ctx, const MetricView& m, double threshold) {
  std::vector<uint32_t> path;
  if (!e.has(ctx)) return path;
  path.push_back(ctx);
  for (;;) {
    double parent = e.inclusive(ctx, m);
    uint32_t best = kNoCtx;
    double bestV = 0;
    for (uint32_t k : e.children(ctx)) {
      double v = e.inclusive(k, m);
      if (best == kNoCtx || v > bestV) best = k, bestV = v;
    }
    if (best == kNoCtx || bestV <= 0 || bestV < threshold * parent) break;
    path.push_back(best);
    ctx = best;
  }
  return path;
}

std::vector<uint32_t> hottest_contexts(const Experiment& e, const MetricView& m, size_t n) {
  std::vector<uint8_t> chosen(e.id_limit(), 0);
  std::priority_queue<std::pair<double, uint32_t>> frontier;  // ties: larger ctxId first
  frontier.push({e.inclusive(0, m), 0});
  size_t taken = 0;
  while (!frontier.empty() && taken < n) {
    auto [v, c] = frontier.top();
    frontier.pop();
    if (v <= 0 && c != 0) break;
    chosen[c] = 1, ++taken;
    for (uint32_t k : e.children(c)) frontier.push({e.inclusive(k, m), k});
  }
  // Tree order, children hottest first.
  std::vector<uint32_t> out, stack{0};
  while (!stack.empty()) {
    uint32_t c = stack.back();
    stack.pop_back();
    if (!chosen[c]) continue;
    out.push_back(c);
    auto kids = sorted_children(e, c, m);
    for (auto it = kids.rbegin(); it != kids.rend(); ++it) stack.push_back(*it);
  }
  return out;
}

// ---- Bottom-up.

CallerIndex::CallerIndex(const Experiment& e) : e_(e) {
  // Depth-first with a count of the functions active on the path, to mark outermost
  // instances (a recursive call's inclusive cost is already in its outer instance).
  std::unordered_map<uint64_t, uint32_t> active;
  std::vector<std::pair<uint32_t, bool>> stack{{0, false}};  // (ctx, leaving)
  size_t visited = 0;
  while (!stack.empty()) {
    auto [c, leaving] = stack.back();
    stack.pop_back();
    uint32_t fn = e.function_of(c);
    if (leaving) {
      if (fn != db::kNone) --active[fn];
      continue;
    }
    if (fn != db::kNone) {
      instances_[fn].push_back({c, active[fn] == 0});
      ++active[fn];
    }
    stack.push_back({c, true});
    for (uint32_t k : e.children(c)) stack.push_back({k, false});
    if (++visited % 65536 == 0) e.release_pages(false);  // whole-tree walks keep few pages mapped in
  }
}

uint64_t CallerIndex::key_of(uint32_t ctx) const {
  if (!e_.has(ctx)) return UINT64_MAX;
  if (e_.kind(ctx) == NodeKind::Entry) return kEntryKey | ctx;
  uint32_t fn = e_.function_of(ctx);
  return fn == db::kNone ? UINT64_MAX : fn;
}

uint32_t CallerIndex::caller_of(uint32_t ctx) const {
  for (uint32_t c = e_.parent(ctx); c != kNoCtx && c != 0; c = e_.parent(c))
    if (key_of(c) != UINT64_MAX) return c;
  return kNoCtx;
}

std::string CallerIndex::key_name(uint64_t key) const {
  if (key & kEntryKey) return e_.name(uint32_t(key));
  return e_.function_name(uint32_t(key));
}

namespace {
void add_values(const Experiment& e, uint32_t ctx, bool withInclusive, Aggregate& a) {
  const auto& ms = e.metrics();
  a.inc.resize(ms.size()), a.exc.resize(ms.size());
  for (size_t i = 0; i < ms.size(); ++i) {
    if (withInclusive) a.inc[i] += e.inclusive(ctx, ms[i]);
    a.exc[i] += e.exclusive(ctx, ms[i]);
  }
}
}  // namespace

std::vector<Aggregate> CallerIndex::roots() const {
  std::vector<Aggregate> out;
  for (auto& [fn, insts] : instances_) {
    Aggregate a;
    a.key = fn;
    a.inc.assign(e_.metrics().size(), 0), a.exc.assign(e_.metrics().size(), 0);
    for (auto& i : insts) {
      add_values(e_, i.ctx, i.outermost, a);
      if (caller_of(i.ctx) != kNoCtx) a.hasChildren = true;
    }
    out.push_back(std::move(a));
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.key < b.key; });
  return out;
}

Aggregate CallerIndex::node(const std::vector<uint64_t>& path) const {
  Aggregate a;
  a.inc.assign(e_.metrics().size(), 0), a.exc.assign(e_.metrics().size(), 0);
  if (path.empty()) return a;
  a.key = path.back();
  auto it = instances_.find(path[0]);
  if (it == instances_.end()) return a;
  for (auto& i : it->second) {
    uint32_t at = i.ctx;
    bool ok = true;
    for (size_t j = 1; j < path.size() && ok; ++j) {
      at = caller_of(at);
      ok = at != kNoCtx && key_of(at) == path[j];
    }
    if (!ok) continue;
    add_values(e_, i.ctx, i.outermost, a);
    if (caller_of(at) != kNoCtx) a.hasChildren = true;
  }
  return a;
}

std::vector<Aggregate> CallerIndex::children(const std::vector<uint64_t>& path) const {
  std::vector<Aggregate> out;
  if (path.empty()) return out;
  auto it = instances_.find(path[0]);
  if (it == instances_.end()) return out;
  std::unordered_map<uint64_t, size_t> slot;
  for (auto& i : it->second) {
    uint32_t at = i.ctx;
    bool ok = true;
    for (size_t j = 1; j < path.size() && ok; ++j) {
      at = caller_of(at);
      ok = at != kNoCtx && key_of(at) == path[j];
    }
    if (!ok) continue;
    uint32_t caller = caller_of(at);
    if (caller == kNoCtx) continue;
    uint64_t key = key_of(caller);
    auto [s, fresh] = slot.try_emplace(key, out.size());
    if (fresh) {
      out.emplace_back();
      out.back().key = key;
      out.back().inc.assign(e_.metrics().size(), 0), out.back().exc.assign(e_.metrics().size(), 0);
    }
    Aggregate& a = out[s->second];
    add_values(e_, i.ctx, i.outermost, a);
    if (caller_of(caller) != kNoCtx) a.hasChildren = true;
  }
  return out;
}

// ---- Flat.

bool parse_flat_by(const std::string& s, FlatBy& out) {
  if (s == "module") out = FlatBy::Module;
  else if (s == "file") out = FlatBy::File;
  else if (s == "function") out = FlatBy::Function;
  else if (s == "line") out = FlatBy::Line;
  else return false;
  return true;
}

std::vector<FlatRow> flat_rows(const Experiment& e, FlatBy by) {
  const auto& meta = e.meta();
  const auto& ms = e.metrics();
  // Key of an anchor context, UINT64_MAX when the context is not one.
  auto keyOf = [&](uint32_t c) -> uint64_t {
    if (c == 0 || e.kind(c) != NodeKind::Context) return UINT64_MAX;
    if (by == FlatBy::Line) {
      const db::Context x = e.context(c);
      return x.lexicalType == 2 ? (uint64_t(x.file) << 32 | x.line) : UINT64_MAX;
    }
    uint32_t fn = e.function_of(c);
    if (fn == db::kNone) return UINT64_MAX;
    if (by == FlatBy::Function) return fn;
    const db::Function* f = fn < meta.functions.size() ? &meta.functions[fn] : nullptr;
    if (by == FlatBy::Module) return f ? f->module : db::kNone;
    return f ? f->file : db::kNone;
  };
  std::unordered_map<uint64_t, size_t> slot;
  std::vector<FlatRow> rows;
  std::unordered_map<uint64_t, uint32_t> active;
  std::vector<std::pair<uint32_t, bool>> stack{{0, false}};
  size_t visited = 0;
  while (!stack.empty()) {
    auto [c, leaving] = stack.back();
    stack.pop_back();
    uint64_t key = keyOf(c);
    if (leaving) {
      if (key != UINT64_MAX) --active[key];
      continue;
    }
    if (key != UINT64_MAX) {
      auto [s, fresh] = slot.try_emplace(key, rows.size());
      if (fresh) {
        FlatRow r;
        r.key = key;
        r.inc.assign(ms.size(), 0), r.exc.assign(ms.size(), 0);
        rows.push_back(std::move(r));
      }
      FlatRow& r = rows[s->second];
      bool outer = active[key]++ == 0;
      for (size_t i = 0; i < ms.size(); ++i) {
        if (outer) r.inc[i] += e.inclusive(c, ms[i]);
        r.exc[i] += e.exclusive(c, ms[i]);
      }
    }
    stack.push_back({c, true});
    for (uint32_t k : e.children(c)) stack.push_back({k, false});
    if (++visited % 65536 == 0) e.release_pages(false);  // whole-tree walks keep few pages mapped in
  }
  auto fileName = [&](uint32_t f) { return f < meta.files.size() ? meta.files[f].path : std::string("<unknown file>"); };
  for (auto& r : rows) {
    switch (by) {
    case FlatBy::Module:
      r.module = uint32_t(r.key);
      r.name = r.module < meta.modules.size() ? meta.modules[r.module].path : "<unknown module>";
      break;
    case FlatBy::File:
      r.file = uint32_t(r.key);
      r.name = fileName(r.file);
      break;
    case FlatBy::Function: {
      uint32_t fn = uint32_t(r.key);
      r.name = e.function_name(fn);
      if (fn < meta.functions.size()) {
        r.module = meta.functions[fn].module, r.file = meta.functions[fn].file, r.line = meta.functions[fn].line;
      }
      break;
    }
    case FlatBy::Line:
      r.file = uint32_t(r.key >> 32), r.line = uint32_t(r.key);
      r.name = base_name(fileName(r.file)) + ":" + std::to_string(r.line);
      break;
    }
  }
  std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.key < b.key; });
  return rows;
}

Expected<std::vector<ProfileValue>> profile_values(const Experiment& e, uint32_t ctx, uint16_t propId) {
  std::vector<ProfileValue> out;
  if (propId == kNoMetric) return out;
  HPC_ASSIGN_OR_RETURN(const db::ContextValues cv, e.context_values(ctx));
  auto it = std::lower_bound(cv.key.begin(), cv.key.end(), propId);
  if (it == cv.key.end() || *it != propId) return out;
  size_t k = size_t(it - cv.key.begin());
  for (uint64_t i = cv.start[k]; i < cv.start[k + 1]; ++i) out.push_back({cv.sub[i], cv.value[i]});
  return out;
}

const CallerIndex& ViewCache::callers() {
  std::call_once(callersOnce_, [&] { callers_ = std::make_unique<CallerIndex>(e_); });
  return *callers_;
}

const std::vector<FlatRow>& ViewCache::flat(FlatBy by) {
  std::lock_guard lock(flatMu_);
  auto it = flat_.find(int(by));
  if (it == flat_.end()) it = flat_.emplace(int(by), flat_rows(e_, by)).first;
  return it->second;
}

}  // namespace hpc::present
