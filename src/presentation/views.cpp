#include "presentation/views.hpp"

#include <algorithm>
#include <queue>
#include <unordered_map>

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

namespace {
// Every metric's index when `ms` is empty.
std::vector<size_t> all_if_empty(const Experiment& e, std::vector<size_t> ms) {
  if (ms.empty())
    for (size_t i = 0; i < e.metrics().size(); ++i) ms.push_back(i);
  return ms;
}
// Whole-tree scans read values from profile.db's mapping: its pages leave as they go.
constexpr uint32_t kReleaseEvery = 8192;
}  // namespace

CallerIndex::CallerIndex(const Experiment& e, std::vector<size_t> metrics) : e_(e), ms_(all_if_empty(e, std::move(metrics))) {}

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

void CallerIndex::add(uint32_t ctx, bool withInclusive, Aggregate& a) const {
  for (size_t i = 0; i < ms_.size(); ++i) {
    const MetricView& m = e_.metrics()[ms_[i]];
    if (withInclusive) a.inc[i] += e_.inclusive(ctx, m);
    a.exc[i] += e_.exclusive(ctx, m);
  }
}

Aggregate CallerIndex::empty(uint64_t key) const {
  Aggregate a;
  a.key = key;
  a.inc.assign(ms_.size(), 0), a.exc.assign(ms_.size(), 0);
  return a;
}

namespace {
// No function context above `ctx` has a key equal to `key` (the instance is the outermost
// of a recursion). keyOf maps a function index to the grouping key.
template <typename KeyOf> bool outermost(const Experiment& e, uint32_t ctx, uint64_t key, KeyOf&& keyOf) {
  for (uint32_t c = e.parent(ctx); c != kNoCtx && c != 0; c = e.parent(c))
    if (uint32_t fn = e.function_of(c); fn != db::kNone && keyOf(fn) == key) return false;
  return true;
}
const auto kSame = [](uint32_t fn) { return uint64_t(fn); };
}  // namespace

template <typename F> void CallerIndex::for_each_match(const std::vector<uint64_t>& path, F&& f) const {
  if (path.empty() || (path[0] & kEntryKey)) return;
  for (uint32_t c = 1; c < e_.id_limit(); ++c) {
    if (!e_.has(c) || e_.function_of(c) != path[0] || e_.kind(c) != NodeKind::Context) continue;
    uint32_t at = c;
    bool ok = true;
    for (size_t j = 1; j < path.size() && ok; ++j) {
      at = caller_of(at);
      ok = at != kNoCtx && key_of(at) == path[j];
    }
    if (ok) f(c, outermost(e_, c, path[0], kSame), caller_of(at));
  }
}

std::vector<Aggregate> CallerIndex::roots() const {
  FlatTable t = flat_table(e_, FlatBy::Function, ms_);
  std::vector<Aggregate> out;
  for (size_t i = 0; i < t.size(); ++i) {
    Aggregate a = empty(t.keys[i]);
    for (size_t m = 0; m < t.nm; ++m) a.inc[m] = t.inc(i, m), a.exc[m] = t.exc(i, m);
    a.hasChildren = t.hasCaller[i];
    out.push_back(std::move(a));
  }
  return out;
}

Aggregate CallerIndex::node(const std::vector<uint64_t>& path) const {
  Aggregate a = empty(path.empty() ? 0 : path.back());
  for_each_match(path, [&](uint32_t c, bool outer, uint32_t next) {
    add(c, outer, a);
    if (next != kNoCtx) a.hasChildren = true;
  });
  return a;
}

