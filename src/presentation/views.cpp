#include "presentation/views.hpp"

#include <charconv>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fnmatch.h>
#include <queue>
#include <tuple>
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

Expected<std::vector<uint32_t>> parse_index_list(const std::string& s, uint64_t first, uint64_t limit,
                                                 const std::string& what, const std::string& noun) {
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
    if (!ok || lo < first || hi < lo || hi >= limit)
      return Status::error(what + ": '" + item.substr(0, 40) + "' is not a " + noun + " or range of " +
                           std::to_string(first) + " to " + std::to_string(limit > first ? limit - 1 : first));
    if (out.size() + (hi - lo + 1) > 100000) return Status::error(what + ": more than 100,000 " + noun + "s");
    for (uint64_t p = lo; p <= hi; ++p) out.push_back(uint32_t(p));
    at = end + 1;
  }
  return out;
}

Expected<std::vector<uint32_t>> parse_profile_list(const std::string& s, size_t n, const std::string& what) {
  HPC_ASSIGN_OR_RETURN(std::vector<uint32_t> out, parse_index_list(s, 1, n, what, "profile"));
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

// ---- CCT filters.

bool parse_filter_mode(const std::string& s, FilterMode& out) {
  if (s == "self") out = FilterMode::Self;
  else if (s == "descendants") out = FilterMode::Descendants;
  else if (s == "all") out = FilterMode::SelfAndDescendants;
  else return false;
  return true;
}

std::string_view strip_clone_suffixes(std::string_view name) {
  // ".constprop.0", ".isra.1", ".part.2", ".cold", ".lto_priv.0", ".localalias", ".llvm.123",
  // in any number and order ("f.constprop.0.isra.0").
  static constexpr std::string_view kinds[] = {".constprop", ".isra", ".part", ".cold", ".lto_priv", ".localalias", ".llvm"};
  for (bool more = true; more;) {
    more = false;
    std::string_view s = name;
    while (!s.empty() && s.back() >= '0' && s.back() <= '9') s.remove_suffix(1);  // a clone's number
    if (s.size() < name.size() && !s.empty() && s.back() == '.') s.remove_suffix(1);
    else s = name;  // no number: only a suffix without one (".cold", ".localalias")
    for (std::string_view k : kinds)
      if (s.size() > k.size() && s.substr(s.size() - k.size()) == k) {
        name = s.substr(0, s.size() - k.size());
        more = true;
        break;
      }
  }
  return name;
}

bool filter_matches(const std::string& pattern, const std::string& name) {
  if (fnmatch(pattern.c_str(), name.c_str(), 0) == 0) return true;
  // The function's own name too: without an inlined call's "[I] " and the " [module]" that
  // hpcstruct adds to a procedure's name, so that "main" hides "main [app]"; and without the
  // suffixes of the compiler's clones of it ("stencil.constprop.0" is stencil).
  std::string_view bare = name;
  if (bare.substr(0, 4) == "[I] ") bare.remove_prefix(4);
  if (bare.size() > 3 && bare.back() == ']')
    if (const size_t at = bare.rfind(" ["); at != std::string_view::npos && at > 0) bare = bare.substr(0, at);
  if (bare.size() != name.size() && fnmatch(pattern.c_str(), std::string(bare).c_str(), 0) == 0) return true;
  const std::string_view base = strip_clone_suffixes(bare);
  return base.size() != bare.size() && fnmatch(pattern.c_str(), std::string(base).c_str(), 0) == 0;
}

Expected<PathQuery> parse_path_query(const std::string& text) {
  PathQuery q;
  std::string_view t = text;
  if (!t.empty() && t.front() == '/') q.anchored = true, t.remove_prefix(1);
  // Steps split at each "/" not escaped as "\/".
  std::vector<std::string> parts(1);
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '\\' && i + 1 < t.size() && t[i + 1] == '/') parts.back() += '/', ++i;
    else if (t[i] == '/') parts.emplace_back();
    else parts.back() += t[i];
  }
  static const std::pair<const char*, PathStep::Kind> kinds[] = {
      {"entry", PathStep::Kind::Entry},   {"function", PathStep::Kind::Function},
      {"inlined", PathStep::Kind::Inlined}, {"loop", PathStep::Kind::Loop},
      {"line", PathStep::Kind::Line},     {"instruction", PathStep::Kind::Instruction},
      {"module", PathStep::Kind::Module}, {"file", PathStep::Kind::File}};
  for (const std::string& p : parts) {
    if (p.empty())
      return Status::error("call path query '" + text + "': an empty step (two '/' in a row, or one at the end)");
    PathStep st;
    if (p == "**" || p == "*") {
      st.kind = p == "**" ? PathStep::Kind::AnyMany : PathStep::Kind::Any;
    } else {
      st.glob = p;  // a name (a ':' of a line's "file.c:12" stays in it)
      if (const size_t colon = p.find(':'); colon != std::string::npos)
        for (const auto& [name, kind] : kinds)
          if (p.compare(0, colon, name) == 0 && colon == std::strlen(name)) {
            if (colon + 1 == p.size())
              return Status::error("call path query '" + text + "': step '" + p + "' has no pattern after ':'");
            st.kind = kind, st.glob = p.substr(colon + 1);
            break;
          }
    }
    q.steps.push_back(std::move(st));
  }
  if (q.steps.size() > 61) return Status::error("call path query '" + text + "': more than 61 steps");
  return q;
}

