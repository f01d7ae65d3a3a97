#include "presentation/server/api.hpp"

#include "presentation/compare.hpp"

#include "presentation/overview.hpp"
#include "presentation/report.hpp"

#include "presentation/trace_view.hpp"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>
#include <unordered_set>
#include <unistd.h>
#include <cstdio>

namespace hpc::present {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Not "application/json" exactly: httplib compresses that type for browsers, holding a
// compressor's state (MBs for brotli) per reply; over a local or tunnelled link it is not
// worth it.
constexpr const char* kJson = "application/json; charset=utf-8";
constexpr size_t kPiece = 16u << 10;  // a streamed reply is written this much at a time

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }
Reply json_reply(const json& j, int status = 200) { return {status, kJson, dump(j), {}}; }
Reply error(int status, const std::string& what) { return json_reply(json{{"error", what}}, status); }

// A parameter as an unsigned number in [0, max]; `def` when absent.
Expected<uint64_t> number(const Params& q, const char* key, uint64_t def, uint64_t max) {
  auto it = q.find(key);
  if (it == q.end()) return def;
  const std::string& s = it->second;
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size())
    return Status::error(std::string("parameter '") + key + "' must be an unsigned integer, got '" + s.substr(0, 40) + "'");
  if (v > max) return Status::error(std::string("parameter '") + key + "' is " + s + ", at most " + std::to_string(max));
  return v;
}

std::string text(const Params& q, const char* key, const std::string& def = "") {
  auto it = q.find(key);
  return it == q.end() ? def : it->second;
}

// "metrics=0,2": indices into Experiment::metrics(); all of them when absent.
Expected<std::vector<size_t>> metric_list(const Experiment& e, const Params& q) {
  std::vector<size_t> out;
  auto it = q.find("metrics");
  if (it == q.end() || it->second.empty()) {
    for (size_t i = 0; i < e.metrics().size(); ++i) out.push_back(i);
    return out;
  }
  std::stringstream ss(it->second);
  std::string item;
  while (std::getline(ss, item, ',')) {
    int m = e.find_metric(item);
    if (m < 0) return Status::error("no metric '" + item.substr(0, 60) + "'");
    if (out.size() >= 1024) return Status::error("too many metrics");
    out.push_back(size_t(m));
  }
  return out;
}

json metric_header(const Experiment& e, const std::vector<size_t>& ms) {
  json a = json::array();
  for (size_t m : ms)
    a.push_back({{"index", m}, {"name", e.metrics()[m].name}, {"total", e.inclusive(0, e.metrics()[m])}});
  return a;
}

json stats_json(const StatValues& s) {
  json j{{"sum", s.sum}};
  if (s.count) j["count"] = *s.count;
  if (s.mean) j["mean"] = *s.mean;
  if (s.stddev) j["stddev"] = *s.stddev;
  if (s.min) j["min"] = *s.min;
  if (s.max) j["max"] = *s.max;
  return j;
}

std::string key_string(uint64_t key) {
  return (key & kEntryKey) ? "e" + std::to_string(uint32_t(key)) : "f" + std::to_string(key);
}

Expected<std::vector<uint64_t>> parse_key_path(const std::string& s) {
  std::vector<uint64_t> out;
  if (s.empty()) return out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, '/')) {
    if (out.size() >= kMaxPathKeys) return Status::error("bottom-up path longer than " + std::to_string(kMaxPathKeys));
    uint64_t v = 0;
    if (item.size() < 2 || (item[0] != 'f' && item[0] != 'e'))
      return Status::error("bottom-up path element '" + item.substr(0, 40) + "' must be f<function> or e<context>");
    auto [p, ec] = std::from_chars(item.data() + 1, item.data() + item.size(), v);
    if (ec != std::errc() || p != item.data() + item.size() || v > UINT32_MAX)
      return Status::error("bottom-up path element '" + item.substr(0, 40) + "' is not a number");
    out.push_back(item[0] == 'e' ? (kEntryKey | v) : v);
  }
  return out;
}

// {head..., "member": [row(0), ..., row(n-1)]}, written a piece at a time: a reply of
// thousands of rows is never held whole (as a json tree it costs ~10x its text).
template <typename RowJson>
Reply stream_array(json head, std::string member, size_t n, RowJson rowJson) {
  Reply r;
  r.stream = [head = std::move(head), member = std::move(member), n, rowJson = std::move(rowJson)](const Writer& write) {
    std::string buf = dump(head);
    buf.pop_back();  // the closing brace
    buf += (buf.size() > 1 ? ",\"" : "\"") + member + "\":[";
    for (size_t i = 0; i < n; ++i) {
      if (i) buf += ',';
      buf += dump(rowJson(i));
      if (buf.size() < kPiece) continue;
      if (!write(buf)) return false;
      buf.clear();
    }
    buf += "]}";
    return write(buf);
  };
  return r;
}

// A list of contexts, `{"ctx":C,"name":N}` each, written a piece at a time (a path down a
// deep call chain has hundreds of thousands: as a json tree it held 20x its text).
bool write_contexts(const Experiment& e, const std::vector<uint32_t>& ctxs, const Writer& write) {
  std::string buf = "[";
  for (size_t i = 0; i < ctxs.size(); ++i) {
    buf += i ? ",{\"ctx\":" : "{\"ctx\":";
    buf += std::to_string(ctxs[i]);
    buf += ",\"name\":";
    buf += dump(json(e.name(ctxs[i])));
    buf += '}';
    if (buf.size() < kPiece) continue;
    if (!write(buf)) return false;
    buf.clear();
  }
  buf += ']';
  return write(buf);
}

// Paths longer than this are streamed (only deep call chains have them); shorter ones are
// sent whole, as any small reply.
constexpr size_t kStreamPath = 1024;

// A JSON reply whose body `body` writes: streamed when `large`, else held whole.
Reply json_body(bool large, std::function<bool(const Writer&)> body) {
  Reply r;
  r.contentType = kJson;
  if (large) {
    r.stream = std::move(body);
  } else {
    body([&](std::string_view s) {
      r.body += s;
      return true;
    });
  }
  return r;
}

