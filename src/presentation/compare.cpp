#include "presentation/compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <queue>
#include <unordered_map>
#include <utility>

namespace hpc::present {

namespace {

double change(const CompareRow& r, bool exclusive) { return exclusive ? r.bExc - r.aExc : r.bInc - r.aInc; }

// Larger change first, then larger value in either, then name: the same order every run.
bool bigger(const CompareRow& x, const CompareRow& y, bool exclusive) {
  const double dx = std::abs(change(x, exclusive)), dy = std::abs(change(y, exclusive));
  if (dx != dy) return dx > dy;
  const double ox = std::abs(change(x, !exclusive)), oy = std::abs(change(y, !exclusive));
  if (ox != oy) return ox > oy;
  return x.name < y.name;
}

void flat(const Experiment& a, const Experiment& b, const CompareOptions& o, std::vector<CompareRow>& out) {
  std::map<std::string, CompareRow> rows;
  std::map<std::string, std::string> baseNames;  // a row's name in the baseline, where it differs
  for (int side = 0; side < 2; ++side) {
    const Experiment& e = side ? b : a;
    for (const FlatRow& r : flat_rows(e, o.by, {side ? o.metricB : o.metricA})) {
      const std::string key = flat_key(e, o.by, r);
      CompareRow& c = rows[key];
      std::string name = o.by == FlatBy::Module ? base_name(r.name) : r.name;
      // The row named as this run names it; a module's the baseline's name beside it where the
      // two differ (the programs' executables, matched whatever their names; their functions'
      // names differ only by that).
      if (c.name.empty()) c.name = std::move(name);
      else if (side == 1 && c.name != name) {
        if (o.by == FlatBy::Module && !baseNames.count(key)) baseNames[key] = c.name;
        c.name = std::move(name);
      }
      (side ? c.bInc : c.aInc) += r.inc[0];
      (side ? c.bExc : c.aExc) += r.exc[0];
    }
  }
  std::vector<CompareRow> v;
  for (auto& [key, r] : rows)
    if (r.aInc != 0 || r.bInc != 0 || r.aExc != 0 || r.bExc != 0) {
      if (auto it = baseNames.find(key); it != baseNames.end()) r.name += " (baseline: " + it->second + ")";
      v.push_back(std::move(r));
    }
  const size_t n = std::min(o.top, v.size());
  std::partial_sort(v.begin(), v.begin() + n, v.end(), [](auto& x, auto& y) { return bigger(x, y, true); });
  for (size_t i = 0; i < n; ++i) {
    v[i].section = flat_section(o.by);
    out.push_back(std::move(v[i]));
  }
}

// The calling context trees merged by the names on each context's path.
struct Merged {
  uint32_t parent = UINT32_MAX;
  CompareRow row;
  std::vector<uint32_t> kids;
};

void top_down(const Experiment& a, const Experiment& b, const CompareOptions& o, std::vector<CompareRow>& out) {
  std::vector<Merged> nodes(1);
  nodes[0].row.name = "<program root>";
  std::map<std::pair<uint32_t, std::string>, uint32_t> index;
  std::vector<uint32_t> kids;
  for (int side = 0; side < 2; ++side) {
    const Experiment& e = side ? b : a;
    const MetricView& m = e.metrics()[side ? o.metricB : o.metricA];
    std::vector<std::pair<uint32_t, uint32_t>> todo{{0, 0}};  // (context, merged node)
    while (!todo.empty()) {
      const auto [c, at] = todo.back();
      todo.pop_back();
      CompareRow& r = nodes[at].row;
      (side ? r.bInc : r.aInc) += e.inclusive(c, m);
      (side ? r.bExc : r.aExc) += e.exclusive(c, m);
      e.children(c, kids);
      for (uint32_t k : kids) {
        std::string name = e.name(k);  // an inlined function's with its "[I] "
        auto [it, fresh] = index.try_emplace({at, match_name(e, name)}, uint32_t(nodes.size()));
        if (fresh) {
          Merged n;
          n.parent = at;
          n.row.name = std::move(name);
          nodes.push_back(std::move(n));
          nodes[at].kids.push_back(it->second);
        } else if (side == 1) {
          nodes[it->second].row.name = std::move(name);  // as this run names it
        }
        todo.push_back({k, it->second});
      }
    }
  }
  // Best-first from the root by the change of inclusive value.
  auto worse = [&](uint32_t x, uint32_t y) { return bigger(nodes[y].row, nodes[x].row, false); };
  std::priority_queue<uint32_t, std::vector<uint32_t>, decltype(worse)> frontier(worse);
  frontier.push(0);
  std::vector<uint8_t> chosen(nodes.size(), 0);
  for (size_t taken = 0; !frontier.empty() && taken < o.top; ++taken) {
    const uint32_t x = frontier.top();
    frontier.pop();
    if (x != 0 && change(nodes[x].row, false) == 0) break;
    chosen[x] = 1;
    for (uint32_t k : nodes[x].kids) frontier.push(k);
  }
  std::vector<std::pair<uint32_t, uint32_t>> stack{{0, 0}};  // (node, depth)
  while (!stack.empty()) {
    const auto [x, d] = stack.back();
    stack.pop_back();
    if (!chosen[x]) continue;
    CompareRow r = nodes[x].row;
    r.section = "top-down";
    r.depth = d;
    out.push_back(std::move(r));
    std::vector<uint32_t> ks = nodes[x].kids;
    std::sort(ks.begin(), ks.end(), [&](uint32_t p, uint32_t q) { return bigger(nodes[p].row, nodes[q].row, false); });
    for (auto it = ks.rbegin(); it != ks.rend(); ++it) stack.push_back({*it, d + 1});
  }
}


// "+12.5%", "new", "gone" or "" (both zero).
std::string percent(double a, double b) {
  if (a == 0) return b == 0 ? "" : "new";
  if (b == 0) return "gone";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%+.1f%%", 100.0 * (b - a) / std::abs(a));
  return buf;
}


}  // namespace

std::string match_name(const Experiment& e, std::string name) {
  const std::string& suffix = e.program_suffix();
  if (suffix.empty() || name.empty() || name.back() != ']') return name;
  if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
    name.replace(name.size() - suffix.size(), suffix.size(), " [\x01program]");
  return name;
}

std::string module_key(const Experiment& e, uint32_t m) {
  const auto& mods = e.meta().modules;
  if (m >= mods.size()) return std::string();
  if (m == e.program_module()) return "\x01program";  // two builds of one program, named otherwise
  return base_name(mods[m].path);
}

std::string flat_key(const Experiment& e, FlatBy by, const FlatRow& r) {
  const auto& meta = e.meta();
  auto path = [&](uint32_t f) { return f < meta.files.size() ? meta.files[f].path : std::string("<unknown file>"); };
  switch (by) {
  case FlatBy::Module: return module_key(e, r.module);
  case FlatBy::File: return r.name;
  case FlatBy::Function: return match_name(e, r.name) + '\x1f' + module_key(e, r.module);
  case FlatBy::Line:
  case FlatBy::Loop: return path(r.file) + ':' + std::to_string(r.line);
  }
  return r.name;
}

uint32_t matching_context(const Experiment& from, uint32_t ctx, const Experiment& in, bool* ambiguous) {
  if (ambiguous) *ambiguous = false;
  if (!from.has(ctx)) return kNoCtx;
  std::vector<std::string> names;  // from the root down, the root left out
  for (uint32_t c = ctx; c != 0 && c != kNoCtx; c = from.parent(c)) names.push_back(match_name(from, from.name(c)));
  std::reverse(names.begin(), names.end());
  // Depth first over the contexts of `in` named as the path is: where siblings share a name
  // (threads of one kind under the root), the first whose subtree holds the rest of the path.
  struct Level {
    std::vector<uint32_t> candidates;
    size_t next = 0;
  };
  std::vector<Level> levels;
  std::vector<uint32_t> kids;
  auto open = [&](uint32_t at) {
    Level l;
    in.children(at, kids);
    for (uint32_t k : kids)
      if (match_name(in, in.name(k)) == names[levels.size()]) l.candidates.push_back(k);
    if (ambiguous && l.candidates.size() > 1) *ambiguous = true;
    levels.push_back(std::move(l));
  };
  if (names.empty()) return 0;
  open(0);
  size_t tried = 0;
  while (!levels.empty()) {
    Level& l = levels.back();
    if (l.next == l.candidates.size() || ++tried > 100000) {
      levels.pop_back();
      if (tried > 100000) return kNoCtx;
      continue;
    }
    const uint32_t c = l.candidates[l.next++];
    if (levels.size() == names.size()) return c;
    open(c);
  }
  return kNoCtx;
}

std::vector<int> matching_metrics(const Experiment& e, const Experiment& base) {
  std::vector<int> out;
  for (const MetricView& m : e.metrics()) {
    int at = -1;
    for (size_t i = 0; i < base.metrics().size() && at < 0; ++i)
      if (base.metrics()[i].name == m.name) at = int(i);
    out.push_back(at);
  }
  return out;
}

namespace {
std::string function_key(const Experiment& e, uint32_t fn) {
  FlatRow r;
  r.name = e.function_name(fn);
  if (fn < e.meta().functions.size()) r.module = e.meta().functions[fn].module;
  return flat_key(e, FlatBy::Function, r);
}
}  // namespace

Matcher::Matcher(const Experiment& from, const Experiment& to) : from_(from), to_(to) {
  const auto& meta = to.meta();
  for (uint32_t i = 0; i < meta.modules.size(); ++i) modules_.try_emplace(module_key(to, i), i);
  for (uint32_t i = 0; i < meta.files.size(); ++i) {
    files_.try_emplace(meta.files[i].path, i);
    // A file name two files of `to` have names neither.
    auto [it, fresh] = fileNames_.try_emplace(base_name(meta.files[i].path), i);
    if (!fresh) it->second = db::kNone;
  }
  // The first function of a name in a module is the one its views key (Experiment folds a
  // function listed once per inline site into its first entry).
  for (uint32_t i = 0; i < meta.functions.size(); ++i) functions_.try_emplace(function_key(to, i), i);
  for (uint32_t k : to.children(0))
    if (to.kind(k) == NodeKind::Entry) entries_.try_emplace(to.name(k), k);
  maps_ = {[this](uint32_t m) { return module(m); }, [this](uint32_t f) { return file(f); },
           [this](uint32_t fn) { return function(fn); }};
}

uint32_t Matcher::module(uint32_t m) const {
  if (m >= from_.meta().modules.size()) return db::kNone;
  auto it = modules_.find(module_key(from_, m));
  return it == modules_.end() ? db::kNone : it->second;
}

uint32_t Matcher::file(uint32_t f) const {
  const auto& files = from_.meta().files;
  if (f >= files.size()) return db::kNone;
  if (auto it = files_.find(files[f].path); it != files_.end()) return it->second;
  auto it = fileNames_.find(base_name(files[f].path));
  return it == fileNames_.end() ? db::kNone : it->second;
}

uint32_t Matcher::function(uint32_t fn) const {
  if (fn >= from_.meta().functions.size()) return db::kNone;
  auto it = functions_.find(function_key(from_, fn));
  return it == functions_.end() ? db::kNone : it->second;
}

std::optional<uint64_t> Matcher::caller_key(uint64_t key) const {
  if (key & kEntryKey) {
    const uint32_t c = uint32_t(key);
    if (!from_.has(c)) return std::nullopt;
    auto it = entries_.find(from_.name(c));
    if (it == entries_.end()) return std::nullopt;
    return kEntryKey | it->second;
  }
  const uint32_t fn = function(uint32_t(key));
  if (fn == db::kNone) return std::nullopt;
  return fn;
}

uint64_t Matcher::named_in_to(uint64_t toKey) const {
  if (!(toKey & kEntryKey) || !to_.has(uint32_t(toKey))) return toKey;
  auto it = entries_.find(to_.name(uint32_t(toKey)));
  return it == entries_.end() ? toKey : kEntryKey | it->second;
}

std::optional<std::vector<uint64_t>> Matcher::caller_path(const std::vector<uint64_t>& path) const {
  std::vector<uint64_t> out;
  out.reserve(path.size());
  for (uint64_t k : path) {
    auto to = caller_key(k);
    if (!to) return std::nullopt;
    out.push_back(*to);
  }
  return out;
}

std::optional<std::vector<uint64_t>> Matcher::static_path(const std::vector<uint64_t>& path) const {
  return remap_static_path(path, maps_);
}

std::vector<CompareRow> compare_rows(const Experiment& a, const Experiment& b, const CompareOptions& o) {
  std::vector<CompareRow> out;
  if (o.metricA >= a.metrics().size() || o.metricB >= b.metrics().size()) return out;
  if (o.flat) flat(a, b, o, out);
  if (o.topDown) top_down(a, b, o, out);
  return out;
}

void print_comparison(const Experiment& a, const Experiment& b, const CompareOptions& o, std::ostream& os) {
  const auto rows = compare_rows(a, b, o);
  const std::string& metric = b.metrics().at(o.metricB).name;
  const double ta = a.inclusive(0, a.metrics().at(o.metricA)), tb = b.inclusive(0, b.metrics().at(o.metricB));
  if (o.format == ReportFormat::Json) {
    nlohmann::json j{{"baseline", a.dir().string()}, {"database", b.dir().string()}, {"metric", metric},
                     {"baseline_total", ta}, {"total", tb}, {"rows", nlohmann::json::array()}};
    for (const CompareRow& r : rows)
      j["rows"].push_back({{"section", r.section}, {"depth", r.depth}, {"name", r.name},
                           {"baseline_inclusive", r.aInc}, {"inclusive", r.bInc},
                           {"baseline_exclusive", r.aExc}, {"exclusive", r.bExc}});
    os << j.dump(1) << "\n";
    return;
  }
  if (o.format == ReportFormat::Csv) {
    os << "section,depth,name,baseline_inclusive,inclusive,baseline_exclusive,exclusive\n";
    for (const CompareRow& r : rows)
      os << r.section << ',' << r.depth << ',' << csv_field(r.name) << ',' << format_number(r.aInc) << ',' << format_number(r.bInc) << ','
         << format_number(r.aExc) << ',' << format_number(r.bExc) << '\n';
    return;
  }
  os << "# Database: " << b.dir().string() << " (" << b.meta().general.title << ")\n"
     << "# Baseline: " << a.dir().string() << " (" << a.meta().general.title << ")\n"
     << "# Metric:   " << metric << ", total " << format_number(tb) << " against " << format_number(ta) << " ("
     << (percent(ta, tb).empty() ? "the same" : percent(ta, tb)) << ")\n";
  std::string section;
  for (const CompareRow& r : rows) {
    const bool flatRow = r.section != "top-down";
    if (r.section != section) {
      section = r.section;
      os << "#\n# " << (flatRow ? "Flat view by " + section.substr(5) + " (exclusive), by the largest change"
                                : std::string("Calling contexts (inclusive), by the largest change"))
         << "\n#      Baseline           This         Change        %  Name\n";
    }
    const double va = flatRow ? r.aExc : r.aInc, vb = flatRow ? r.bExc : r.bInc;
    char buf[128];
    const std::string d = (vb - va > 0 ? "+" : "") + format_number(vb - va);
    std::snprintf(buf, sizeof buf, "%14s %14s %14s %8s  ", format_number(va).c_str(), format_number(vb).c_str(), d.c_str(),
                  percent(va, vb).c_str());
    os << buf << std::string(2 * std::min<uint32_t>(r.depth, 1000), ' ') << r.name << "\n";
  }
}

}  // namespace hpc::present