std::string match_path_name(const Experiment& e, uint32_t ctx) {
  std::vector<std::string> names{e.name(ctx)};
  for (uint32_t a = e.parent(ctx); a != 0 && a != kNoCtx; a = e.parent(a))
    if (e.kind(a) == NodeKind::Entry || e.function_of(a) != db::kNone) names.push_back(e.name(a));
  std::string out;
  for (auto it = names.rbegin(); it != names.rend(); ++it) out += (out.empty() ? "" : " > ") + *it;
  return out;
}

std::vector<QueryMatch> query_contexts(const Experiment& e, const PathQuery& query) {
  std::vector<QueryMatch> out;
  for_each_match(e, query, [&](const QueryMatch& m) { out.push_back(m); });
  return out;
}

void for_each_match(const Experiment& e, const PathQuery& query, const std::function<void(const QueryMatch&)>& each) {
  std::vector<PathStep> steps = query.steps;
  if (!query.anchored) steps.insert(steps.begin(), PathStep{PathStep::Kind::AnyMany, {}});
  const size_t n = steps.size();
  // A path's state: bit i set when steps before i matched and step i waits (n: all matched).
  auto closure = [&](uint64_t x) {  // a "**" may match no context: the step after it waits too
    for (size_t i = 0; i < n; ++i)
      if (steps[i].kind == PathStep::Kind::AnyMany && (x >> i & 1)) x |= uint64_t(1) << (i + 1);
    return x;
  };
  const auto& meta = e.meta();
  auto pathOrBase = [](const std::string& glob, const std::string& path) {
    return fnmatch(glob.c_str(), path.c_str(), 0) == 0 ||
           fnmatch(glob.c_str(), base_name(path).c_str(), 0) == 0;
  };
  auto stepMatches = [&](const PathStep& st, bool entry, const db::Context& x, const std::string& name) {
    using K = PathStep::Kind;
    switch (st.kind) {
    case K::AnyMany:
    case K::Any: return true;
    case K::Name: return filter_matches(st.glob, name);
    case K::Entry: return entry && filter_matches(st.glob, name);
    case K::Function: return !entry && x.lexicalType == 0 && filter_matches(st.glob, name);
    case K::Inlined: return !entry && x.lexicalType == 0 && x.relation == 2 && filter_matches(st.glob, name);
    case K::Loop: return !entry && x.lexicalType == 1 && filter_matches(st.glob, name);
    case K::Line: return !entry && x.lexicalType == 2 && filter_matches(st.glob, name);
    case K::Instruction: return !entry && x.lexicalType > 2 && filter_matches(st.glob, name);
    case K::Module:
    case K::File: {
      uint32_t m = entry ? db::kNone : x.module, f = entry ? db::kNone : x.file;
      if (!entry && x.lexicalType == 0 && x.function < meta.functions.size())
        m = meta.functions[x.function].module, f = meta.functions[x.function].file;
      const bool isModule = st.kind == K::Module;
      const uint32_t i = isModule ? m : f;
      const size_t size = isModule ? meta.modules.size() : meta.files.size();
      const std::string path = i < size ? (isModule ? meta.modules[i].path : meta.files[i].path) : std::string();
      return pathOrBase(st.glob, path);
    }
    }
    return false;
  };
  bool needsName = false, needsContext = false;
  for (const PathStep& st : steps) {
    needsName |= st.kind != PathStep::Kind::AnyMany && st.kind != PathStep::Kind::Any &&
                 st.kind != PathStep::Kind::Module && st.kind != PathStep::Kind::File;
    needsContext |= st.kind != PathStep::Kind::AnyMany && st.kind != PathStep::Kind::Any && st.kind != PathStep::Kind::Name;
  }
  struct Item {
    uint32_t ctx;
    uint64_t state;  // the parent's
    bool above;      // a context above matched
  };
  std::vector<Item> stack;
  std::vector<uint32_t> kids;
  e.children(0, kids);
  const uint64_t top = closure(1);
  for (auto it = kids.rbegin(); it != kids.rend(); ++it) stack.push_back({*it, top, false});
  while (!stack.empty()) {
    const Item it = stack.back();
    stack.pop_back();
    const uint32_t c = it.ctx;
    if (!e.has(c)) continue;
    const bool entry = e.kind(c) == NodeKind::Entry;
    const db::Context x = !entry && needsContext ? e.context(c) : db::Context{};
    const std::string name = needsName ? e.name(c) : std::string();
    uint64_t next = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!(it.state >> i & 1)) continue;
      if (steps[i].kind == PathStep::Kind::AnyMany) next |= uint64_t(1) << i;
      else if (stepMatches(steps[i], entry, x, name)) next |= uint64_t(1) << (i + 1);
    }
    next = closure(next);
    const bool matched = next >> n & 1;
    if (matched) each({c, !it.above});
    if (next != 0) {  // a path no step waits on matches nothing below
      e.children(c, kids);
      for (auto k = kids.rbegin(); k != kids.rend(); ++k) stack.push_back({*k, next, it.above || matched});
    }
  }
}