// The trace.db and time range [t0, t1) of a trace request (default: the whole trace), or
// the error reply.
struct TraceRange {
  const db::LazyTraceDb* trace = nullptr;
  uint64_t t0 = 0, t1 = 0;
};
std::optional<Reply> trace_range(const Experiment& e, const Params& q, TraceRange& out) {
  auto tr = e.trace();
  if (!tr.ok()) return error(500, tr.status().message());
  if (!*tr) return error(404, "the database has no trace.db");
  out.trace = *tr;
  auto t0 = number(q, "t0", out.trace->minTimestamp(), UINT64_MAX);
  auto t1 = number(q, "t1", out.trace->maxTimestamp() + 1, UINT64_MAX);
  for (auto* v : {&t0, &t1})
    if (!v->ok()) return error(400, v->status().message());
  out.t0 = *t0, out.t1 = *t1;
  return std::nullopt;
}

}  // namespace

Api::Api(const Experiment& e, const Experiment* base)
    : e_(e), base_(base), baseMetric_(base ? matching_metrics(e, *base) : std::vector<int>()),
      match_(base ? std::make_unique<const Matcher>(e, *base) : nullptr) {}

Api::BaseColumns Api::base_columns(const std::vector<size_t>& ms) const {
  BaseColumns c;
  c.at.assign(ms.size(), SIZE_MAX);
  for (size_t i = 0; i < ms.size(); ++i)
    if (const int b = baseMetric_[ms[i]]; b >= 0) c.at[i] = c.metrics.size(), c.metrics.push_back(size_t(b));
  return c;
}

std::pair<std::vector<double>, std::vector<double>> Api::spread(const BaseColumns& c, const std::vector<double>& inc,
                                                                const std::vector<double>& exc) {
  std::pair<std::vector<double>, std::vector<double>> out{std::vector<double>(c.at.size(), 0.0), std::vector<double>(c.at.size(), 0.0)};
  for (size_t i = 0; i < c.at.size(); ++i)
    if (c.at[i] != SIZE_MAX) out.first[i] = inc[c.at[i]], out.second[i] = exc[c.at[i]];
  return out;
}

std::shared_ptr<Api::BaseValues> Api::base_flat(FlatBy by, const std::vector<size_t>& ms) const {
  // The baseline's rows by name (a key several rows have sums them), the asked metrics it has.
  auto out = std::make_shared<BaseValues>();
  if (!base_) return out;
  const BaseColumns c = base_columns(ms);
  if (c.metrics.empty()) return out;
  for (const FlatRow& r : flat_rows(*base_, by, c.metrics)) {
    auto [inc, exc] = spread(c, r.inc, r.exc);
    auto [it, fresh] = out->try_emplace(flat_key(*base_, by, r), std::move(inc), std::move(exc));
    if (!fresh)
      for (size_t i = 0; i < ms.size(); ++i) it->second.first[i] += inc[i], it->second.second[i] += exc[i];
  }
  return out;
}

Reply Api::handle(const std::string& endpoint, const Params& q) {
  Reply r = dispatch(endpoint, q);
  if (!r.stream) done();
  return r;
}

void Api::done() const {
  e_.release_pages();  // what the request touched in the mapped files leaves the process
}

Reply Api::dispatch(const std::string& endpoint, const Params& q) {
  if (endpoint == "info") return info();
  if (endpoint == "children") return children(q);
  if (endpoint == "context") return context(q);
  if (endpoint == "bottom-up") return bottom_up(q);
  if (endpoint == "flat") return flat(q);
  if (endpoint == "structure") return structure(q);
  if (endpoint == "query") return query(q);
  if (endpoint == "overview") return overview(q);
  if (endpoint == "profiles") return profiles();
  if (endpoint == "profile-values") return profile_values(q);
  if (endpoint == "trace") return trace(q);
  if (endpoint == "trace-sample") return trace_sample(q);
  if (endpoint == "trace-depth") return trace_depth(q);
  if (endpoint == "trace-lines") return trace_lines();
  if (endpoint == "trace-blame") return trace_blame(q);
  if (endpoint == "source") return source(q);
  return error(404, "no endpoint /api/" + endpoint.substr(0, 60));
}

Reply Api::info() {
  const auto& meta = e_.meta();
  json ms = json::array();
  for (size_t i = 0; i < e_.metrics().size(); ++i) {
    const MetricView& m = e_.metrics()[i];
    // The statistics over the profiles hpcprof -M stats kept (hpcviewer's :Mean, :Min ... metrics).
    json st = json::array();
    if (m.inc.count != kNoMetric) st.push_back("mean");
    if (m.inc.count != kNoMetric && m.inc.sumSq != kNoMetric) st.push_back("stddev"), st.push_back("cv");
    if (m.inc.min != kNoMetric) st.push_back("min");
    if (m.inc.max != kNoMetric) st.push_back("max");
    ms.push_back({{"index", i}, {"name", m.name}, {"total", e_.inclusive(0, m)},
                  {"hasExclusive", m.exc.sum != kNoMetric}, {"stats", st}});
  }
  json j{{"title", meta.general.title},
         {"description", meta.general.description},
         {"metrics", ms},
         {"defaultMetric", e_.default_metric()},
         {"contexts", e_.num_contexts()},
         {"profiles", e_.profiles().size() - 1},
         {"functions", meta.functions.size()},
         {"files", meta.files.size()}};
  std::error_code ec;
  j["hasTrace"] = fs::exists(e_.dir() / "trace.db", ec);
  if (base_) {
    json idx = json::array(), totals = json::array();
    for (size_t i = 0; i < e_.metrics().size(); ++i) {
      const int b = baseMetric_[i];
      idx.push_back(b);
      totals.push_back(b >= 0 ? json(base_->inclusive(0, base_->metrics()[size_t(b)])) : json(nullptr));
    }
    j["baseline"] = {{"title", base_->meta().general.title}, {"dir", base_->dir().string()}, {"metrics", idx},
                     {"totals", totals}};
  }
  return json_reply(j);
}

namespace {

// `profiles`: profile.db rows (1 and up; the summary is 0), as "1,3,5-8"; empty when absent.
Expected<std::vector<uint32_t>> profile_list(const Experiment& e, const Params& q) {
  return parse_profile_list(text(q, "profiles", ""), e.profiles().size(), "parameter 'profiles'");
}

}  // namespace

