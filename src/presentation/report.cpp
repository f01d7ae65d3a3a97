#include "presentation/report.hpp"
#include "presentation/trace_view.hpp"

#include "presentation/overview.hpp"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <ostream>
#include <map>
#include <optional>
#include <queue>
#include <tuple>
#include <unordered_map>

namespace hpc::present {

namespace {

std::string key_id(uint64_t key) {
  return (key & kEntryKey) ? "e" + std::to_string(uint32_t(key)) : "f" + std::to_string(key);
}

// The hottest contexts of the top-down tree as the CCT filters show it (views.hpp), best-first
// by inclusive value, printed in tree order at their depth in the filtered tree.
void top_down_filtered(const Experiment& e, const ReportOptions& o, std::vector<ReportRow>& out) {
  const MetricView& m = e.metrics()[o.metric];
  struct Node {
    uint32_t ctx, depth;
    bool leaf;
    std::vector<size_t> kids;  // chosen children, by index into `chosen`
  };
  std::vector<Node> chosen;
  std::priority_queue<std::tuple<double, uint32_t, size_t, uint32_t, bool>> frontier;  // (value, -order, parent, ctx, leaf)
  uint32_t order = 0;
  chosen.push_back({0, 0, false, {}});
  auto offer = [&](size_t parent) {
    if (chosen[parent].leaf) return;
    for (const FilteredChild& c : filtered_children(e, chosen[parent].ctx, o.filters))
      frontier.push({e.inclusive(c.ctx, m), UINT32_MAX - order++, parent, c.ctx, c.leaf});
  };
  offer(0);
  while (!frontier.empty() && chosen.size() < o.top) {
    auto [v, _, parent, c, leaf] = frontier.top();
    frontier.pop();
    if (v <= 0) break;
    chosen.push_back({c, chosen[parent].depth + 1, leaf, {}});
    chosen[parent].kids.push_back(chosen.size() - 1);
    offer(chosen.size() - 1);
  }
  std::vector<size_t> stack{0};
  while (!stack.empty()) {
    const size_t i = stack.back();
    stack.pop_back();
    const Node& n = chosen[i];
    // What the filters hide below a context shown becomes its own (exclusive) cost.
    const double moved =
        i == 0 ? 0.0 : absorbed_value(e, filter_absorbed(e, n.ctx, n.leaf, o.filters), [&](uint32_t c) { return e.inclusive(c, m); });
    out.push_back({"top-down", n.depth, std::to_string(n.ctx), e.name(n.ctx), e.inclusive(n.ctx, m), e.exclusive(n.ctx, m) + moved});
    for (auto it = n.kids.rbegin(); it != n.kids.rend(); ++it) stack.push_back(*it);  // chosen hottest first
  }
}

void top_down(const Experiment& e, const ReportOptions& o, std::vector<ReportRow>& out) {
  if (!o.filters.empty()) return top_down_filtered(e, o, out);
  const MetricView& m = e.metrics()[o.metric];
  // Depths from the parent's (tree order: a parent comes before its children), not by
  // walking to the root for each row: that is quadratic down a deep call chain.
  std::unordered_map<uint32_t, uint32_t> depth;
  for (uint32_t c : hottest_contexts(e, m, o.top)) {
    auto up = c == 0 ? depth.end() : depth.find(e.parent(c));
    const uint32_t d = up != depth.end() ? up->second + 1 : e.depth(c);
    depth[c] = d;
    out.push_back({"top-down", d, std::to_string(c), e.name(c), e.inclusive(c, m), e.exclusive(c, m)});
  }
}

// Rows chosen best-first, each named by its path of keys, in the order of a forest: every
// row right below its parent (the path without its last key), siblings in the order chosen
// (the hottest first).
std::vector<size_t> forest_order(const std::vector<const std::vector<uint64_t>*>& paths) {
  std::map<std::vector<uint64_t>, std::vector<size_t>> kids;
  for (size_t i = 0; i < paths.size(); ++i)
    kids[std::vector<uint64_t>(paths[i]->begin(), paths[i]->end() - 1)].push_back(i);
  std::vector<size_t> order, stack;
  auto pushKids = [&](const std::vector<uint64_t>& parent) {
    auto it = kids.find(parent);
    if (it == kids.end()) return;
    for (auto r = it->second.rbegin(); r != it->second.rend(); ++r) stack.push_back(*r);
  };
  pushKids({});
  while (!stack.empty()) {
    const size_t i = stack.back();
    stack.pop_back();
    order.push_back(i);
    pushKids(*paths[i]);
  }
  return order;
}

// Best-first over the callers tree, ranked by the exclusive value attributed to a path.
void bottom_up(const Experiment& e, const ReportOptions& o, std::vector<ReportRow>& out) {
  CallerIndex ci(e);
  size_t mi = o.metric;
  struct Item {
    double v;
    std::vector<uint64_t> path;
    Aggregate a;
    bool operator<(const Item& b) const { return v < b.v; }
  };
  std::priority_queue<Item> frontier;
  for (auto& a : ci.roots()) {
    double v = a.exc[mi];
    frontier.push({v, {a.key}, std::move(a)});
  }
  std::vector<Item> chosen;
  while (!frontier.empty() && chosen.size() < o.top) {
    Item it = frontier.top();
    frontier.pop();
    if (it.v <= 0) break;
    if (it.a.hasChildren)
      for (auto& k : ci.children(it.path)) {
        auto p = it.path;
        p.push_back(k.key);
        double v = k.exc[mi];
        frontier.push({v, std::move(p), std::move(k)});
      }
    chosen.push_back(std::move(it));
  }
  std::vector<const std::vector<uint64_t>*> paths;
  for (const Item& it : chosen) paths.push_back(&it.path);
  for (size_t i : forest_order(paths)) {
    auto& it = chosen[i];
    std::string id;
    for (auto k : it.path) id += (id.empty() ? "" : "/") + key_id(k);
    std::string name = ci.key_name(it.path.back());
    out.push_back({"bottom-up", uint32_t(it.path.size() - 1), id, name, it.a.inc[mi], it.a.exc[mi]});
  }
}

void flat(const Experiment& e, const ReportOptions& o, FlatBy by, std::vector<ReportRow>& out) {
  auto rows = flat_rows(e, by);
  sort_rows(rows, o.metric, /*byExclusive=*/true);
  for (size_t i = 0; i < rows.size() && i < o.top; ++i) {
    auto& r = rows[i];
    std::string id = by == FlatBy::Line || by == FlatBy::Loop ? std::to_string(r.file) + ":" + std::to_string(r.line)
                                                              : std::to_string(r.key);
    out.push_back({flat_section(by), 0, id, r.name, r.inc[o.metric], r.exc[o.metric]});
  }
}

// The time in each function over every trace line (a record holds until the next one's time,
// the last until the end of the traces; idle before a line's first record and at context 0).
// Returns the lines' count and span (ns), for the shares.
std::pair<size_t, uint64_t> trace_time(const Experiment& e, const ReportOptions& o, std::vector<ReportRow>* out) {
  auto tr = e.trace();
  if (!tr.ok() || !*tr) return {0, 0};
  const db::LazyTraceDb& t = **tr;
  const uint64_t t0 = t.minTimestamp(), t1 = std::max(t.maxTimestamp(), t.minTimestamp());
  size_t lines = 0;  // with --profiles, theirs alone
  for (size_t li = 0; li < t.size(); ++li) lines += e.profile_selected(t.line(li).profIndex());
  if (!out) return {lines, t1 - t0};
  constexpr uint32_t kIdle = UINT32_MAX, kNone = UINT32_MAX - 1, kUnknown = UINT32_MAX - 2;
  const uint32_t depth = o.traceDepth < 0 ? UINT32_MAX - 1 : uint32_t(o.traceDepth);
  std::unordered_map<uint32_t, uint32_t> keyOf;  // ctx -> function index or one of the above
  // With a query: only samples at the contexts it matches and below them count.
  const bool within = !o.queryText.empty();
  std::unordered_map<uint32_t, bool> inside;  // ctx -> in a match's subtree (matches: true)
  if (within) for_each_match(e, o.query, [&](const QueryMatch& m) { inside[m.ctx] = true; });
  auto counts = [&](uint32_t ctx) {
    if (!within) return true;
    if (ctx == 0 || !e.has(ctx)) return false;
    std::vector<uint32_t> walked;
    bool in = false;
    for (uint32_t a = ctx; a != 0 && a != kNoCtx; a = e.parent(a)) {
      if (auto it = inside.find(a); it != inside.end()) {
        in = it->second;
        break;
      }
      walked.push_back(a);
    }
    for (uint32_t w : walked) inside[w] = in;
    return in;
  };
  auto key = [&](uint32_t ctx) {
    if (ctx == 0) return kIdle;
    auto [it, fresh] = keyOf.try_emplace(ctx, kUnknown);
    if (fresh && e.has(ctx)) {
      const uint32_t at = context_at_depth(e, ctx, depth);
      const uint32_t fn = e.function_of(at);
      it->second = fn == db::kNone ? kNone : fn;
    }
    return it->second;
  };
  std::unordered_map<uint32_t, std::pair<uint64_t, uint64_t>> sums;  // key -> (all lines, most on one)
  std::unordered_map<uint32_t, uint64_t> line;
  for (size_t li = 0; li < t.size(); ++li) {
    const db::TraceLineView& l = t.line(li);
    if (!e.profile_selected(l.profIndex())) continue;
    line.clear();
    const uint64_t n = l.size();
    const uint64_t first = n ? std::clamp(l.time(0), t0, t1) : t1;
    if (first > t0 && !within) line[kIdle] += first - t0;
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t a = std::clamp(l.time(i), t0, t1);
      const uint64_t b = i + 1 < n ? std::clamp(l.time(i + 1), t0, t1) : t1;
      if (b > a && counts(l.ctx(i))) line[key(l.ctx(i))] += b - a;
    }
    for (const auto& [k, ns] : line) {
      auto& s = sums[k];
      s.first += ns;
      s.second = std::max(s.second, ns);
    }
    l.release();
  }
  std::vector<std::pair<uint32_t, std::pair<uint64_t, uint64_t>>> rows(sums.begin(), sums.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return a.second.first != b.second.first ? a.second.first > b.second.first : a.first < b.first;
  });
  if (rows.size() > o.top) rows.resize(o.top);
  for (const auto& [k, s] : rows) {
    const std::string id = k == kIdle ? "idle" : k == kNone ? "none" : k == kUnknown ? "unknown" : "f" + std::to_string(k);
    const std::string name = k == kIdle ? "<idle>" : k == kNone ? "<no function>" : k == kUnknown ? "<unknown context>"
                                                                                   : e.function_name(k);
    out->push_back({"trace", 0, id, name, double(s.first) / 1e9, double(s.second) / 1e9});
  }
  return {lines, t1 - t0};
}