namespace {
// The first filter matching context k's name, or none.
const FilterMode* matching_filter(const Experiment& e, uint32_t k, const std::vector<CctFilter>& filters) {
  if (filters.empty()) return nullptr;
  const std::string name = e.name(k);
  for (const CctFilter& f : filters)
    if (filter_matches(f.pattern, name)) return &f.mode;
  return nullptr;
}
}  // namespace

FilterAbsorbed filter_absorbed(const Experiment& e, uint32_t ctx, bool leaf, const std::vector<CctFilter>& filters) {
  FilterAbsorbed a;
  if (filters.empty() || !e.has(ctx)) return a;
  std::vector<uint32_t> todo = e.children(ctx), kids;
  if (leaf) {  // a "descendants" match: all below it hidden, its own now
    a.whole = std::move(todo);
    return a;
  }
  while (!todo.empty()) {
    const uint32_t k = todo.back();
    todo.pop_back();
    const FilterMode* mode = matching_filter(e, k, filters);
    if (!mode || *mode == FilterMode::Descendants) continue;  // shown: its costs stay its own
    if (*mode == FilterMode::Self) {
      a.own.push_back(k);
      e.children(k, kids);
      todo.insert(todo.end(), kids.begin(), kids.end());
    } else {
      a.whole.push_back(k);
    }
  }
  return a;
}

double absorbed_value(const Experiment& e, const FilterAbsorbed& a, const std::function<double(uint32_t)>& inclusive) {
  double v = 0;
  for (uint32_t k : a.whole) v += inclusive(k);
  std::vector<uint32_t> kids;
  for (uint32_t k : a.own) {  // the cost at k itself: its inclusive value less its children's
    double own = inclusive(k);
    e.children(k, kids);
    for (uint32_t c : kids) own -= inclusive(c);
    v += std::max(0.0, own);
  }
  return v;
}