namespace {

// `filter`: hpcviewer's CCT filters as JSON, [{"pattern": GLOB, "mode": "self" | "descendants"
// | "all"}, ...]; none when absent.
Expected<std::vector<CctFilter>> filter_list(const Params& q) {
  std::vector<CctFilter> out;
  const std::string text = q.count("filter") ? q.at("filter") : "";
  if (text.empty()) return out;
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_array() || j.size() > 64)
    return Status::error("parameter 'filter' must be a JSON array of at most 64 {\"pattern\", \"mode\"}");
  for (const json& f : j) {
    CctFilter c;
    if (!f.is_object() || !f.contains("pattern") || !f["pattern"].is_string() || !f.contains("mode") ||
        !f["mode"].is_string() || !parse_filter_mode(f["mode"].get<std::string>(), c.mode) ||
        f["pattern"].get<std::string>().size() > 1024)
      return Status::error("parameter 'filter': each filter is {\"pattern\": GLOB, \"mode\": \"self\" | \"descendants\" | \"all\"}");
    c.pattern = f["pattern"].get<std::string>();
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

Reply Api::children(const Params& q) {
  auto ctx = number(q, "ctx", 0, UINT32_MAX);
  auto ms = metric_list(e_, q);
  auto top = number(q, "top", kMaxRows, kMaxRows);
  auto profs = profile_list(e_, q);
  auto filters = filter_list(q);
  if (!filters.ok()) return error(400, filters.status().message());
  const std::string statsText = text(q, "stats", "0");
  if (statsText != "0" && statsText != "1") return error(400, "parameter 'stats' must be 0 or 1");
  const bool withStats = statsText == "1";
  if (!ctx.ok()) return error(400, ctx.status().message());
  if (!ms.ok()) return error(400, ms.status().message());
  if (!top.ok()) return error(400, top.status().message());
  if (!profs.ok()) return error(400, profs.status().message());
  if (!e_.has(uint32_t(*ctx))) return error(404, "no context " + std::to_string(*ctx));
  const MetricView* sortBy = ms->empty() ? nullptr : &e_.metrics()[ms->front()];
  auto kids = std::make_shared<std::vector<uint32_t>>();
  auto leaves = std::make_shared<std::unordered_set<uint32_t>>();  // children hidden by a filter
  auto selected = std::make_shared<std::vector<uint32_t>>(std::move(*profs));
  json head{{"ctx", *ctx}, {"name", e_.name(uint32_t(*ctx))}, {"metrics", metric_header(e_, *ms)}};
  if (!filters->empty()) {
    // The children as the filters show them, hottest first as below.
    std::vector<std::pair<double, uint32_t>> v;
    for (const FilteredChild& c : filtered_children(e_, uint32_t(*ctx), *filters, kMaxRows)) {
      if (c.leaf) leaves->insert(c.ctx);
      const double x = !sortBy ? 0.0
                       : selected->empty() ? e_.inclusive(c.ctx, *sortBy)
                                           : e_.profiles_value(*selected, c.ctx, sortBy->incProp);
      v.push_back({x, c.ctx});
    }
    std::stable_sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.first > b.first; });
    for (auto& [_, k] : v) kids->push_back(k);
  }
  if (selected->empty()) {
    if (filters->empty()) *kids = sortBy ? sorted_children(e_, uint32_t(*ctx), *sortBy) : e_.children(uint32_t(*ctx));
  } else {
    // The thread view: values of the chosen profiles alone, summed (hpcviewer's), and their
    // totals for the percentages.
    if (filters->empty()) {
      std::vector<std::pair<double, uint32_t>> v;
      for (uint32_t k : e_.children(uint32_t(*ctx)))
        v.push_back({sortBy ? e_.profiles_value(*selected, k, sortBy->incProp) : 0.0, k});
      std::stable_sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.first > b.first; });
      for (auto& [_, k] : v) kids->push_back(k);
    }
    json totals = json::array();
    for (size_t m : *ms) {
      double t = e_.profiles_value(*selected, 0, e_.metrics()[m].incProp);
      if (t == 0)
        for (uint32_t k : e_.children(0)) t += e_.profiles_value(*selected, k, e_.metrics()[m].incProp);
      totals.push_back(t);
    }
    head["profiles"] = *selected;
    head["totals"] = totals;
  }
  head["total"] = kids->size();
  // With a baseline: its context at the same path of names, and its children by name.
  auto baseKids = std::make_shared<std::unordered_map<std::string, uint32_t>>();
  const bool withBase = base_ && selected->empty();
  bool ambiguous = false;
  if (withBase) {
    const uint32_t at = matching_context(e_, uint32_t(*ctx), *base_, &ambiguous);
    if (at != kNoCtx)
      for (uint32_t k : base_->children(at)) baseKids->try_emplace(match_name(*base_, base_->name(k)), k);
  }
  return stream_array(std::move(head), "children", std::min<size_t>(kids->size(), *top),
                      [&e = e_, kids, leaves, ms = *ms, selected, withStats, base = withBase ? base_ : nullptr, baseKids,
                       &baseMetric = baseMetric_, ctx = uint32_t(*ctx), ambiguous, filters = *filters](size_t i) {
                        uint32_t k = (*kids)[i];
                        json inc = json::array(), exc = json::array();
                        // What the filters hide below the row becomes its own (exclusive) cost.
                        const FilterAbsorbed hidden = filter_absorbed(e, k, leaves->count(k) != 0, filters);
                        const bool absorbs = !hidden.own.empty() || !hidden.whole.empty();
                        for (size_t m : ms) {
                          const MetricView& mv = e.metrics()[m];
                          auto inclusive = [&](uint32_t c) {
                            return selected->empty() ? e.inclusive(c, mv) : e.profiles_value(*selected, c, mv.incProp);
                          };
                          const double moved = absorbs ? absorbed_value(e, hidden, inclusive) : 0.0;
                          if (selected->empty()) {
                            inc.push_back(e.inclusive(k, mv)), exc.push_back(e.exclusive(k, mv) + moved);
                          } else {
                            inc.push_back(e.profiles_value(*selected, k, mv.incProp));
                            exc.push_back(e.profiles_value(*selected, k, mv.excProp) + moved);
                          }
                        }
                        auto [file, line] = e.source_of(k);
                        // With filters, whether any child is left to show.
                        const bool hasChildren = !leaves->count(k) && e.has_children(k) &&
                                                 (filters.empty() || !filtered_children(e, k, filters, 1).empty());
                        json r{{"ctx", k}, {"name", e.name(k)}, {"hasChildren", hasChildren}, {"inc", inc}, {"exc", exc}};
                        if (file != db::kNone) r["file"] = file, r["line"] = line;
                        if (withStats) {  // over all profiles (hpcprof -M stats), per asked metric
                          json si = json::array(), se = json::array();
                          for (size_t m : ms) {
                            const MetricView& mv = e.metrics()[m];
                            si.push_back(stats_json(e.stats(k, mv.inc)));
                            se.push_back(stats_json(e.stats(k, mv.exc)));
                          }
                          r["stats"] = {{"inc", si}, {"exc", se}};
                        }
                        if (base) {
                          // A child of the asked context by name among the baseline's children of
                          // its match; one a filter brought up from below, by its own path.
                          uint32_t at = kNoCtx;
                          if (e.parent(k) == ctx)
                            if (auto it = baseKids->find(match_name(e, e.name(k))); it != baseKids->end()) at = it->second;
                          // Where siblings on the way share names, by the child's own path.
                          if (at == kNoCtx && (e.parent(k) != ctx || ambiguous)) at = matching_context(e, k, *base);
                          json binc = json::array(), bexc = json::array();
                          // The same filters move the baseline's hidden costs alike.
                          const FilterAbsorbed baseHidden =
                              at == kNoCtx ? FilterAbsorbed{} : filter_absorbed(*base, at, leaves->count(k) != 0, filters);
                          for (size_t m : ms) {
                            const int bm = baseMetric[m];
                            const bool has = at != kNoCtx && bm >= 0;
                            if (!has) {
                              binc.push_back(0.0), bexc.push_back(0.0);
                              continue;
                            }
                            const MetricView& bmv = base->metrics()[size_t(bm)];
                            binc.push_back(base->inclusive(at, bmv));
                            bexc.push_back(base->exclusive(at, bmv) +
                                           absorbed_value(*base, baseHidden, [&](uint32_t c) { return base->inclusive(c, bmv); }));
                          }
                          r["base"] = {{"inc", binc}, {"exc", bexc}};
                        }
                        return r;
                      });
}