std::vector<Aggregate> CallerIndex::children(const std::vector<uint64_t>& path) const {
  std::vector<Aggregate> out;
  std::unordered_map<uint64_t, size_t> slot;
  for_each_match(path, [&](uint32_t c, bool outer, uint32_t caller) {
    if (caller == kNoCtx) return;
    uint64_t key = key_of(caller);
    auto [s, fresh] = slot.try_emplace(key, out.size());
    if (fresh) out.push_back(empty(key));
    Aggregate& a = out[s->second];
    add(c, outer, a);
    if (caller_of(caller) != kNoCtx) a.hasChildren = true;
  });
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

FlatTable flat_table(const Experiment& e, FlatBy by, const std::vector<size_t>& metrics) {
  const auto& meta = e.meta();
  const std::vector<size_t> ms = all_if_empty(e, metrics);
  FlatTable t;
  t.nm = ms.size();
  std::vector<uint32_t> dense;                  // key -> row, keys below dense.size()
  std::unordered_map<uint64_t, uint32_t> sparse;  // the others (Line, kNone)
  auto rowOf = [&](uint64_t key) -> uint32_t {
    uint32_t* slot = key < dense.size() ? &dense[key] : nullptr;
    if (!slot) slot = &sparse.try_emplace(key, UINT32_MAX).first->second;
    if (*slot == UINT32_MAX) {
      *slot = uint32_t(t.keys.size());
      t.keys.push_back(key);
      t.values.resize(t.values.size() + 2 * t.nm, 0.0);
      if (by == FlatBy::Function) t.hasCaller.push_back(0);
    }
    return *slot;
  };
  auto add = [&](uint64_t key, uint32_t c, bool outer) {
    uint32_t row = rowOf(key);
    double* v = &t.values[size_t(row) * 2 * t.nm];
    for (size_t i = 0; i < t.nm; ++i) {
      if (outer) v[i] += e.inclusive(c, e.metrics()[ms[i]]);
      v[t.nm + i] += e.exclusive(c, e.metrics()[ms[i]]);
    }
    return row;
  };
  if (by != FlatBy::Line) {
    // Anchors are function contexts and keys follow from the function: one scan over the
    // in-memory tree, outermost instances found by walking up.
    dense.assign(by == FlatBy::Function ? meta.functions.size() : by == FlatBy::Module ? meta.modules.size() : meta.files.size(),
                 UINT32_MAX);
    auto keyOf = [&](uint32_t fn) -> uint64_t {
      if (by == FlatBy::Function) return fn;
      const db::Function* f = fn < meta.functions.size() ? &meta.functions[fn] : nullptr;
      return by == FlatBy::Module ? (f ? f->module : db::kNone) : (f ? f->file : db::kNone);
    };
    CallerIndex ci(e);
    for (uint32_t c = 1; c < e.id_limit(); ++c) {
      uint32_t fn = e.has(c) ? e.function_of(c) : db::kNone;
      if (fn == db::kNone || e.kind(c) != NodeKind::Context) continue;
      uint64_t key = keyOf(fn);
      uint32_t row = add(key, c, outermost(e, c, key, keyOf));
      if (by == FlatBy::Function && !t.hasCaller[row] && ci.caller_of(c) != kNoCtx) t.hasCaller[row] = 1;
      if (c % kReleaseEvery == 0) e.release_pages(false);
    }
  } else {
    // Line contexts' keys are in their meta.db records: depth-first over the tree, counting
    // each key's instances on the current path (only those stay in `active`).
    std::unordered_map<uint64_t, uint32_t> active;
    std::vector<std::pair<uint32_t, bool>> stack{{0, false}};  // (ctx, leaving)
    std::vector<uint32_t> kids;
    size_t visited = 0;
    while (!stack.empty()) {
      auto [c, leaving] = stack.back();
      stack.pop_back();
      uint64_t key = UINT64_MAX;
      if (c != 0 && e.kind(c) == NodeKind::Context) {
        const db::Context x = e.context(c);
        if (x.lexicalType == 2) key = uint64_t(x.file) << 32 | x.line;
      }
      if (leaving) {
        if (key != UINT64_MAX && --active[key] == 0) active.erase(key);
        continue;
      }
      if (key != UINT64_MAX) add(key, c, active[key]++ == 0);
      stack.push_back({c, true});
      e.children(c, kids);
      for (uint32_t k : kids) stack.push_back({k, false});
      if (++visited % kReleaseEvery == 0) e.release_pages(false);
    }
  }
  // Key order.
  std::vector<uint32_t> order(t.keys.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return t.keys[a] < t.keys[b]; });
  FlatTable sorted;
  sorted.nm = t.nm;
  sorted.keys.reserve(order.size()), sorted.values.reserve(t.values.size());
  for (uint32_t i : order) {
    sorted.keys.push_back(t.keys[i]);
    sorted.values.insert(sorted.values.end(), t.values.begin() + i * 2 * t.nm, t.values.begin() + (i + 1) * 2 * t.nm);
    if (by == FlatBy::Function) sorted.hasCaller.push_back(t.hasCaller[i]);
  }
  return sorted;
}

std::vector<uint32_t> FlatTable::top(size_t m, size_t n) const {
  std::vector<uint32_t> order(keys.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  if (m >= nm) return std::vector<uint32_t>(order.begin(), order.begin() + std::min(n, order.size()));
  auto hotter = [&](uint32_t a, uint32_t b) {
    if (exc(a, m) != exc(b, m)) return exc(a, m) > exc(b, m);
    if (inc(a, m) != inc(b, m)) return inc(a, m) > inc(b, m);
    return a < b;  // key order: the same order every time
  };
  n = std::min(n, order.size());
  std::partial_sort(order.begin(), order.begin() + n, order.end(), hotter);
  order.resize(n);
  return order;
}

FlatRow flat_row(const Experiment& e, FlatBy by, const FlatTable& t, size_t i) {
  FlatRow r;
  r.key = t.keys[i];
  r.inc.assign(t.values.begin() + i * 2 * t.nm, t.values.begin() + i * 2 * t.nm + t.nm);
  r.exc.assign(t.values.begin() + i * 2 * t.nm + t.nm, t.values.begin() + (i + 1) * 2 * t.nm);
  const auto& meta = e.meta();
  auto fileName = [&](uint32_t f) { return f < meta.files.size() ? meta.files[f].path : std::string("<unknown file>"); };
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
    if (fn < meta.functions.size())
      r.module = meta.functions[fn].module, r.file = meta.functions[fn].file, r.line = meta.functions[fn].line;
    break;
  }
  case FlatBy::Line:
    r.file = uint32_t(r.key >> 32), r.line = uint32_t(r.key);
    r.name = base_name(fileName(r.file)) + ":" + std::to_string(r.line);
    break;
  }
  return r;
}

std::vector<FlatRow> flat_rows(const Experiment& e, FlatBy by, const std::vector<size_t>& metrics) {
  FlatTable t = flat_table(e, by, metrics);
  std::vector<FlatRow> rows;
  for (size_t i = 0; i < t.size(); ++i) rows.push_back(flat_row(e, by, t, i));
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

}  // namespace hpc::present