std::vector<FilteredChild> filtered_children(const Experiment& e, uint32_t ctx, const std::vector<CctFilter>& filters,
                                             size_t limit) {
  std::vector<FilteredChild> out;
  if (!e.has(ctx)) return out;
  // Contexts still to look at, in order: a Self match's children take its place.
  std::vector<uint32_t> todo = e.children(ctx), kids;
  std::reverse(todo.begin(), todo.end());
  while (!todo.empty() && out.size() < limit) {
    const uint32_t k = todo.back();
    todo.pop_back();
    const FilterMode* mode = matching_filter(e, k, filters);
    if (!mode) {
      out.push_back({k, false});
    } else if (*mode == FilterMode::Descendants) {
      out.push_back({k, true});
    } else if (*mode == FilterMode::Self) {
      e.children(k, kids);
      for (auto it = kids.rbegin(); it != kids.rend(); ++it) todo.push_back(*it);
    }  // SelfAndDescendants: left out
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

const char* flat_section(FlatBy by) {
  switch (by) {
  case FlatBy::Module: return "flat-module";
  case FlatBy::File: return "flat-file";
  case FlatBy::Function: return "flat-function";
  case FlatBy::Line: return "flat-line";
  case FlatBy::Loop: return "flat-loop";
  }
  return "flat";
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

// ---- The static structure (hpcviewer's flat view).

const char* static_kind_name(StaticKind k) {
  switch (k) {
  case StaticKind::Module: return "module";
  case StaticKind::File: return "file";
  case StaticKind::Function: return "function";
  case StaticKind::Loop: return "loop";
  case StaticKind::Line: return "line";
  case StaticKind::Inlined: return "inlined";
  case StaticKind::Call: return "call";
  case StaticKind::Instruction: return "instruction";
  }
  return "?";
}

std::string static_key_string(uint64_t key) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "s%llx", static_cast<unsigned long long>(key));
  return buf;
}

Expected<std::vector<uint64_t>> parse_static_path(const std::string& text) {
  std::vector<uint64_t> out;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('/', at);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(at, end - at);
    uint64_t v = 0;
    auto [p, ec] = item.size() > 1 ? std::from_chars(item.data() + 1, item.data() + item.size(), v, 16)
                                   : std::from_chars_result{item.data(), std::errc::invalid_argument};
    if (item.size() < 2 || item.size() > 17 || item[0] != 's' || ec != std::errc() || p != item.data() + item.size())
      return Status::error("structure path element '" + item.substr(0, 40) + "' must be s and hex digits");
    if (out.size() >= 256) return Status::error("structure path longer than 256 keys");
    out.push_back(v);
    at = end + 1;
  }
  return out;
}

namespace {
// Keys below the file level: a tag in the top 4 bits, then what names the row within its
// parent. A function is its meta.db index (tag 0), or, without one, its module and offset.
enum : uint64_t {
  kTagFunction = 0, kTagAddress = 1, kTagLoop = 2, kTagLine = 3, kTagInlined = 4, kTagCall = 5,
  kTagCallAddress = 6, kTagInstruction = 7
};
constexpr uint64_t tagged(uint64_t tag, uint64_t payload) { return tag << 60 | (payload & ((uint64_t(1) << 60) - 1)); }
constexpr uint64_t tag_of(uint64_t key) { return key >> 60; }
uint64_t address_key(uint32_t module, uint64_t offset) {
  return uint64_t(module & 0xfffff) << 40 | (offset & ((uint64_t(1) << 40) - 1));
}
uint64_t line_key(uint32_t file, uint32_t line) { return uint64_t(file & 0xfffffff) << 32 | line; }

}  // namespace

// A context as the static tree sees it: its key within the function body it lies in, and
// whether it is itself an instance of a function (root), whose rows start at the top.
struct StaticTree::Step {
  uint64_t key = UINT64_MAX;  // UINT64_MAX: not in the tree (the root, entry points)
  StaticKind kind = StaticKind::Instruction;
  bool root = false;  // a function's instance: its own rows start from its module
  bool leaf = false;  // a call site: nothing below it belongs to the body it is in
  uint32_t module = db::kNone, file = db::kNone;  // a root's module and file
  uint64_t function = 0;                          // a root's function key
};