Reply Api::context(const Params& q) {
  auto ctx = number(q, "ctx", 0, UINT32_MAX);
  if (!ctx.ok()) return error(400, ctx.status().message());
  uint32_t c = uint32_t(*ctx);
  if (!e_.has(c)) return error(404, "no context " + std::to_string(c));
  std::vector<uint32_t> path;  // from the root
  for (uint32_t a = c; a != kNoCtx; a = e_.parent(a)) path.push_back(a);
  std::reverse(path.begin(), path.end());
  json metrics = json::array();
  for (size_t i = 0; i < e_.metrics().size(); ++i) {
    const MetricView& m = e_.metrics()[i];
    metrics.push_back({{"index", i}, {"name", m.name}, {"inc", stats_json(e_.stats(c, m.inc))}, {"exc", stats_json(e_.stats(c, m.exc))}});
  }
  json j{{"ctx", c}, {"name", e_.name(c)}, {"metrics", metrics}};
  auto [file, line] = e_.source_of(c);
  if (file != db::kNone && file < e_.meta().files.size())
    j["file"] = file, j["filePath"] = e_.meta().files[file].path, j["line"] = line;
  // "path" is the last member in key order: the others, then the path written as it goes.
  std::string head = dump(j);
  head.back() = ',';
  const bool large = path.size() > kStreamPath;
  return json_body(large, [&e = e_, head = std::move(head) + "\"path\":", path = std::move(path)](const Writer& write) {
    return write(head) && write_contexts(e, path, write) && write("}");
  });
}

Reply Api::bottom_up(const Params& q) {
  auto path = parse_key_path(text(q, "path"));
  auto ms = metric_list(e_, q);
  auto top = number(q, "top", kMaxRows, kMaxRows);
  if (!path.ok()) return error(400, path.status().message());
  if (!ms.ok()) return error(400, ms.status().message());
  if (!top.ok()) return error(400, top.status().message());
  // Only the asked metrics are aggregated; rows hottest first by the first (column 0).
  std::string prefix;
  for (uint64_t k : *path) prefix += key_string(k) + "/";
  json head{{"path", text(q, "path")}, {"metrics", metric_header(e_, *ms)}};
  CallerIndex ci(e_, *ms);
  const std::vector<double> zero(ms->size(), 0.0);
  if (path->empty()) {  // the roots are the flat view by function, with a flag for callers
    size_t total = 0;
    auto t = std::make_shared<const FlatTable>(flat_top(e_, FlatBy::Function, *ms, *top, total));
    head["total"] = total;
    // With a baseline: the flat view's rows by function, as the flat view matches them.
    auto baseRows = base_flat(FlatBy::Function, *ms);
    return stream_array(std::move(head), "rows", t->size(), [&e = e_, t, ci, baseRows, zero, withBase = base_ != nullptr](size_t r) {
      json inc = json::array(), exc = json::array();
      for (size_t m = 0; m < t->nm; ++m) inc.push_back(t->inc(r, m)), exc.push_back(t->exc(r, m));
      json j{{"key", key_string(t->keys[r])}, {"path", key_string(t->keys[r])}, {"name", ci.key_name(t->keys[r])},
             {"hasChildren", bool(t->hasCaller[r])}, {"inc", inc}, {"exc", exc}};
      if (withBase) {
        auto it = baseRows->find(flat_key(e, FlatBy::Function, flat_row(e, FlatBy::Function, *t, r)));
        j["base"] = {{"inc", it != baseRows->end() ? it->second.first : zero}, {"exc", it != baseRows->end() ? it->second.second : zero}};
      }
      return j;
    });
  }
  auto rows = std::make_shared<std::vector<Aggregate>>(ci.children(*path));
  if (!ms->empty()) sort_rows(*rows, 0, /*byExclusive=*/true);
  head["total"] = rows->size();
  // With a baseline: the callers of the node at the same path of names there, by key.
  auto baseKids = std::make_shared<std::unordered_map<uint64_t, std::pair<std::vector<double>, std::vector<double>>>>();
  if (base_) {
    const BaseColumns c = base_columns(*ms);
    if (auto at = match_->caller_path(*path); at && !c.metrics.empty())
      for (const Aggregate& a : CallerIndex(*base_, c.metrics).children(*at)) {
        auto [inc, exc] = spread(c, a.inc, a.exc);
        auto [it, fresh] = baseKids->try_emplace(match_->named_in_to(a.key), std::move(inc), std::move(exc));
        if (!fresh)  // entry points of one name, summed
          for (size_t i = 0; i < ms->size(); ++i) it->second.first[i] += inc[i], it->second.second[i] += exc[i];
      }
  }
  return stream_array(std::move(head), "rows", std::min<size_t>(rows->size(), *top),
                      [rows, ci, prefix, baseKids, zero, match = base_ ? match_.get() : nullptr](size_t i) {
    const Aggregate& a = (*rows)[i];
    json j{{"key", key_string(a.key)}, {"path", prefix + key_string(a.key)}, {"name", ci.key_name(a.key)},
           {"hasChildren", a.hasChildren}, {"inc", a.inc}, {"exc", a.exc}};
    if (match) {
      const auto to = match->caller_key(a.key);
      auto it = to ? baseKids->find(*to) : baseKids->end();
      j["base"] = {{"inc", it != baseKids->end() ? it->second.first : zero}, {"exc", it != baseKids->end() ? it->second.second : zero}};
    }
    return j;
  });
}