// The contexts a call path query matches, hottest first, each named by its path: the entry
// point and the function contexts above it, then its own name.
void query(const Experiment& e, const ReportOptions& o, std::vector<ReportRow>& out) {
  const MetricView& m = e.metrics()[o.metric];
  std::vector<QueryMatch> found = query_contexts(e, o.query);
  std::vector<std::pair<double, size_t>> order;
  order.reserve(found.size());
  for (size_t i = 0; i < found.size(); ++i) order.push_back({-e.inclusive(found[i].ctx, m), i});
  const size_t n = std::min(o.top, order.size());
  std::partial_sort(order.begin(), order.begin() + n, order.end());
  for (size_t k = 0; k < n; ++k) {
    const QueryMatch& q = found[order[k].second];
    out.push_back({"query", q.outermost ? 0u : 1u, std::to_string(q.ctx), match_path_name(e, q.ctx), e.inclusive(q.ctx, m),
                   e.exclusive(q.ctx, m)});
  }
}

// hpcviewer's flat view (the static structure: modules, files, functions, loops, lines,
// inlined code, call sites), best-first by inclusive value: a row's children are looked at
// once it is chosen, and printed as a forest, siblings hottest first.
void structure(const Experiment& e, const ReportOptions& o, std::vector<ReportRow>& out) {
  StaticTree st(e, {o.metric});
  struct Item {
    double v;
    size_t seq;  // ties: the order rows came (hottest first, then path)
    StaticRow r;
    bool operator<(const Item& b) const { return v != b.v ? v < b.v : seq > b.seq; }
  };
  std::priority_queue<Item> frontier;
  size_t seq = 0;
  for (auto& r : st.rows({})) {
    const double v = r.inc[0];
    frontier.push({v, seq++, std::move(r)});
  }
  std::vector<StaticRow> chosen;
  while (!frontier.empty() && chosen.size() < o.top) {
    Item it = frontier.top();
    frontier.pop();
    if (it.v <= 0) break;
    if (it.r.hasChildren)
      for (auto& k : st.rows(it.r.path)) {
        const double v = k.inc[0];
        frontier.push({v, seq++, std::move(k)});
      }
    chosen.push_back(std::move(it.r));
  }
  std::vector<const std::vector<uint64_t>*> paths;
  for (const StaticRow& r : chosen) paths.push_back(&r.path);
  for (size_t i : forest_order(paths)) {
    const StaticRow& r = chosen[i];
    std::string id;
    for (uint64_t k : r.path) id += (id.empty() ? "" : "/") + static_key_string(k);
    out.push_back({"structure", uint32_t(r.path.size() - 1), id, r.name, r.inc[0], r.exc[0]});
  }
}