StaticTree::Step StaticTree::step(uint32_t c) const {
  Step s;
  if (c == 0 || !e_.has(c) || e_.kind(c) != NodeKind::Context) return s;
  const db::Context x = e_.context(c);
  const uint32_t fn = e_.function_of(c);
  const auto& fns = e_.meta().functions;
  if (x.lexicalType == 0 && fn != db::kNone) {
    s.root = true;
    s.function = tagged(kTagFunction, fn);
    if (fn < fns.size()) s.module = fns[fn].module, s.file = fns[fn].file;
    if (x.relation == 2) s.key = tagged(kTagInlined, fn), s.kind = StaticKind::Inlined;
    else s.key = tagged(kTagCall, fn), s.kind = StaticKind::Call, s.leaf = true;
    return s;
  }
  if (x.lexicalType == 1 || x.lexicalType == 2) {
    s.key = tagged(x.lexicalType == 1 ? kTagLoop : kTagLine, line_key(x.file, x.line));
    s.kind = x.lexicalType == 1 ? StaticKind::Loop : StaticKind::Line;
    return s;
  }
  const uint64_t at = address_key(x.module, x.offset);
  if (x.relation != 0) {  // a call without a function (no structure): the callee is its address
    s.root = s.leaf = true;
    s.key = tagged(kTagCallAddress, at), s.kind = StaticKind::Call;
    s.function = tagged(kTagAddress, at), s.module = x.module;
    return s;
  }
  s.key = tagged(kTagInstruction, at);
  return s;
}

StaticTree::StaticTree(const Experiment& e, std::vector<size_t> metrics) : e_(e), ms_(all_if_empty(e, std::move(metrics))) {}

std::vector<StaticRow> StaticTree::rows(const std::vector<uint64_t>& prefix, uint32_t depth, size_t limit,
                                        size_t* total) const {
  const StaticRows found = find(prefix, depth, limit, total);
  std::vector<StaticRow> out;
  out.reserve(found.size());
  for (size_t i = 0; i < found.size(); ++i) out.push_back(found.row(i));
  return out;
}