Reply Api::flat(const Params& q) {
  FlatBy by = FlatBy::Function;
  std::string bys = text(q, "by", "function");
  if (!parse_flat_by(bys, by)) return error(400, "parameter 'by' must be module, file, function, line or loop");
  auto ms = metric_list(e_, q);
  auto top = number(q, "top", kMaxRows, kMaxRows);
  if (!ms.ok()) return error(400, ms.status().message());
  if (!top.ok()) return error(400, top.status().message());
  // Computed per request for the asked metrics only, within a bounded scratch; only the
  // rows sent are kept, and named as they are sent.
  size_t total = 0;
  auto t = std::make_shared<const FlatTable>(flat_top(e_, by, *ms, *top, total));
  json head{{"by", bys}, {"metrics", metric_header(e_, *ms)}, {"total", total}};
  auto baseRows = base_flat(by, *ms);
  return stream_array(std::move(head), "rows", t->size(), [&e = e_, t, by, baseRows, nm = ms->size(), withBase = base_ != nullptr](size_t i) {
    FlatRow r = flat_row(e, by, *t, i);
    json j{{"key", r.key}, {"name", r.name}, {"inc", r.inc}, {"exc", r.exc}};
    if (r.file != UINT32_MAX) j["file"] = r.file, j["line"] = r.line;
    if (withBase) {
      auto it = baseRows->find(flat_key(e, by, r));
      const std::vector<double> zero(nm, 0.0);
      j["base"] = {{"inc", it != baseRows->end() ? it->second.first : zero}, {"exc", it != baseRows->end() ? it->second.second : zero}};
    }
    return j;
  });
}

// hpcviewer's flat view: the static structure below `path` (empty: the load modules),
// `depth` levels down (more than 1: the view flattened), for the asked metrics.
Reply Api::structure(const Params& q) {
  auto path = parse_static_path(text(q, "path"));
  auto depth = number(q, "depth", 1, 8);
  auto ms = metric_list(e_, q);
  auto top = number(q, "top", kMaxRows, kMaxRows);
  if (!path.ok()) return error(400, path.status().message());
  if (!depth.ok()) return error(400, depth.status().message());
  if (*depth < 1) return error(400, "parameter 'depth' must be 1 to 8");
  if (!ms.ok()) return error(400, ms.status().message());
  if (!top.ok()) return error(400, top.status().message());
  size_t total = 0;
  // Rows held at most as the server's memory allows: what a tenth of the database's size
  // leaves over what the server holds now and the block cache the walk reads through (a row
  // takes 16 bytes in the trie, 16 a metric for its values, its slot in the trie's table and
  // the walk's state: 64 and 24 a metric, measured at some 80 with one metric). A database
  // whose tenth is less than the server holds already (its own code and libraries are some
  // 8 MiB), where the aim cannot be met, gets 30,000 rows (a database of 20,000 functions
  // flattened to them takes some 23,000); a larger one at least the 5,000 the web UI shows.
  uint64_t dbBytes = 0;
  std::error_code ec;
  for (const char* f : {"meta.db", "profile.db", "cct.db", "trace.db"}) {
    const uint64_t n = fs::file_size(e_.dir() / f, ec);
    if (!ec) dbBytes += n;
    ec.clear();
  }
  const uint64_t held = Experiment::resident_bytes() + BlockFile::kBlock * BlockFile::kSlots, allowed = dbBytes / 10;
  const size_t budget = allowed > held ? std::max<uint64_t>(5000, (allowed - held) / (64 + 24 * ms->size())) : 30000;
  StaticTree st(e_, *ms);
  st.set_row_budget(budget);
  // Rows named one at a time as they are written.
  auto rows = std::make_shared<const StaticRows>(st.find(*path, uint32_t(*depth), *top, &total));
  if (st.over_budget())
    return error(413, "the view flattened to this depth has more rows than the server holds for one request: "
                      "flatten less, or expand a row");
  json head{{"path", text(q, "path")}, {"depth", *depth}, {"metrics", metric_header(e_, *ms)}, {"total", total}};
  // With a baseline: its rows below the path of the same names there, by path (none where
  // they would be more than the server holds).
  auto baseRows = std::make_shared<std::map<std::vector<uint64_t>, std::pair<std::vector<double>, std::vector<double>>>>();
  if (base_) {
    const BaseColumns c = base_columns(*ms);
    if (auto at = match_->static_path(*path); at && !c.metrics.empty()) {
      StaticTree bt(*base_, c.metrics);
      bt.set_row_budget(budget);
      for (StaticRow& r : bt.rows(*at, uint32_t(*depth))) baseRows->emplace(std::move(r.path), spread(c, r.inc, r.exc));
    }
  }
  const std::vector<double> zero(ms->size(), 0.0);
  return stream_array(std::move(head), "rows", rows->size(), [rows, baseRows, zero, match = base_ ? match_.get() : nullptr](size_t i) {
    const StaticRow r = rows->row(i);
    std::string p;
    for (uint64_t k : r.path) p += (p.empty() ? "" : "/") + static_key_string(k);
    json j{{"key", static_key_string(r.path.back())}, {"path", p}, {"kind", static_kind_name(r.kind)},
           {"name", r.name}, {"hasChildren", r.hasChildren}, {"inc", r.inc}, {"exc", r.exc}};
    if (r.file != db::kNone) j["file"] = r.file, j["line"] = r.line;
    if (match) {
      const auto to = match->static_path(r.path);
      auto it = to ? baseRows->find(*to) : baseRows->end();
      j["base"] = {{"inc", it != baseRows->end() ? it->second.first : zero}, {"exc", it != baseRows->end() ? it->second.second : zero}};
    }
    return j;
  });
}