bool gpu_metric(const std::string& n) {
  for (const char* p : {"GKER", "GMEM", "GMSET", "GXCOPY", "GICOPY", "GSYNC", "GPUOP", "GINS", "GSAMP"})
    if (n.rfind(p, 0) == 0) return true;
  return false;
}

void overview_rows(const Experiment& e, const ReportOptions& o, std::vector<ReportRow>& out) {
  const int mi = overview_metric(e, o.metric);
  const Overview ov = overview(e, mi < 0 ? o.metric : size_t(mi), o.top);
  if (mi >= 0)
    for (size_t k = 0; k < kWorkKinds; ++k) {
      const auto& kind = ov.kinds[k];
      const std::string key = work_kind_key(WorkKind(k));
      out.push_back({"overview", 0, key, work_kind_name(WorkKind(k)), kind.value, kind.value});
      for (const auto& [where, v] : kind.where) out.push_back({"overview", 1, key + "/" + where, where, v, v});
    }
  for (const auto& [what, v] : ov.gpu) out.push_back({"gpu-operations", 0, what, what, v, v});
}

constexpr uint32_t kMaxIndent = 1000;  // text rows: indentation levels at most


}  // namespace

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string format_number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::vector<LeakRow> leak_rows(const Experiment& e, size_t top) {
  std::vector<LeakRow> out;
  const int alloc = e.find_metric("Bytes Allocated"), freed = e.find_metric("Bytes Freed");
  if (alloc < 0 || freed < 0 || e.metrics()[size_t(alloc)].name != "Bytes Allocated") return out;
  for (const FlatRow& r : flat_rows(e, FlatBy::Function, {size_t(alloc), size_t(freed)}))
    if (r.exc[0] - r.exc[1] > 0) out.push_back({r.name, r.exc[0] - r.exc[1], r.exc[0]});
  std::sort(out.begin(), out.end(), [](const LeakRow& a, const LeakRow& b) {
    return a.leaked != b.leaked ? a.leaked > b.leaked : a.name < b.name;
  });
  if (out.size() > top) out.resize(top);
  return out;
}

