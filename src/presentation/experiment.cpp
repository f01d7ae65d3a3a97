#include "presentation/experiment.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "common/file.hpp"

namespace hpc::present {
namespace fs = std::filesystem;

namespace {

// ctxIds index dense tables; a listed id beyond this is treated as corrupt input.
constexpr uint32_t kMaxCtxId = 1u << 28;

template <typename T, typename F>
Expected<T> read_with(const fs::path& p, F&& read) {
  HPC_ASSIGN_OR_RETURN(MappedFile f, MappedFile::open(p));
  return read(f.view());
}

std::string lower(std::string s) {
  for (auto& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::string base_name(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

Expected<std::unique_ptr<Experiment>> Experiment::open(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return Status::error(dir.string() + ": not a database directory (no such directory)");
  if (!fs::is_regular_file(dir / "meta.db", ec))
    return Status::error((dir / "meta.db").string() + ": missing; " + dir.string() + " is not a database");
  std::unique_ptr<Experiment> e(new Experiment(dir));
  HPC_ASSIGN_OR_RETURN(e->meta_, read_with<db::Meta>(dir / "meta.db", db::read_meta));
  HPC_ASSIGN_OR_RETURN(e->profiles_, read_with<std::vector<db::Profile>>(dir / "profile.db", db::read_profile_db));
  if (e->profiles_.empty() || !(e->profiles_[0].flags & 1))
    return Status::error((dir / "profile.db").string() + ": no summary profile (row 0 must have isSummary set)");
  HPC_RETURN_IF_ERROR(e->index_tree());
  e->index_metrics();
  return e;
}

Status Experiment::index_tree() {
  // Size the table by the largest listed id, then fill it depth first.
  uint32_t maxId = 0;
  std::vector<const db::Context*> stack;
  for (auto& ep : meta_.entryPoints) {
    maxId = std::max(maxId, ep.ctxId);
    for (auto& c : ep.children) stack.push_back(&c);
  }
  while (!stack.empty()) {
    const db::Context* c = stack.back();
    stack.pop_back();
    maxId = std::max(maxId, c->ctxId);
    for (auto& k : c->children) stack.push_back(&k);
  }
  const std::string metaName = (dir_ / "meta.db").string();
  if (maxId >= kMaxCtxId) return Status::error(metaName + ": context id " + std::to_string(maxId) + " is implausibly large");
  nodes_.assign(size_t(maxId) + 1, Node{});
  nodes_[0].kind = NodeKind::Root;

  auto claim = [&](uint32_t id, uint32_t parent) -> Status {
    if (id == 0 || nodes_[id].parent != kNoCtx)
      return Status::error(metaName + ": context id " + std::to_string(id) + " is listed twice");
    nodes_[id].parent = parent;
    nodes_[id].depth = nodes_[parent].depth + 1;
    nodes_[parent].children.push_back(id);
    ++numContexts_;
    return Status();
  };
  std::vector<std::pair<const db::Context*, uint32_t>> work;
  for (auto& ep : meta_.entryPoints) {
    HPC_RETURN_IF_ERROR(claim(ep.ctxId, 0));
    nodes_[ep.ctxId].kind = NodeKind::Entry;
    nodes_[ep.ctxId].entry = &ep;
    for (auto& c : ep.children) work.push_back({&c, ep.ctxId});
  }
  while (!work.empty()) {
    auto [c, parent] = work.back();
    work.pop_back();
    HPC_RETURN_IF_ERROR(claim(c->ctxId, parent));
    Node& n = nodes_[c->ctxId];
    n.kind = NodeKind::Context;
    n.ctx = c;
    n.callDepth = nodes_[parent].callDepth + (c->lexicalType == 0 && c->function != db::kNone ? 1 : 0);
    for (auto& k : c->children) work.push_back({&k, c->ctxId});
  }
  ++numContexts_;  // the root

  // Summary rows by ctxId for O(1) lookup.
  const auto& sv = profiles_[0].values;
  summaryRow_.assign(nodes_.size(), kNoCtx);
  for (size_t i = 0; i < sv.key.size(); ++i)
    if (sv.key[i] < summaryRow_.size()) summaryRow_[sv.key[i]] = uint32_t(i);
  return Status();
}

void Experiment::index_metrics() {
  auto scopeIs = [&](uint16_t s, uint8_t type, const char* name) {
    if (s >= meta_.scopes.size()) return false;
    return meta_.scopes[s].type == type || meta_.scopes[s].name == name;
  };
  for (auto& m : meta_.metrics) {
    MetricView v;
    v.name = m.name;
    // Scope preference: inclusive = execution; exclusive = function, lex_aware, point.
    auto pick = [&](std::initializer_list<std::pair<uint8_t, const char*>> prefs) -> int {
      for (auto [type, name] : prefs)
        for (auto& si : m.scopeInsts)
          if (scopeIs(si.scope, type, name)) return si.scope;
      return -1;
    };
    int incScope = pick({{2, "execution"}, {1, "point"}});
    int excScope = pick({{3, "function"}, {0, "lex_aware"}, {1, "point"}});
    for (auto& si : m.scopeInsts) {
      if (si.scope == incScope) v.incProp = si.propMetricId;
      if (si.scope == excScope) v.excProp = si.propMetricId;
    }
    for (auto& s : m.summaries) {
      for (auto [scope, st] : {std::pair{incScope, &v.inc}, std::pair{excScope, &v.exc}}) {
        if (s.scope != scope) continue;
        if (s.combine == 0 && s.formula == "$$") st->sum = s.statMetricId;
        else if (s.combine == 0 && s.formula == "1") st->count = s.statMetricId;
        else if (s.combine == 0 && s.formula == "$$^2") st->sumSq = s.statMetricId;
        else if (s.combine == 1 && s.formula == "$$") st->min = s.statMetricId;
        else if (s.combine == 2 && s.formula == "$$") st->max = s.statMetricId;
      }
    }
    metrics_.push_back(std::move(v));
  }
}

int Experiment::find_metric(const std::string& name) const {
  for (size_t i = 0; i < metrics_.size(); ++i)
    if (metrics_[i].name == name) return int(i);
  if (!name.empty() && std::all_of(name.begin(), name.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    size_t i = std::stoul(name.substr(0, 9));
    return i < metrics_.size() ? int(i) : -1;
  }
  int found = -1;
  std::string want = lower(name);
  for (size_t i = 0; i < metrics_.size(); ++i)
    if (lower(metrics_[i].name).rfind(want, 0) == 0) {
      if (found >= 0) return -1;  // ambiguous
      found = int(i);
    }
  return found;
}

size_t Experiment::default_metric() const {
  int any = -1;
  for (size_t i = 0; i < metrics_.size(); ++i) {
    if (inclusive(0, metrics_[i]) == 0) continue;
    auto& n = metrics_[i].name;
    if (n.find("TIME") != std::string::npos || n.find("(sec)") != std::string::npos) return i;
    if (any < 0) any = int(i);
  }
  return any < 0 ? 0 : size_t(any);
}

uint32_t Experiment::function_of(uint32_t ctx) const {
  if (!has(ctx) || nodes_[ctx].kind != NodeKind::Context) return db::kNone;
  const db::Context* c = nodes_[ctx].ctx;
  return c->lexicalType == 0 ? c->function : db::kNone;
}

std::string Experiment::function_name(uint32_t fn) const {
  if (fn >= meta_.functions.size()) return "<unknown function>";
  const db::Function& f = meta_.functions[fn];
  if (f.name) return *f.name;
  std::string s = "<unknown function>";
  if (f.module < meta_.modules.size()) s += " " + base_name(meta_.modules[f.module].path) + "+0x" + hex(f.offset).substr(2);
  return s;
}

std::pair<uint32_t, uint32_t> Experiment::source_of(uint32_t ctx) const {
  if (!has(ctx) || nodes_[ctx].kind != NodeKind::Context) return {db::kNone, 0};
  const db::Context* c = nodes_[ctx].ctx;
  if (c->file != db::kNone) return {c->file, c->line};
  if (c->function != db::kNone && c->function < meta_.functions.size()) {
    const db::Function& f = meta_.functions[c->function];
    return {f.file, f.line};
  }
  return {db::kNone, 0};
}

std::string Experiment::name(uint32_t ctx) const {
  if (ctx == 0) return "<program root>";
  if (!has(ctx)) return "<context " + std::to_string(ctx) + " not in meta.db>";
  const Node& n = nodes_[ctx];
  if (n.kind == NodeKind::Entry) return n.entry->prettyName.empty() ? "<entry>" : n.entry->prettyName;
  const db::Context& c = *n.ctx;
  auto fileLine = [&]() {
    std::string f = c.file < meta_.files.size() ? base_name(meta_.files[c.file].path) : "<unknown file>";
    return f + ":" + std::to_string(c.line);
  };
  switch (c.lexicalType) {
  case 0: return (c.relation == 2 ? "[I] " : "") + function_name(c.function);
  case 1: return "loop at " + fileLine();
  case 2: return fileLine();
  default: {
    std::string m = c.module < meta_.modules.size() ? base_name(meta_.modules[c.module].path) : "<unknown module>";
    return m + "+0x" + hex(c.offset).substr(2);
  }
  }
}

double Experiment::summary(uint32_t ctx, uint16_t statId) const {
  if (statId == kNoMetric || ctx >= summaryRow_.size() || summaryRow_[ctx] == kNoCtx) return 0;
  const auto& sv = profiles_[0].values;
  uint32_t row = summaryRow_[ctx];
  auto b = sv.sub.begin() + sv.start[row], e = sv.sub.begin() + sv.start[row + 1];
  auto it = std::lower_bound(b, e, statId);
  return it != e && *it == statId ? sv.value[size_t(it - sv.sub.begin())] : 0;
}

StatValues Experiment::stats(uint32_t ctx, const MetricView::Stats& s) const {
  StatValues v;
  v.sum = summary(ctx, s.sum);
  if (s.count != kNoMetric) {
    double n = summary(ctx, s.count);
    v.count = n;
    if (n > 0) {
      v.mean = v.sum / n;
      if (s.sumSq != kNoMetric) v.stddev = std::sqrt(std::max(0.0, summary(ctx, s.sumSq) / n - *v.mean * *v.mean));
    }
  }
  if (s.min != kNoMetric) v.min = summary(ctx, s.min);
  if (s.max != kNoMetric) v.max = summary(ctx, s.max);
  return v;
}

Expected<const std::vector<db::ContextValues>*> Experiment::context_values() const {
  std::call_once(cct_.once, [&] {
    cct_.value.emplace(read_with<std::vector<db::ContextValues>>(dir_ / "cct.db", db::read_cct_db));
  });
  if (!cct_.value->ok()) return cct_.value->status();
  return &cct_.value->value();
}

Expected<const db::TraceDb*> Experiment::trace() const {
  std::call_once(trace_.once, [&]() {
    std::error_code ec;
    if (!fs::exists(dir_ / "trace.db", ec)) {
      trace_.value.emplace(std::optional<db::TraceDb>());
      return;
    }
    auto t = read_with<db::TraceDb>(dir_ / "trace.db", db::read_trace_db);
    if (!t.ok()) trace_.value.emplace(std::move(t).take_status());
    else trace_.value.emplace(std::optional<db::TraceDb>(std::move(t).value()));
  });
  if (!trace_.value->ok()) return trace_.value->status();
  const auto& t = trace_.value->value();
  return t ? &*t : nullptr;
}

}  // namespace hpc::present