// Where the time went by kind of work, the GPU's operations and the verdict (overview.hpp),
// for `metric` (default: the view's first) or, where that is a GPU metric, the first CPU
// time metric; `top` places a kind.
// `path`: a call path query (views.hpp; hpcreport --query); `top` rows at most, hottest first
// by the first metric. Each row: the context, its name, whether it is outermost (no match
// above it), its values and its path of context ids from the entry point (for the viewer to
// expand the tree along). Totals: how many match, how many are outermost and what those hold.
Reply Api::query(const Params& q) {
  auto pq = parse_path_query(text(q, "path"));
  auto ms = metric_list(e_, q);
  auto top = number(q, "top", 200, 5000);
  auto profs = profile_list(e_, q);
  if (!pq.ok()) return error(400, pq.status().message());
  if (!ms.ok()) return error(400, ms.status().message());
  if (!top.ok()) return error(400, top.status().message());
  if (!profs.ok()) return error(400, profs.status().message());
  // The thread view's values where `profiles` is given (theirs alone, summed), else the summary's.
  auto selected = std::make_shared<const std::vector<uint32_t>>(std::move(*profs));
  auto incOf = [this, selected](uint32_t c, const MetricView& m) {
    return selected->empty() ? e_.inclusive(c, m) : e_.profiles_value(*selected, c, m.incProp);
  };
  auto excOf = [this, selected](uint32_t c, const MetricView& m) {
    return selected->empty() ? e_.exclusive(c, m) : e_.profiles_value(*selected, c, m.excProp);
  };
  // Counts and the outermost's totals as the walk goes; only the `top` hottest matches kept
  // (a heap, the least hot on top): "*" matches every context.
  std::vector<double> outer(ms->size(), 0.0);
  size_t nFound = 0, nOuter = 0;
  using Hot = std::pair<std::pair<double, uint32_t>, QueryMatch>;  // ((inclusive, -order), match)
  auto cooler = [](const Hot& a, const Hot& b) { return a.first > b.first; };
  std::vector<Hot> heap;
  for_each_match(e_, *pq, [&](const QueryMatch& m) {
    ++nFound;
    if (m.outermost) {
      ++nOuter;
      for (size_t k = 0; k < ms->size(); ++k) outer[k] += incOf(m.ctx, e_.metrics()[(*ms)[k]]);
    }
    const Hot h{{ms->empty() ? 0.0 : incOf(m.ctx, e_.metrics()[(*ms)[0]]), UINT32_MAX - uint32_t(nFound)}, m};
    if (heap.size() < *top) {
      heap.push_back(h);
      std::push_heap(heap.begin(), heap.end(), cooler);
    } else if (!heap.empty() && cooler(h, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), cooler);
      heap.back() = h;
      std::push_heap(heap.begin(), heap.end(), cooler);
    }
  });
  std::sort(heap.begin(), heap.end(), cooler);  // hottest first, then in tree order
  // Rows written as they are made (a row's path is written whole: deep down a recursion it
  // is long); past 100,000 path entries in all the reply takes no more rows (`cut`), so the
  // count of rows sent is fixed here, from the paths' lengths.
  constexpr size_t kMaxPathEntries = 100000;
  size_t n = 0, entries = 0;
  for (; n < heap.size(); ++n) {
    const uint32_t len = e_.depth(heap[n].second.ctx);
    if (n > 0 && entries + len > kMaxPathEntries) break;
    entries += len;
  }
  const bool cut = n < heap.size();
  heap.resize(n);
  json head{{"query", text(q, "path")}, {"metrics", metric_header(e_, *ms)}, {"total", nFound},
            {"outermost", nOuter}, {"outermostInclusive", outer}, {"cut", cut}};
  auto rows = std::make_shared<std::vector<Hot>>(std::move(heap));
  if (!selected->empty()) head["profiles"] = *selected;
  return stream_array(std::move(head), "rows", rows->size(), [this, rows, ms = *ms, incOf, excOf](size_t k) {
    const QueryMatch& m = (*rows)[k].second;
    std::vector<uint32_t> path;
    for (uint32_t a = m.ctx; a != 0 && a != kNoCtx; a = e_.parent(a)) path.push_back(a);
    std::reverse(path.begin(), path.end());
    const std::string shown = match_path_name(e_, m.ctx);
    json inc = json::array(), exc = json::array();
    for (size_t mi : ms) inc.push_back(incOf(m.ctx, e_.metrics()[mi])), exc.push_back(excOf(m.ctx, e_.metrics()[mi]));
    return json{{"ctx", m.ctx}, {"name", e_.name(m.ctx)}, {"pathNames", shown}, {"outermost", m.outermost},
                {"inc", inc}, {"exc", exc}, {"path", path}};
  });
}

Reply Api::overview(const Params& q) {
  auto m = number(q, "metric", e_.default_metric(), e_.metrics().empty() ? 0 : e_.metrics().size() - 1);
  auto top = number(q, "top", 5, 100);
  if (!m.ok()) return error(400, m.status().message());
  if (!top.ok()) return error(400, top.status().message());
  if (e_.metrics().empty()) return error(404, "the database has no metrics");
  const int mi = overview_metric(e_, size_t(*m));
  const Overview ov = present::overview(e_, mi < 0 ? size_t(*m) : size_t(mi), size_t(*top));
  json kinds = json::array(), gpu = json::array();
  if (mi >= 0)
    for (size_t k = 0; k < kWorkKinds; ++k) {
      json where = json::array();
      for (const auto& [name, v] : ov.kinds[k].where) where.push_back({{"name", name}, {"value", v}});
      kinds.push_back({{"key", work_kind_key(WorkKind(k))}, {"name", work_kind_name(WorkKind(k))},
                       {"value", ov.kinds[k].value}, {"where", where}});
    }
  for (const auto& [what, v] : ov.gpu) gpu.push_back({{"name", what}, {"value", v}});
  json j{{"metric", mi < 0 ? json(nullptr) : json(mi)}, {"total", ov.total}, {"kinds", kinds}, {"gpu", gpu}};
  if (mi >= 0) j["verdict"] = ov.verdict, j["reason"] = ov.reason;
  if (ov.ipc) j["instructionsPerCycle"] = *ov.ipc;
  if (ov.mpiSpread)
    j["mpiSpread"] = {{"profiles", ov.mpiSpread->profiles}, {"min", ov.mpiSpread->min}, {"max", ov.mpiSpread->max},
                      {"minProfile", ov.mpiSpread->minProfile}, {"maxProfile", ov.mpiSpread->maxProfile}};
  return json_reply(j);
}