int overview_metric(const Experiment& e, size_t metric) {
  // Bytes (-e IO, -e MEMLEAK) say nothing of where the time went.
  auto bytes = [](const std::string& n) { return n.find("Bytes ") != std::string::npos; };
  if (metric < e.metrics().size() && !gpu_metric(e.metrics()[metric].name) && !bytes(e.metrics()[metric].name))
    return int(metric);
  for (size_t i = 0; i < e.metrics().size(); ++i) {
    const std::string& n = e.metrics()[i].name;
    if (!gpu_metric(n) && !bytes(n) && (n.find("TIME") != std::string::npos || n.find("(sec)") != std::string::npos) &&
        e.inclusive(0, e.metrics()[i]) > 0)
      return int(i);
  }
  return -1;
}

std::vector<ReportRow> report_rows(const Experiment& e, const ReportOptions& o) {
  std::vector<ReportRow> out;
  if (o.metric >= e.metrics().size()) return out;
  switch (o.view) {
  case ReportView::Summary:
    top_down(e, o, out);
    flat(e, o, FlatBy::Function, out);
    break;
  case ReportView::TopDown: top_down(e, o, out); break;
  case ReportView::BottomUp: bottom_up(e, o, out); break;
  case ReportView::Flat: flat(e, o, o.by, out); break;
  case ReportView::Structure: structure(e, o, out); break;
  case ReportView::Overview: overview_rows(e, o, out); break;
  case ReportView::Query: query(e, o, out); break;
  case ReportView::Trace: trace_time(e, o, &out); break;
  }
  return out;
}