StaticRows StaticTree::find(const std::vector<uint64_t>& prefix, uint32_t depth, size_t limit, size_t* total) const {
  const size_t want = prefix.size() + std::max<uint32_t>(depth, 1);  // the rows' depth (modules: 1)
  const auto& meta = e_.meta();
  const size_t nm = ms_.size();
  StaticRows res;
  res.e_ = &e_;
  res.nm_ = nm;
  // The rows' paths as a trie: node 0 is the empty path, each other one its parent's path
  // and one key; a row is a node that took values. 8 + 16 per metric bytes a node besides
  // the index entry, and no path copied as the walk goes. Room for the budget is reserved at
  // once: pages are taken only as rows come (a vector that grew by doubling held its old
  // copy and its new one at once, as much again as the rows).
  using Node = StaticRows::Node;
  std::vector<Node>& nodes = res.nodes_;
  std::vector<uint8_t>& flags = res.flags_;
  std::vector<double>& vals = res.vals_;
  if (budget_ != SIZE_MAX) nodes.reserve(budget_ + 2), flags.reserve(budget_ + 2), vals.reserve((budget_ + 2) * 2 * nm);
  nodes.push_back({0, UINT32_MAX, 0});
  flags.push_back(uint8_t(StaticKind::Module));
  vals.assign(2 * nm, 0.0);
  // (parent, key) -> node: open addressing over node indices (0: empty slot; node 0, the
  // empty path, is no one's child), at most three quarters full.
  std::vector<uint32_t> slots(1024, 0);
  auto slotOf = [&](uint32_t parent, uint64_t key) {
    uint64_t h = (key ^ (uint64_t(parent) << 32 | parent)) * 0x9e3779b97f4a7c15ull;
    return size_t(h ^ h >> 29);
  };
  auto child = [&](uint32_t parent, uint64_t key, StaticKind kind, uint32_t ctx) {
    const size_t mask = slots.size() - 1;
    for (size_t i = slotOf(parent, key) & mask;; i = (i + 1) & mask) {
      const uint32_t at = slots[i];
      if (at == 0) break;
      if (nodes[at].parent == parent && nodes[at].key == key) return at;
    }
    const uint32_t node = uint32_t(nodes.size());
    nodes.push_back({key, parent, ctx});
    flags.push_back(uint8_t(kind));
    vals.resize(vals.size() + 2 * nm, 0.0);
    if (4 * nodes.size() > 3 * slots.size()) {  // grow, every node placed again
      slots.assign(2 * slots.size(), 0);
    } else {
      for (size_t i = slotOf(parent, key) & mask;; i = (i + 1) & mask)
        if (slots[i] == 0) {
          slots[i] = node;
          return node;
        }
    }
    const size_t m = slots.size() - 1;
    for (uint32_t x = 1; x < nodes.size(); ++x)
      for (size_t i = slotOf(nodes[x].parent, nodes[x].key) & m;; i = (i + 1) & m)
        if (slots[i] == 0) {
          slots[i] = x;
          break;
        }
    return node;
  };
  std::unordered_map<uint32_t, uint32_t> active;  // each row's instances on the current path

  // Adds context c's values to row `node`; c is its outermost instance when no context above
  // it on its path had that row (counted in `active` until the walk leaves c).
  auto add = [&](uint32_t node, uint32_t c, bool hasChildren, bool withExc) {
    flags[node] |= uint8_t(StaticRows::kRow | (hasChildren ? StaticRows::kHasChildren : 0));
    const bool outer = active[node]++ == 0;
    double* v = &vals[size_t(node) * 2 * nm];
    for (size_t i = 0; i < nm; ++i) {
      const MetricView& m = e_.metrics()[ms_[i]];
      if (outer) v[i] += e_.inclusive(c, m);
      if (withExc) v[nm + i] += e_.exclusive(c, m);
    }
    return node;
  };
  struct Open {
    uint32_t node;  // an instance's path so far: module, file, function, the body's keys
    uint32_t size;
  };
  struct Emit {
    uint32_t node;
    bool hasChildren, withExc;
  };
  struct Frame {
    uint32_t ctx;
    bool leaving;
    std::vector<Open> open;        // instances the children continue
    std::vector<Emit> emits;       // rows this context adds to, when entered
    std::vector<uint32_t> counted;  // rows this context entered in `active`
  };
  // Whether a path of `size` keys ending at trie node `node` lies along `prefix`: its key at
  // each position within the prefix equal the prefix's (checked as each key is added).
  auto along = [&](uint32_t size, uint64_t key) { return size > prefix.size() || prefix[size - 1] == key; };
  // A root's top rows (module, file, function), as far as they lie along the prefix; the trie
  // node at `upto` keys, or UINT32_MAX where the root is not along the prefix.
  auto topNode = [&](const Step& s, uint32_t ctx, size_t upto) {
    const uint64_t keys[3] = {s.module, s.file, s.function};
    const StaticKind kinds[3] = {StaticKind::Module, StaticKind::File, StaticKind::Function};
    uint32_t node = 0;
    for (uint32_t k = 0; k < upto; ++k) {
      if (!along(k + 1, keys[k])) return UINT32_MAX;
      node = child(node, keys[k], kinds[k], ctx);
    }
    for (uint32_t k = uint32_t(upto); k < 3 && k < prefix.size(); ++k)
      if (prefix[k] != keys[k]) return UINT32_MAX;
    return node;
  };

  std::vector<Frame> stack;
  const uint64_t fnKey = prefix.size() >= 3 ? prefix[2] : UINT64_MAX;
  if (fnKey != UINT64_MAX && tag_of(fnKey) == kTagFunction && fnKey < meta.functions.size()) {
    // Below a function: only its instances' bodies, from each outermost one (those below it
    // are met in its walk, where they count as recursion); found by function index in
    // memory, with whether a context has an instance above it remembered on the way up.
    const uint32_t fn = uint32_t(fnKey);
    const uint32_t n = uint32_t(e_.id_limit());
    auto instance = [&](uint32_t c) { return c != 0 && e_.function_of(c) == fn && e_.kind(c) == NodeKind::Context; };
    std::vector<uint8_t> above(n, 0);  // 1: no instance above, 2: one above
    std::vector<uint32_t> walked, outermost;
    for (uint32_t c = 1; c < n; ++c) {
      if (!e_.has(c) || !instance(c)) continue;
      uint8_t answer = 1;
      for (uint32_t a = e_.parent(c); a != kNoCtx; a = e_.parent(a)) {
        if (instance(a) || above[a] == 2) {
          answer = 2;
          break;
        }
        if (above[a] == 1 || a == 0) break;
        walked.push_back(a);
      }
      for (uint32_t w : walked) above[w] = answer;
      walked.clear();
      above[c] = answer;
      if (answer == 1) outermost.push_back(c);
    }
    for (auto it = outermost.rbegin(); it != outermost.rend(); ++it) {
      const Step s = step(*it);
      const uint32_t top = topNode(s, *it, 3);
      if (top != UINT32_MAX && e_.has_children(*it)) stack.push_back({*it, false, {{top, 3}}, {}, {}});
    }
  } else {
    stack.push_back({0, false, {}, {}, {}});
  }
  std::vector<uint32_t> kids;
  size_t visited = 0;
  over_ = false;
  while (!stack.empty()) {
    if (nodes.size() > budget_) {
      over_ = true;
      if (total) *total = 0;
      StaticRows none;
      none.e_ = &e_;
      return none;
    }
    Frame f = std::move(stack.back());
    stack.pop_back();
    if (f.leaving) {
      for (uint32_t node : f.counted)
        if (auto it = active.find(node); it != active.end() && --it->second == 0) active.erase(it);
      continue;
    }
    // Entered: its rows take its values (siblings of one row are each outermost).
    if (!f.emits.empty()) {
      Frame leave{f.ctx, true, {}, {}, {}};
      for (const Emit& x : f.emits) leave.counted.push_back(add(x.node, f.ctx, x.hasChildren, x.withExc));
      stack.push_back(std::move(leave));
    }
    e_.children(f.ctx, kids);
    for (uint32_t k : kids) {
      const Step s = step(k);
      Frame next{k, false, {}, {}, {}};
      if (s.key != UINT64_MAX) {
        const bool hasKids = !s.leaf && e_.has_children(k);
        // Each open instance's body goes on with this context.
        for (const Open& o : f.open) {
          const uint32_t size = o.size + 1;
          if (!along(size, s.key)) continue;
          const uint32_t node = child(o.node, s.key, s.kind, k);
          if (size == want || (size > prefix.size() && !hasKids)) {
            next.emits.push_back({node, hasKids, s.kind != StaticKind::Call});
            continue;
          }
          if (hasKids) next.open.push_back({node, size});
        }
        // An instance of a function starts its own rows.
        if (s.root) {
          if (want <= 3) {
            const uint32_t node = topNode(s, k, want);
            if (node != UINT32_MAX) next.emits.push_back({node, want < 3 || e_.has_children(k), true});
          } else if (const uint32_t top = topNode(s, k, 3); top != UINT32_MAX) {
            if (e_.has_children(k)) next.open.push_back({top, 3});
            else if (prefix.size() < 3) next.emits.push_back({top, false, true});  // a function without a body: a leaf
          }
        }
      }
      stack.push_back(std::move(next));  // every context: an instance may start anywhere
    }
    if (++visited % kReleaseEvery == 0) e_.release_pages(false);
  }

  std::vector<uint32_t>& order = res.order_;
  for (uint32_t i = 1; i < nodes.size(); ++i)
    if (flags[i] & StaticRows::kRow) order.push_back(i);
  if (total) *total = order.size();
  // Hottest first by the first metric's inclusive, then exclusive value, then the order the
  // walk met them (meta.db's, whatever the request).
  auto hotter = [&](uint32_t a, uint32_t b) {
    if (nm) {
      const double ia = vals[size_t(a) * 2 * nm], ib = vals[size_t(b) * 2 * nm];
      if (ia != ib) return ia > ib;
      const double ea = vals[size_t(a) * 2 * nm + nm], eb = vals[size_t(b) * 2 * nm + nm];
      if (ea != eb) return ea > eb;
    }
    return a < b;
  };
  const size_t n = std::min(limit, order.size());
  std::partial_sort(order.begin(), order.begin() + n, order.end(), hotter);
  order.resize(n);
  order.shrink_to_fit();
  return res;
}

