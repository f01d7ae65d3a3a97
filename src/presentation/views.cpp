#include "presentation/views.hpp"

#include <charconv>

#include <algorithm>
#include <cstdio>
#include <cstring>
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

Expected<std::vector<uint32_t>> parse_profile_list(const std::string& s, size_t n, const std::string& what) {
  std::vector<uint32_t> out;
  auto parse = [](const std::string& t, uint64_t& v) {
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    return ec == std::errc() && p == t.data() + t.size() && !t.empty();
  };
  for (size_t at = 0; at < s.size();) {
    size_t end = s.find(',', at);
    if (end == std::string::npos) end = s.size();
    const std::string item = s.substr(at, end - at);
    const size_t dash = item.find('-');
    uint64_t lo = 0, hi = 0;
    const bool ok = dash == std::string::npos ? parse(item, lo) && (hi = lo, true)
                                              : parse(item.substr(0, dash), lo) && parse(item.substr(dash + 1), hi);
    if (!ok || lo < 1 || hi < lo || hi >= n)
      return Status::error(what + ": '" + item.substr(0, 40) + "' is not a profile or range of 1 to " +
                           std::to_string(n > 0 ? n - 1 : 0));
    if (out.size() + (hi - lo + 1) > 100000) return Status::error(what + ": more than 100,000 profiles");
    for (uint64_t p = lo; p <= hi; ++p) out.push_back(uint32_t(p));
    at = end + 1;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
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
constexpr uint32_t kReleaseEvery = 2048;
}  // namespace

CallerIndex::CallerIndex(const Experiment& e, std::vector<size_t> metrics) : e_(e), ms_(all_if_empty(e, std::move(metrics))) {}

uint64_t CallerIndex::key_of(uint32_t ctx) const {
  if (!e_.has(ctx)) return UINT64_MAX;
  if (e_.kind(ctx) == NodeKind::Entry) return kEntryKey | ctx;
  uint32_t fn = e_.function_of(ctx);
  return fn == db::kNone ? UINT64_MAX : fn;
}

uint32_t CallerIndex::caller_of(uint32_t ctx) const {
  if (!caller_.empty()) return ctx < caller_.size() ? caller_[ctx] : kNoCtx;
  for (uint32_t c = e_.parent(ctx); c != kNoCtx && c != 0; c = e_.parent(c))
    if (key_of(c) != UINT64_MAX) return c;
  return kNoCtx;
}

void CallerIndex::index() const {
  const uint32_t n = uint32_t(e_.id_limit());
  // Callers: a context's is its parent when that has a key, else its parent's caller; the
  // unknown ones on the way up from each context are filled on the way back (no recursion:
  // call chains can be hundreds of thousands of contexts deep).
  constexpr uint32_t kUnset = kNoCtx - 1;
  std::vector<uint32_t> caller(n, kUnset), path;
  for (uint32_t c = 0; c < n; ++c) {
    if (!e_.has(c) || caller[c] != kUnset) continue;
    uint32_t at = c, answer = kNoCtx;
    for (;;) {
      const uint32_t p = at == 0 ? kNoCtx : e_.parent(at);
      if (p == kNoCtx || p == 0) break;
      if (key_of(p) != UINT64_MAX) {
        answer = p;
        break;
      }
      if (caller[p] != kUnset) {
        answer = caller[p];
        break;
      }
      path.push_back(at);
      at = p;
    }
    caller[at] = answer;
    for (uint32_t x : path) caller[x] = answer;
    path.clear();
  }
  for (uint32_t& x : caller)
    if (x == kUnset) x = kNoCtx;  // not listed: no caller, as the walk says
  // Function contexts by function, each function's in increasing ctxId (the order of a scan).
  uint32_t functions = 0;
  for (uint32_t c = 1; c < n; ++c)
    if (e_.has(c) && e_.function_of(c) != db::kNone) functions = std::max(functions, e_.function_of(c) + 1);
  std::vector<uint32_t> start(size_t(functions) + 1, 0);
  for (uint32_t c = 1; c < n; ++c)
    if (e_.has(c) && e_.function_of(c) != db::kNone) ++start[e_.function_of(c) + 1];
  for (uint32_t f = 0; f < functions; ++f) start[f + 1] += start[f];
  std::vector<uint32_t> by(start.back()), next(start.begin(), start.end() - 1);
  for (uint32_t c = 1; c < n; ++c)
    if (e_.has(c) && e_.function_of(c) != db::kNone) by[next[e_.function_of(c)]++] = c;
  caller_ = std::move(caller);
  byFunctionStart_ = std::move(start);
  byFunction_ = std::move(by);
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
// Calls f(key, ctx, outermost) for every context with a key (keyAt(ctx) != UINT64_MAX), in a
// depth-first walk over meta.db that counts each key's instances on the current path (only
// those stay in `active`): outermost = no context above it on its path has the same key.
template <typename KeyAt, typename F> void outermost_walk(const Experiment& e, KeyAt&& keyAt, F&& f) {
  struct Step {
    uint32_t ctx;
    bool leaving;
    uint64_t key;  // when leaving
  };
  std::unordered_map<uint64_t, uint32_t> active;
  std::vector<Step> stack{{0, false, 0}};
  std::vector<uint32_t> kids;
  size_t visited = 0;
  while (!stack.empty()) {
    const Step s = stack.back();
    stack.pop_back();
    if (s.leaving) {
      if (auto it = active.find(s.key); it != active.end() && --it->second == 0) active.erase(it);
      continue;
    }
    if (const uint64_t key = keyAt(s.ctx); key != UINT64_MAX) {
      f(key, s.ctx, active[key]++ == 0);
      stack.push_back({s.ctx, true, key});
    }
    e.children(s.ctx, kids);
    for (uint32_t k : kids) stack.push_back({k, false, 0});
    if (++visited % kReleaseEvery == 0) e.release_pages(false);
  }
}

// Whether a function context is the outermost instance of its key (no function context
// above it has the same key: recursion). keyOf maps a function index to the grouping key.
// Answered by walking up from the context, in memory. Once the walks have taken more than
// kStepsPerContext steps a context in all (a deep tree: a function called at every level of
// a recursion hundreds of thousands of calls deep makes them quadratic in the depth), every
// function context is answered at once instead, in one depth-first pass over the tree that
// counts each key's instances on the current path (a bit a ctxId).
template <typename KeyOf> class Outermost {
public:
  Outermost(const Experiment& e, KeyOf keyOf)
      : e_(e), keyOf_(std::move(keyOf)), budget_(kStepsPerContext * e.id_limit() + 65536) {}
  // `key` is keyOf(function_of(ctx)).
  bool operator()(uint32_t ctx, uint64_t key) {
    if (!flags_.empty()) return flags_[ctx];
    for (uint32_t c = e_.parent(ctx); c != kNoCtx && c != 0; c = e_.parent(c)) {
      if (++steps_ > budget_) return all()[ctx];
      if (uint32_t fn = e_.function_of(c); fn != db::kNone && keyOf_(fn) == key) return false;
    }
    return true;
  }

private:
  static constexpr uint64_t kStepsPerContext = 64;
  const std::vector<bool>& all() {
    flags_.assign(e_.id_limit(), false);
    outermost_walk(
        e_,
        [&](uint32_t c) {
          const uint32_t fn = e_.function_of(c);
          return fn == db::kNone ? UINT64_MAX : uint64_t(keyOf_(fn));
        },
        [&](uint64_t, uint32_t c, bool outer) { flags_[c] = outer; });
    return flags_;
  }
  const Experiment& e_;
  KeyOf keyOf_;
  uint64_t steps_ = 0, budget_;  // steps walked up so far, and at most
  std::vector<bool> flags_;      // by ctxId, once computed
};
const auto kSame = [](uint32_t fn) { return uint64_t(fn); };
}  // namespace

template <typename F> void CallerIndex::for_each_match(const std::vector<uint64_t>& path, F&& f) const {
  if (path.empty() || (path[0] & kEntryKey)) return;
  if (++queries_ == 2) index();
  Outermost outermost(e_, kSame);
  // Every context, or (indexed) the function's contexts only, in increasing ctxId alike.
  const bool indexed = !byFunctionStart_.empty();  // index() makes it, of one entry at least
  const uint64_t fn = path[0];
  const uint32_t* only = nullptr;
  size_t count = e_.id_limit();
  if (indexed) {
    if (fn + 1 >= byFunctionStart_.size()) return;
    only = byFunction_.data() + byFunctionStart_[fn];
    count = byFunctionStart_[fn + 1] - byFunctionStart_[fn];
  }
  for (size_t k = indexed ? 0 : 1; k < count; ++k) {
    const uint32_t c = only ? only[k] : uint32_t(k);
    if (!e_.has(c) || e_.function_of(c) != fn || e_.kind(c) != NodeKind::Context) continue;
    uint32_t at = c;
    bool ok = true;
    for (size_t j = 1; j < path.size() && ok; ++j) {
      at = caller_of(at);
      ok = at != kNoCtx && key_of(at) == path[j];
    }
    if (ok) f(c, outermost(c, path[0]), caller_of(at));
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
  else if (s == "loop") out = FlatBy::Loop;
  else return false;
  return true;
}

namespace {

// A FlatTable's rows found by key: dense slots for small key spaces (function, module, file
// indices), a hash map for the others.
class FlatBuilder {
public:
  FlatBuilder(size_t nm, size_t denseKeys, bool callers) : dense_(denseKeys, UINT32_MAX), callers_(callers) { t.nm = nm; }
  // The key's row index (created with zero values).
  uint32_t row(uint64_t key) {
    uint32_t* slot = key < dense_.size() ? &dense_[key] : &sparse_.try_emplace(key, UINT32_MAX).first->second;
    if (*slot == UINT32_MAX) {
      *slot = uint32_t(t.keys.size());
      t.keys.push_back(key);
      t.values.resize(t.values.size() + 2 * t.nm, 0.0);
      if (callers_) t.hasCaller.push_back(0);
    }
    return *slot;
  }
  double* values(uint32_t row) { return &t.values[size_t(row) * 2 * t.nm]; }
  FlatTable t;

private:
  std::vector<uint32_t> dense_;
  std::unordered_map<uint64_t, uint32_t> sparse_;
  bool callers_;
};

// `t` reordered to the rows at `order`.
FlatTable select_rows(const FlatTable& t, const std::vector<uint32_t>& order) {
  FlatTable out;
  out.nm = t.nm;
  out.keys.reserve(order.size()), out.values.reserve(order.size() * 2 * t.nm);
  for (uint32_t i : order) {
    out.keys.push_back(t.keys[i]);
    out.values.insert(out.values.end(), t.values.begin() + i * 2 * t.nm, t.values.begin() + (i + 1) * 2 * t.nm);
    if (!t.hasCaller.empty()) out.hasCaller.push_back(t.hasCaller[i]);
  }
  return out;
}

FlatTable in_key_order(const FlatTable& t) {
  std::vector<uint32_t> order(t.keys.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return t.keys[a] < t.keys[b]; });
  return select_rows(t, order);
}

// Calls f(key, ctx, outermost) for every line context (lexical type 2), or with `loops`
// every loop context (lexical type 1); key file << 32 | line; depth-first over meta.db
// (outermost_walk).
template <typename F> void line_anchors(const Experiment& e, F&& f, bool loops = false) {
  const uint16_t type = loops ? 1 : 2;
  outermost_walk(
      e,
      [&](uint32_t c) {
        if (c == 0 || e.kind(c) != NodeKind::Context) return UINT64_MAX;
        const db::Context x = e.context(c);
        return x.lexicalType == type ? uint64_t(x.file) << 32 | x.line : UINT64_MAX;
      },
      f);
}

// Adds context c's values (inclusive only when outermost) to a row.
void add_values(const Experiment& e, const std::vector<size_t>& ms, uint32_t c, bool outer, double* v) {
  for (size_t i = 0; i < ms.size(); ++i) {
    if (outer) v[i] += e.inclusive(c, e.metrics()[ms[i]]);
    v[ms.size() + i] += e.exclusive(c, e.metrics()[ms[i]]);
  }
}

}  // namespace

FlatTable flat_table(const Experiment& e, FlatBy by, const std::vector<size_t>& metrics) {
  const auto& meta = e.meta();
  const std::vector<size_t> ms = all_if_empty(e, metrics);
  if (by == FlatBy::Line || by == FlatBy::Loop) {
    FlatBuilder b(ms.size(), 0, false);
    line_anchors(
        e, [&](uint64_t key, uint32_t c, bool outer) { add_values(e, ms, c, outer, b.values(b.row(key))); },
        by == FlatBy::Loop);
    return in_key_order(b.t);
  }
  // Anchors are function contexts and keys follow from the function: one scan over the
  // in-memory tree, outermost instances found by walking up.
  FlatBuilder b(ms.size(),
                by == FlatBy::Function ? meta.functions.size() : by == FlatBy::Module ? meta.modules.size() : meta.files.size(),
                by == FlatBy::Function);
  auto keyOf = [&](uint32_t fn) -> uint64_t {
    if (by == FlatBy::Function) return fn;
    const db::Function* f = fn < meta.functions.size() ? &meta.functions[fn] : nullptr;
    return by == FlatBy::Module ? (f ? f->module : db::kNone) : (f ? f->file : db::kNone);
  };
  CallerIndex ci(e);
  Outermost outermost(e, keyOf);
  for (uint32_t c = 1; c < e.id_limit(); ++c) {
    uint32_t fn = e.has(c) ? e.function_of(c) : db::kNone;
    if (fn == db::kNone || e.kind(c) != NodeKind::Context) continue;
    uint64_t key = keyOf(fn);
    uint32_t row = b.row(key);
    add_values(e, ms, c, outermost(c, key), b.values(row));
    if (by == FlatBy::Function && !b.t.hasCaller[row] && ci.caller_of(c) != kNoCtx) b.t.hasCaller[row] = 1;
    if (c % kReleaseEvery == 0) e.release_pages(false);
  }
  return in_key_order(b.t);
}

FlatTable flat_top(const Experiment& e, FlatBy by, const std::vector<size_t>& metrics, size_t n, size_t& total,
                   size_t budget) {
  const std::vector<size_t> ms = all_if_empty(e, metrics);
  const size_t rowBytes = 64 + 16 * ms.size();  // a hash-map row: node, key, values
  size_t bound = 0;                             // line contexts are among those without a function
  if (by == FlatBy::Line || by == FlatBy::Loop)
    for (uint32_t c = 1; c < e.id_limit(); ++c) bound += e.has(c) && e.function_of(c) == db::kNone;
  const size_t parts = std::min<size_t>(256, bound * rowBytes / std::max<size_t>(budget, 1) + 1);
  std::vector<std::FILE*> files;
  for (size_t i = 0; parts > 1 && i < parts; ++i)
    if (std::FILE* f = std::tmpfile()) files.push_back(f);
  if (files.size() < parts || parts == 1) {  // small enough (or no temporary files): in memory
    for (std::FILE* f : files) std::fclose(f);
    FlatTable t = flat_table(e, by, ms);
    total = t.size();
    return select_rows(t, t.top(0, n));
  }
  // Line keys too many to aggregate at once: one walk spills each anchor (key, values) into
  // a temporary file chosen by its key's hash, then each file is aggregated alone and its
  // hottest rows kept. Memory: one file's keys, the n rows kept, the files' buffers.
  const size_t recBytes = 8 + 16 * ms.size();
  std::vector<double> rec(2 * ms.size());
  line_anchors(
      e,
      [&](uint64_t key, uint32_t c, bool outer) {
        std::fill(rec.begin(), rec.end(), 0.0);
        add_values(e, ms, c, outer, rec.data());
        std::FILE* f = files[(key * 0x9e3779b97f4a7c15ull >> 40) % files.size()];
        std::fwrite(&key, 8, 1, f), std::fwrite(rec.data(), 8, rec.size(), f);
      },
      by == FlatBy::Loop);
  FlatTable best;
  best.nm = ms.size();
  total = 0;
  std::vector<char> buf(recBytes);
  for (std::FILE* f : files) {
    std::rewind(f);
    FlatBuilder b(ms.size(), 0, false);
    while (std::fread(buf.data(), 1, recBytes, f) == recBytes) {
      uint64_t key;
      std::memcpy(&key, buf.data(), 8);
      std::memcpy(rec.data(), buf.data() + 8, 16 * ms.size());
      double* v = b.values(b.row(key));
      for (size_t i = 0; i < rec.size(); ++i) v[i] += rec[i];
    }
    std::fclose(f);
    total += b.t.size();
    std::vector<uint32_t> keep = b.t.top(0, n);
    FlatTable part = select_rows(b.t, keep);
    b = FlatBuilder(0, 0, false);  // the file's keys go before the merge
    best.keys.insert(best.keys.end(), part.keys.begin(), part.keys.end());
    best.values.insert(best.values.end(), part.values.begin(), part.values.end());
    best = select_rows(best, best.top(0, n));
  }
  return best;
}

std::vector<uint32_t> FlatTable::top(size_t m, size_t n) const {
  std::vector<uint32_t> order(keys.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  n = std::min(n, order.size());
  if (m >= nm) {  // no metric: key order
    std::partial_sort(order.begin(), order.begin() + n, order.end(), [&](uint32_t a, uint32_t b) { return keys[a] < keys[b]; });
  } else {
    auto hotter = [&](uint32_t a, uint32_t b) {
      if (exc(a, m) != exc(b, m)) return exc(a, m) > exc(b, m);
      if (inc(a, m) != inc(b, m)) return inc(a, m) > inc(b, m);
      return keys[a] < keys[b];  // the same order however the rows were gathered
    };
    std::partial_sort(order.begin(), order.begin() + n, order.end(), hotter);
  }
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
  case FlatBy::Loop:
    r.file = uint32_t(r.key >> 32), r.line = uint32_t(r.key);
    r.name = (by == FlatBy::Loop ? "loop at " : "") + base_name(fileName(r.file)) + ":" + std::to_string(r.line);
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