QueryTotals query_totals(const Experiment& e, const PathQuery& q, const MetricView& m) {
  QueryTotals t;
  for_each_match(e, q, [&](const QueryMatch& x) {
    ++t.matched;
    if (x.outermost) ++t.outermost, t.inclusive += e.inclusive(x.ctx, m);
  });
  return t;
}

void print_report(const Experiment& e, const ReportOptions& o, std::ostream& os) {
  const int overviewMetric = overview_metric(e, o.metric);
  const bool overviewView = o.view == ReportView::Overview;
  const MetricView& m = e.metrics().at(overviewView && overviewMetric >= 0 ? size_t(overviewMetric) : o.metric);
  double total = e.inclusive(0, m);
  auto pct = [&](double v) { return total != 0 ? 100.0 * v / total : 0.0; };
  // Trace rows: shares of all lines' time (inclusive) and of one line's (exclusive).
  const std::pair<size_t, uint64_t> traceExtent = o.view == ReportView::Trace ? trace_time(e, o, nullptr) : std::pair<size_t, uint64_t>{0, 0};
  const size_t traceLines = traceExtent.first;
  const uint64_t traceSpan = traceExtent.second;
  auto share = [&](const ReportRow& r, bool exc) {
    if (r.section != "trace") return pct(exc ? r.exc : r.inc);
    const double span = double(traceSpan) / 1e9 * (exc ? 1.0 : double(traceLines));
    return span > 0 ? 100.0 * (exc ? r.exc : r.inc) / span : 0.0;
  };
  auto rows = report_rows(e, o);
  std::optional<Overview> ov;
  if (overviewView || (o.view == ReportView::Summary && o.format == ReportFormat::Text && overviewMetric >= 0))
    ov = overview(e, overviewMetric >= 0 ? size_t(overviewMetric) : o.metric, o.top);

  if (o.format == ReportFormat::Json) {
    // The document nlohmann::json would print (keys in order, one space a level), a row at a
    // time: one tree of all rows took about 1.3 KB a row (400 MB for 300,000).
    auto str = [](const std::string& v) { return nlohmann::json(v).dump(); };
    os << "{\n \"database\": " << str(e.dir().string()) << ",\n \"metric\": " << str(m.name) << ",\n \"rows\": [";
    for (size_t i = 0; i < rows.size(); ++i) {
      const ReportRow& r = rows[i];
      const nlohmann::json row = {{"section", r.section}, {"depth", r.depth}, {"id", r.id}, {"name", r.name},
                                  {"inclusive", r.inc}, {"inclusive_percent", share(r, false)},
                                  {"exclusive", r.exc}, {"exclusive_percent", share(r, true)}};
      const std::string text = row.dump(1);
      os << (i ? ",\n  " : "\n  ");
      for (char c : text) {
        os << c;
        if (c == '\n') os << "  ";  // the row's lines two levels in
      }
    }
    os << (rows.empty() ? "]" : "\n ]") << ",\n \"title\": " << str(e.meta().general.title)
       << ",\n \"total\": " << nlohmann::json(total).dump();
    if (!e.selected_profiles().empty()) os << ",\n \"profiles\": " << nlohmann::json(e.selected_profiles()).dump();
    if (overviewView) {
      os << ",\n \"verdict\": " << str(ov->verdict) << ",\n \"reason\": " << str(ov->reason);
      if (ov->ipc) os << ",\n \"instructions_per_cycle\": " << nlohmann::json(*ov->ipc).dump();
      if (ov->mpiSpread)
        os << ",\n \"mpi_share_by_profile\": "
           << nlohmann::json({{"profiles", ov->mpiSpread->profiles}, {"min", ov->mpiSpread->min},
                              {"max", ov->mpiSpread->max}, {"min_profile", ov->mpiSpread->minProfile},
                              {"max_profile", ov->mpiSpread->maxProfile}}).dump();
    }
    os << "\n}\n";
    return;
  }
  if (o.format == ReportFormat::Csv) {
    os << "section,depth,id,name,inclusive,inclusive_percent,exclusive,exclusive_percent\n";
    for (auto& r : rows)
      os << r.section << ',' << r.depth << ',' << csv_field(r.id) << ',' << csv_field(r.name) << ','
         << format_number(r.inc) << ',' << format_number(share(r, false)) << ',' << format_number(r.exc) << ','
         << format_number(share(r, true)) << '\n';
    return;
  }
  os << "# Database: " << e.dir().string() << " (" << e.meta().general.title << ")\n"
     << "# Metric:   " << m.name << ", total " << format_number(total) << "\n"
     << "# Profiles: " << (e.profiles().size() - 1) << ", contexts: " << e.num_contexts() << "\n";
  if (!e.selected_profiles().empty()) {
    os << "# Selected: " << e.selected_profiles().size() << " of them, their values alone:";
    for (size_t i = 0; i < e.selected_profiles().size() && i < 8; ++i) os << (i ? ", " : " ") << e.profile_label(e.selected_profiles()[i]);
    os << (e.selected_profiles().size() > 8 ? ", ...\n" : "\n");
  }
  if (ov) {
    // Where the time went by kind of work; the places in each with --view overview.
    const double all = ov->total;
    auto share = [&](double v) { return all != 0 ? 100.0 * v / all : 0.0; };
    if (overviewMetric >= 0) {
      os << "#\n# Where the time went (" << e.metrics()[size_t(overviewMetric)].name << ", by kind of work)\n"
         << "#        Time        %  Kind" << (overviewView ? " / where" : "") << "\n";
      for (size_t k = 0; k < kWorkKinds; ++k) {
        const auto& kind = ov->kinds[k];
        if (kind.value == 0 && k != 0) continue;
        char buf[96];
        std::snprintf(buf, sizeof buf, "%14s %7.2f%%  ", format_number(kind.value).c_str(), share(kind.value));
        os << buf << work_kind_name(WorkKind(k))
           << (WorkKind(k) == WorkKind::Idle ? " (waits of MPI and GPU runtimes' threads, threads that only waited; not in the verdict)" : "")
           << "\n";
        if (!overviewView) continue;
        for (const auto& [where, v] : kind.where) {
          std::snprintf(buf, sizeof buf, "%14s %7.2f%%  ", format_number(v).c_str(), share(v));
          os << buf << "  " << where << "\n";
        }
      }
      if (ov->ipc) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.2f", *ov->ipc);
        os << "# Instructions per cycle: " << buf << "\n";
      }
      if (ov->mpiSpread) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "# MPI's share of each profile's time: %.1f%% (%s) to %.1f%% (%s), %zu profiles\n",
                      100 * ov->mpiSpread->min, ov->mpiSpread->minProfile.c_str(), 100 * ov->mpiSpread->max,
                      ov->mpiSpread->maxProfile.c_str(), ov->mpiSpread->profiles);
        os << buf;
      }
    }
    if (!ov->gpu.empty()) {
      os << "#\n# The GPU's operations (seconds)\n";
      for (const auto& [what, v] : ov->gpu) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%14s  ", format_number(v).c_str());
        os << buf << what << "\n";
      }
    }
    if (overviewMetric >= 0) os << "# Verdict: " << ov->verdict << ": " << ov->reason << "\n";
  }
  // -e MEMLEAK's measurements: what was allocated and never freed, by allocating function.
  if (o.view == ReportView::Summary || overviewView) {
    if (auto leaks = leak_rows(e, o.top); !leaks.empty()) {
      os << "#\n# Not freed (Bytes Allocated - Bytes Freed, by allocating function; drawn allocations only)\n"
         << "#    Not freed    Allocated  Function\n";
      for (const LeakRow& l : leaks) {
        char buf[96];
        std::snprintf(buf, sizeof buf, "%14s %12s  ", format_number(l.leaked).c_str(), format_number(l.allocated).c_str());
        os << buf << l.name << "\n";
      }
    }
  }
  if (overviewView) return;
  if (o.view == ReportView::Query) {
    // How many contexts match, and what the outermost ones hold: each cost once.
    const QueryTotals t = query_totals(e, o.query, m);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f%%", pct(t.inclusive));
    os << "#\n# Query: " << o.queryText << ": " << t.matched << " contexts, " << t.outermost
       << " outermost (the others below one of them, indented); inclusive of the outermost "
       << format_number(t.inclusive) << " = " << buf << " of the total\n";
  }
  std::string section;
  for (auto& r : rows) {
    if (r.section != section) {
      section = r.section;
      const char* title = section == "top-down" ? "Hottest call paths (top-down, by inclusive)"
                          : section == "bottom-up" ? "Hottest functions and their callers (bottom-up, by exclusive)"
                          : section == "structure"
                              ? "Static structure (hpcviewer's flat view: modules, files, functions, loops, lines; by inclusive)"
                          : section == "query" ? "Contexts the query matches (by inclusive; entry point > functions > the context)"
                              : nullptr;
      if (section == "trace") {
        char d[64];
        std::snprintf(d, sizeof d, o.traceDepth < 0 ? "the innermost function" : "the function at call depth %d",
                      o.traceDepth);
        os << "#\n# Time in the traces by " << d << " (" << traceLines << " lines over "
           << format_number(double(traceSpan) / 1e9) << " s; % of all lines' time, and of one line's)";
        if (!o.queryText.empty()) os << ", only at the contexts " << o.queryText << " matches and below them";
        os << "\n"
           << "#  Line-seconds        %  Most on a line       %  Function\n";
      } else {
        os << "#\n# " << (title ? std::string(title) : "Flat view by " + section.substr(5) + " (by exclusive)") << "\n"
           << "#    Inclusive        %     Exclusive        %  " << (section == "bottom-up" ? "Function <- callers" : "Name")
           << "\n";
      }
    }
    char buf[96];
    std::snprintf(buf, sizeof buf, "%14s %7.2f%% %13s %7.2f%%  ", format_number(r.inc).c_str(), share(r, false),
                  format_number(r.exc).c_str(), share(r, true));
    // Two spaces a level, down to kMaxIndent levels; deeper rows say their depth instead (down
    // a call chain hundreds of thousands deep the indentation made the text quadratic).
    os << buf << std::string(2 * std::min(r.depth, kMaxIndent), ' ');
    if (r.depth > kMaxIndent) os << "[depth " << r.depth << "] ";
    os << (r.depth && section == "bottom-up" ? "<- " : "") << r.name;
    if (section == "top-down" || section == "query") os << "  [" << r.id << "]";
    os << "\n";
  }
}

}  // namespace hpc::present