Reply Api::profiles() {
  json out = json::array();
  for (size_t i = 0; i < e_.profiles().size(); ++i) {
    const db::Profile& p = e_.profiles()[i];
    json ids = json::array();
    if (p.idTuple)
      for (const db::Identifier& id : *p.idTuple)
        ids.push_back({{"kind", e_.id_kind_name(id.kind)}, {"logicalId", id.logicalId}, {"physicalId", id.physicalId},
                       {"physical", bool(id.flags & 1)}});
    out.push_back({{"index", i}, {"summary", bool(p.flags & 1)}, {"label", e_.profile_label(i)}, {"ids", ids}});
  }
  return json_reply({{"profiles", out}});
}

Reply Api::profile_values(const Params& q) {
  auto ctx = number(q, "ctx", 0, UINT32_MAX);
  auto metric = number(q, "metric", e_.default_metric(), UINT16_MAX);
  if (!ctx.ok()) return error(400, ctx.status().message());
  if (!metric.ok()) return error(400, metric.status().message());
  if (!e_.has(uint32_t(*ctx))) return error(404, "no context " + std::to_string(*ctx));
  if (*metric >= e_.metrics().size()) return error(404, "no metric " + std::to_string(*metric));
  std::string scope = text(q, "scope", "inc");
  if (scope != "inc" && scope != "exc") return error(400, "parameter 'scope' must be inc or exc");
  const MetricView& m = e_.metrics()[*metric];
  auto values = present::profile_values(e_, uint32_t(*ctx), scope == "inc" ? m.incProp : m.excProp);
  if (!values.ok()) return error(500, values.status().message());
  json out = json::array();
  double sum = 0, lo = 0, hi = 0;
  for (size_t i = 0; i < values->size(); ++i) {
    double v = (*values)[i].value;
    out.push_back({(*values)[i].profIndex, v});
    sum += v, lo = i ? std::min(lo, v) : v, hi = i ? std::max(hi, v) : v;
  }
  size_t n = e_.profiles().size() - 1;  // profiles without a value count as 0
  if (values->size() < n) lo = std::min(lo, 0.0), hi = std::max(hi, 0.0);
  return json_reply({{"ctx", *ctx}, {"metric", m.name}, {"scope", scope}, {"profiles", n}, {"values", out},
                     {"min", lo}, {"max", hi}, {"mean", n ? sum / double(n) : 0.0}});
}

Reply Api::trace(const Params& q) {
  TraceRange range;
  if (auto err = trace_range(e_, q, range)) return *err;
  const db::LazyTraceDb* t = range.trace;
  auto p0 = number(q, "p0", 0, UINT32_MAX);
  auto p1 = number(q, "p1", t->size(), UINT32_MAX);
  auto rows = number(q, "rows", kMaxTraceLines, kMaxTraceRows);
  auto depth = number(q, "depth", 0, 1u << 20);
  auto width = number(q, "width", 0, kMaxPixels);
  for (auto* v : {&p0, &p1, &rows, &depth, &width})
    if (!v->ok()) return error(400, v->status().message());
  if (*width == 0) return error(400, "parameter 'width' (pixels, 1.." + std::to_string(kMaxPixels) + ") is required");
  std::string enc = text(q, "encoding", "json");
  if (enc != "json" && enc != "binary") return error(400, "parameter 'encoding' must be json or binary");
  const std::string expose = text(q, "expose", "0");
  if (expose != "0" && expose != "1") return error(400, "parameter 'expose' must be 0 or 1");
  // `lines`: the trace lines chosen (hpcviewer's filter of execution contexts), "0,3,5-9";
  // p0 and p1 then index that list.
  auto lines = parse_index_list(text(q, "lines", ""), 0, t->size(), "parameter 'lines'", "trace line");
  if (!lines.ok()) return error(400, lines.status().message());
  std::vector<uint32_t> chosen = std::move(*lines);
  const uint64_t available = chosen.empty() ? t->size() : chosen.size();
  TraceQuery tq{range.t0, range.t1, uint32_t(*p0), uint32_t(std::min<uint64_t>(*p1, available)), uint32_t(*rows),
                uint32_t(*width), uint32_t(*depth)};
  tq.exposeGpu = expose == "1";
  tq.lines = std::move(chosen);
  if (Status s = check_trace_query(e_, tq); !s.ok()) return error(400, s.message());
  // A screen holds about a million runs (~15 MB): written row by row as it is computed.
  std::string head = dump(json{{"t0", tq.t0}, {"t1", tq.t1}, {"minTime", t->minTimestamp()}, {"maxTime", t->maxTimestamp()},
                               {"width", *width}, {"depth", *depth}, {"lineCount", t->size()}});
  head = head.substr(1, head.size() - 2);  // the members, without braces
  Reply r;
  r.contentType = enc == "binary" ? "application/octet-stream" : kJson;
  r.stream = [&e = e_, tq, head, binary = enc == "binary"](const Writer& write) {
    if (!binary && !write("{" + head + ",")) return false;
    TraceEncoder out(e, binary ? TraceEncoder::Format::Binary : TraceEncoder::Format::Json, binary ? head : "", write);
    bool ok = true;
    Status s = trace_rows(e, tq, [&](const TraceRow& row) { return ok = out.row(row); });
    if (!s.ok() || !ok || !out.finish()) return false;  // checked above: only a lost client stops it
    return binary || write("}");
  };
  return r;
}

// The trace lines: each one's profile, its label ("RANK 1 THREAD 0") and whether it is a GPU
// stream's (hpcviewer's filter of execution contexts chooses among them).
Reply Api::trace_lines() {
  auto tr = e_.trace();
  if (!tr.ok()) return error(500, tr.status().message());
  if (!*tr) return error(404, "the database has no trace.db");
  const db::LazyTraceDb* t = *tr;
  return stream_array(json{{"count", t->size()}}, "lines", t->size(), [&e = e_, t](size_t i) {
    const uint32_t p = t->line(uint32_t(i)).profIndex();
    return json{{"line", i}, {"profile", p}, {"label", e.profile_label(p)}, {"gpu", is_gpu_profile(e, p)}};
  });
}