StaticRow StaticRows::row(size_t i) const {
  const Experiment& e = *e_;
  const auto& meta = e.meta();
  const uint32_t at = order_[i];
  const Node& x = nodes_[at];
  StaticRow r;
  for (uint32_t n = at; n != 0; n = nodes_[n].parent) r.path.push_back(nodes_[n].key);
  std::reverse(r.path.begin(), r.path.end());
  r.kind = StaticKind(flags_[at] & kKindBits);
  r.hasChildren = (flags_[at] & kHasChildren) != 0;
  r.inc.assign(vals_.begin() + size_t(at) * 2 * nm_, vals_.begin() + size_t(at) * 2 * nm_ + nm_);
  r.exc.assign(vals_.begin() + size_t(at) * 2 * nm_ + nm_, vals_.begin() + size_t(at + 1) * 2 * nm_);
  const uint64_t key = x.key;
  switch (r.kind) {
  case StaticKind::Module:
    r.name = key < meta.modules.size() ? base_name(meta.modules[key].path) : std::string("<unknown module>");
    break;
  case StaticKind::File:
    r.name = key < meta.files.size() ? base_name(meta.files[key].path) : std::string("<unknown file>");
    if (key < meta.files.size()) r.file = uint32_t(key);
    break;
  case StaticKind::Function:
    if (tag_of(key) == kTagFunction) {
      r.name = e.function_name(uint32_t(key));
      if (key < meta.functions.size()) r.file = meta.functions[key].file, r.line = meta.functions[key].line;
    } else {
      r.name = e.name(x.ctx);
    }
    break;
  case StaticKind::Inlined:
    r.name = "[I] " + e.function_name(uint32_t(key));
    std::tie(r.file, r.line) = e.source_of(x.ctx);
    break;
  case StaticKind::Call:
    r.name = "-> " + (tag_of(key) == kTagCall ? e.function_name(uint32_t(key)) : e.name(x.ctx));
    std::tie(r.file, r.line) = e.source_of(x.ctx);
    break;
  default:
    r.name = e.name(x.ctx);
    std::tie(r.file, r.line) = e.source_of(x.ctx);
  }
  return r;
}