// hpcviewer's depth view: one trace line, a row of runs per call depth (trace_depth_rows).
Reply Api::trace_depth(const Params& q) {
  TraceRange range;
  if (auto err = trace_range(e_, q, range)) return *err;
  if (!q.count("line")) return error(400, "parameter 'line' (a trace line) is required");
  auto line = number(q, "line", 0, UINT32_MAX);
  auto width = number(q, "width", 0, kMaxPixels);
  auto depths = number(q, "depths", 64, kMaxTraceDepths);
  for (auto* v : {&line, &width, &depths})
    if (!v->ok()) return error(400, v->status().message());
  if (*width == 0) return error(400, "parameter 'width' (pixels, 1.." + std::to_string(kMaxPixels) + ") is required");
  auto d = trace_depth_rows(e_, uint32_t(*line), range.t0, range.t1, uint32_t(*width), uint32_t(*depths));
  if (!d.ok()) return error(400, d.status().message());
  json rows = json::array(), names = json::object();
  for (const auto& runs : d->depths) {
    json r = json::array();
    for (const auto& [key, n] : runs) {
      r.push_back(json::array({api_key(key), n}));
      if (key < e_.meta().functions.size()) names[std::to_string(key)] = e_.function_name(key);
    }
    rows.push_back(std::move(r));
  }
  return json_reply({{"line", d->line}, {"profile", d->profIndex}, {"t0", range.t0}, {"t1", range.t1},
                     {"width", *width}, {"depths", rows}, {"functions", names}});
}

Reply Api::trace_blame(const Params& q) {
  TraceRange range;
  if (auto err = trace_range(e_, q, range)) return *err;
  auto samples = number(q, "samples", 2048, kMaxPixels);
  auto top = number(q, "top", 100, kMaxRows);
  for (auto* v : {&samples, &top})
    if (!v->ok()) return error(400, v->status().message());
  const uint64_t t0 = range.t0, t1 = range.t1;
  auto b = gpu_idle_blame(e_, t0, t1, uint32_t(*samples));
  if (!b.ok()) return error(400, b.status().message());
  double attributed = b->idleTime - b->unattributed;
  json rows = json::array();
  for (size_t i = 0; i < b->rows.size() && i < *top; ++i) {
    auto [key, v] = b->rows[i];
    long long k = api_key(key);
    rows.push_back({{"key", k},
                    {"name", k >= 0 ? e_.function_name(key) : k == -2 ? "<unknown context>" : "<no function>"},
                    {"blame", v},
                    {"share", attributed > 0 ? v / attributed : 0.0}});
  }
  return json_reply({{"t0", t0}, {"t1", t1}, {"samples", *samples}, {"gpuLines", b->gpuLines},
                     {"cpuLines", b->cpuLines}, {"span", double(t1 - t0)}, {"gpuIdle", b->idleTime},
                     {"unattributed", b->unattributed}, {"total", b->rows.size()}, {"rows", rows}});
}

Reply Api::trace_sample(const Params& q) {
  auto line = number(q, "line", 0, UINT32_MAX);
  auto time = number(q, "t", 0, UINT64_MAX);
  if (!line.ok()) return error(400, line.status().message());
  if (!time.ok()) return error(400, time.status().message());
  if (!q.count("t")) return error(400, "parameter 't' (a timestamp) is required");
  auto s = present::trace_sample(e_, uint32_t(*line), *time);
  if (!s.ok()) return error(400, s.status().message());
  if (!s->found) return json_reply({{"found", false}});
  // Members in key order (ctx, end, found, stack, start), the stack written as it goes.
  std::string head = dump(json{{"found", true}, {"end", s->end}, {"ctx", s->ctx}});
  head.back() = ',';
  std::string tail = ",\"start\":" + dump(json(s->start)) + "}";
  const bool large = s->stack.size() > kStreamPath;
  return json_body(large, [&e = e_, head = std::move(head) + "\"stack\":", tail = std::move(tail),
                           stack = std::move(s->stack)](const Writer& write) {
    return write(head) && write_contexts(e, stack, write) && write(tail);
  });
}

Reply Api::source(const Params& q) {
  std::string rel;
  if (q.count("file")) {
    auto f = number(q, "file", 0, UINT32_MAX);
    if (!f.ok()) return error(400, f.status().message());
    if (*f >= e_.meta().files.size()) return error(404, "no file " + std::to_string(*f));
    rel = e_.meta().files[*f].path;
  } else {
    rel = text(q, "path");
  }
  if (rel.empty()) return error(400, "parameter 'file' (index) or 'path' is required");
  // Relative paths are inside the database; copies of absolute ones lie under src/ (as
  // hpcprof copies them). Never anything outside the database.
  std::error_code ec;
  fs::path root = fs::weakly_canonical(e_.dir(), ec);
  fs::path rp = fs::path(rel);
  std::vector<fs::path> candidates;
  if (rp.is_relative()) candidates.push_back(root / rp);
  candidates.push_back(root / "src" / rp.relative_path());
  fs::path p;
  bool outside = false;
  for (const fs::path& c : candidates) {
    std::error_code ec2;
    fs::path q = fs::weakly_canonical(c, ec2);
    auto [r, _] = std::mismatch(root.begin(), root.end(), q.begin(), q.end());
    if (ec || ec2 || r != root.end()) {
      outside = true;
      continue;
    }
    if (fs::is_regular_file(q, ec2)) {
      p = q;
      break;
    }
  }
  if (p.empty() && outside) return error(403, "path outside the database: " + rel.substr(0, 200));
  if (p.empty()) return error(404, "no source file " + rel.substr(0, 200) + " in the database");
  if (fs::file_size(p, ec) > kMaxSourceBytes) return error(413, "source file larger than 16 MiB");
  std::string head = dump(json{{"path", rel}});
  head.back() = ',';
  Reply r;
  // Read and escaped a piece at a time; a piece never ends inside a UTF-8 sequence (an
  // invalid one becomes U+FFFD, as nlohmann's replace handler does).
  r.stream = [p, head = head + "\"text\":\""](const Writer& write) {
    std::ifstream in(p, std::ios::binary);
    if (!write(head)) return false;
    std::string piece;
    std::vector<char> buf(kPiece);
    for (;;) {
      in.read(buf.data(), std::streamsize(buf.size()));
      const bool end = in.gcount() == 0;
      piece.append(buf.data(), size_t(in.gcount()));
      size_t cut = piece.size();
      if (!end) {  // hold back a trailing lead byte and its continuation bytes
        size_t lead = cut;
        while (lead > 0 && cut - lead < 4 && (static_cast<unsigned char>(piece[lead - 1]) & 0xc0) == 0x80) --lead;
        if (lead > 0 && (static_cast<unsigned char>(piece[lead - 1]) & 0xc0) == 0xc0) cut = lead - 1;
      }
      std::string text = dump(json(piece.substr(0, cut)));
      if (!write(std::string_view(text).substr(1, text.size() - 2))) return false;
      piece.erase(0, cut);
      if (end) break;
    }
    return write("\"}");
  };
  return r;
}

}  // namespace hpc::present