std::optional<std::vector<uint64_t>> remap_static_path(const std::vector<uint64_t>& path, const IndexMaps& maps) {
  auto through = [](const std::function<uint32_t(uint32_t)>& f, uint32_t i) { return i == db::kNone ? i : f(i); };
  auto address = [&](uint64_t payload) -> std::optional<uint64_t> {  // address_key's module, 20 bits
    const uint32_t m = uint32_t(payload >> 40);
    const uint32_t to = through(maps.module, m == 0xfffff ? db::kNone : m);
    if (to == db::kNone && m != 0xfffff) return std::nullopt;
    return (payload & ((uint64_t(1) << 40) - 1)) | uint64_t(to & 0xfffff) << 40;
  };
  std::vector<uint64_t> out;
  out.reserve(path.size());
  for (size_t i = 0; i < path.size(); ++i) {
    const uint64_t key = path[i];
    if (i < 2) {  // a module, then a file: their indices (kNone where the function has none)
      const uint32_t at = through(i == 0 ? maps.module : maps.file, uint32_t(key));
      if (at == db::kNone && uint32_t(key) != db::kNone) return std::nullopt;
      out.push_back(at);
      continue;
    }
    const uint64_t tag = tag_of(key), payload = key & ((uint64_t(1) << 60) - 1);
    std::optional<uint64_t> to;
    switch (tag) {
    case kTagFunction:
    case kTagInlined:
    case kTagCall:
      if (const uint32_t fn = maps.function(uint32_t(payload)); fn != db::kNone) to = fn;
      break;
    case kTagAddress:
    case kTagCallAddress:
    case kTagInstruction: to = address(payload); break;
    case kTagLoop:
    case kTagLine: {
      const uint32_t f = uint32_t(payload >> 32) & 0xfffffff;
      const uint32_t mapped = through(maps.file, f == 0xfffffff ? db::kNone : f);
      if (mapped != db::kNone || f == 0xfffffff) to = line_key(mapped, uint32_t(payload));
      break;
    }
    default: break;
    }
    if (!to) return std::nullopt;
    out.push_back(tagged(tag, *to));
  }
  return out;
}

std::optional<StaticRow> StaticTree::node(const std::vector<uint64_t>& path) const {
  if (path.empty()) return std::nullopt;
  std::vector<uint64_t> parent(path.begin(), path.end() - 1);
  for (StaticRow& r : rows(parent, 1))
    if (r.path == path) return std::move(r);
  return std::nullopt;
}

}  // namespace hpc::present
