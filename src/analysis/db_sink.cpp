// Adapter: the pipeline's DatabaseSink -> database v4 files (hpc_fmt_db) and
// metrics/default.yaml (hpc_fmt_metrics).
#include <system_error>
#include <unordered_map>

#include "analysis/io.hpp"
#include "formats/db/db.hpp"
#include "formats/metrics/metrics_yaml.hpp"

namespace hpc::analysis {

namespace fs = std::filesystem;

namespace {

db::Context describe(const Context* c) {
  const ContextKey& key = c->key();
  db::Context d;
  d.ctxId = c->id();
  d.relation = static_cast<uint8_t>(key.relation);
  d.lexicalType = static_cast<uint8_t>(key.type);
  d.propagation = key.relation == Relation::Lexical ? 1 : 0;  // bit 0: the "function" scope
  if (key.function) d.function = key.function->index;
  if (key.file) {
    d.file = key.file->index;
    d.line = key.line;
  }
  if (key.module) {
    d.module = key.module->index;
    d.offset = key.offset;
  }
  return d;
}

// Appends the contexts meta.db lists below `c`, in order: a hidden context's take its place.
// Called once per context: no allocation but the growth of `out`.
void appendListed(const Context* c, std::vector<const void*>& out) {
  const auto kids = c->children();
  bool anyHidden = false;
  for (const Context* k : kids) anyHidden |= k->key().hidden;
  if (!anyHidden) {
    out.insert(out.end(), kids.begin(), kids.end());
    return;
  }
  thread_local std::vector<std::pair<const Context*, size_t>> walk;  // hidden ones being expanded
  walk.assign(1, {c, 0});
  while (!walk.empty()) {
    const Context* at = walk.back().first;
    const size_t i = walk.back().second;
    if (i == at->children().size()) {
      walk.pop_back();
      continue;
    }
    ++walk.back().second;
    const Context* k = at->children()[i];
    if (k->key().hidden) walk.push_back({k, 0});
    else out.push_back(k);
  }
}

const char* entryName(EntryKind k) {
  switch (k) {
  case EntryKind::MainThread: return "main thread";
  case EntryKind::ApplicationThread: return "application thread";
  case EntryKind::Unknown: break;
  }
  return "unknown entry";
}

// meta.db's contexts straight from the tree, as listed (hidden contexts' children in their
// place): no second tree of db::Context (22 MiB for 400,000 contexts), and no recursion.
class TreeContexts final : public db::ContextSource {
public:
  TreeContexts(const Cct& cct, std::vector<const Context*> entries) : cct_(cct), entries_(std::move(entries)) {}
  void entryChildren(size_t e, std::vector<const void*>& out) const override { listed(entries_[e], out); }
  void children(const void* c, std::vector<const void*>& out) const override {
    listed(static_cast<const Context*>(c), out);
  }
  db::Context describe(const void* c) const override { return analysis::describe(static_cast<const Context*>(c)); }
  uint64_t size() const override { return cct_.size(); }
  void prefetch(const void* c) const override {
    const auto* ctx = static_cast<const Context*>(c);
    __builtin_prefetch(ctx);
    __builtin_prefetch(reinterpret_cast<const char*>(ctx) + sizeof(Context) - 1);
  }
  void prefetchChildren(const void* c) const override {
    const auto kids = static_cast<const Context*>(c)->children();
    for (size_t i = 0; i < kids.size() && i < 4; ++i) __builtin_prefetch(kids[i]);
  }

private:
  static void listed(const Context* c, std::vector<const void*>& out) { appendListed(c, out); }
  const Cct& cct_;
  std::vector<const Context*> entries_;
};

// The meta.db model but for its contexts; the entry points' contexts go to `entries`, in order.
db::Meta buildMeta(const MetaInput& in, std::vector<const Context*>& entries) {
  db::Meta m;
  m.general.title = in.title;
  // The reference writes this placeholder and its checker compares it: it stays unless
  // profiles were skipped, which the database must say.
  m.general.description = in.skipped ? std::to_string(in.skipped) + " unreadable profiles were skipped"
                                     : "TODO database description";
  m.idNames = {"SUMMARY", "NODE", "RANK", "THREAD", "GPUDEVICE", "GPUCONTEXT", "GPUSTREAM", "CORE"};
  // Scope order is the Scope enum's: point, function, lex_aware, execution.
  m.scopes = {{"point", 1, 255}, {"function", 3, 0}, {"lex_aware", 0, 255}, {"execution", 2, 255}};
  const MetricTable& mt = *in.metrics;
  for (uint32_t i = 0; i < mt.size(); ++i) {
    db::Metric dm;
    dm.name = mt.name(i);
    for (uint8_t s = 0; s < kNumScopes; ++s) {
      uint16_t prop = propId(i, Scope(s));
      dm.scopeInsts.push_back({s, prop});
      for (uint32_t k = 0; k < mt.kinds().size(); ++k) {
        const StatKind& sk = mt.kinds()[k];
        dm.summaries.push_back({s, sk.formula, static_cast<uint8_t>(sk.combine), mt.statId(prop, k)});
      }
    }
    m.metrics.push_back(std::move(dm));
  }
  for (const Module* mod : in.names->modules()) m.modules.push_back({0, mod->path});
  for (const File* f : in.names->files())
    m.files.push_back({0, in.replace ? replacePath(f->path, *in.replace) : f->path});
  for (const Function* f : in.names->functions()) {
    db::Function df;
    if (!f->name.empty()) df.name = f->name;
    if (f->module) {
      df.module = f->module->index;
      df.offset = f->offset;
    }
    if (f->file) {
      df.file = f->file->index;
      df.line = f->line;
    }
    m.functions.push_back(std::move(df));
  }
  for (const Context* e : in.cct->root()->children()) {
    if (e->key().kind != NodeKind::Entry) continue;
    db::EntryPoint ep;
    ep.ctxId = e->id();
    ep.entryPoint = static_cast<uint16_t>(e->key().entry);
    ep.prettyName = entryName(e->key().entry);
    entries.push_back(e);
    m.entryPoints.push_back(std::move(ep));
  }
  return m;
}

class DbSink final : public DatabaseSink, public TraceLines {
public:
  explicit DbSink(fs::path dir) : dir_(std::move(dir)) {}

  Status begin(uint32_t numProfiles, uint32_t numContexts, bool traces) override {
    HPC_RETURN_IF_ERROR(profiles_.begin(dir_ / "profile.db", numProfiles));
    HPC_RETURN_IF_ERROR(contexts_.begin(dir_ / "cct.db", numContexts));
    traces_ = traces;
    if (traces) HPC_RETURN_IF_ERROR(trace_.begin(dir_ / "trace.db", numProfiles - 1));
    if (traces) traced_.assign(numProfiles, 0);
    return Status();
  }

  Status writeProfile(uint32_t index, const std::vector<IdOut>& idTuple,
                      const SparseRow& row) override {
    std::vector<db::Identifier> ids;
    for (const IdOut& i : idTuple)
      ids.push_back({static_cast<uint8_t>(i.kind), uint16_t(i.isPhysical ? 1 : 0), i.logical, i.physical});
    return profiles_.write(index, 0, ids, db::ProfileValuesView{row.ctx, row.start, row.metric, row.value});
  }

  Status writeTrace(uint32_t index, std::span<const TracePoint> trace) override {
    if (!traces_ || index == 0) return Status::error("trace for profile " + std::to_string(index) + " not expected");
    traced_[index] = 1;  // each index by one thread
    return trace_.write(index - 1, index, trace, &TracePoint::time, &TracePoint::ctx);
  }

  TraceLines* streamedTraces() override { return traces_ ? this : nullptr; }
  Status place(std::span<const uint64_t> records) override {
    std::vector<uint32_t> profIndex(records.size());
    for (size_t k = 0; k < records.size(); ++k) profIndex[k] = uint32_t(k + 1);
    return trace_.place(records, profIndex);
  }
  Status writePart(uint32_t index, uint64_t from, std::span<const TracePoint> part) override {
    if (!traces_ || index == 0) return Status::error("trace for profile " + std::to_string(index) + " not expected");
    return trace_.writePart(index - 1, from, part, &TracePoint::time, &TracePoint::ctx);
  }
  Status end(uint32_t index, uint64_t records, uint64_t firstTime, uint64_t lastTime) override {
    if (!traces_ || index == 0) return Status::error("trace for profile " + std::to_string(index) + " not expected");
    traced_[index] = 1;  // each index by one thread
    return trace_.endLine(index - 1, records, firstTime, lastTime);
  }

  Status readProfile(uint32_t index, uint32_t lo, uint32_t hi, SparseRow& out) override {
    // The row's vectors go through the reader and come back: their capacity is reused.
    db::ProfileValues v;
    v.key.swap(out.ctx);
    v.start.swap(out.start);
    v.sub.swap(out.metric);
    v.value.swap(out.value);
    Status st = profiles_.read(index, lo, hi, v);
    out.ctx = std::move(v.key);
    out.start = std::move(v.start);
    out.metric = std::move(v.sub);
    out.value = std::move(v.value);
    return st;
  }

  Status writeContexts(const ColumnBatch& columns) override {
    for (size_t i = 0; i < columns.size(); ++i) {
      const uint64_t first = columns.slot[i], n = columns.metrics[i];
      const uint64_t b = n ? columns.start[first] : columns.end[i], e = columns.end[i];
      db::ContextValuesView v{{columns.metric.data() + first, n}, {columns.start.data() + first, n}, b,
                              {columns.profile + b, e - b}, {columns.value + b, e - b}};
      HPC_RETURN_IF_ERROR(contexts_.write(columns.ctx[i], v));
    }
    return Status();
  }

  Status writeSummary(const SparseRow& row) override {
    return profiles_.write(0, 1, std::nullopt, db::ProfileValuesView{row.ctx, row.start, row.metric, row.value});
  }

  Status finish(const MetaInput& meta) override {
    HPC_RETURN_IF_ERROR(profiles_.finish());
    HPC_RETURN_IF_ERROR(contexts_.finish());
    if (traces_) {
      // A profile without a trace (its file missing or unreadable, or from a run without
      // tracing) still has its header, with an empty line at the end of the others, as the
      // reference gives every profile one.
      for (uint32_t index = 1; index < traced_.size(); ++index)
        if (!traced_[index]) HPC_RETURN_IF_ERROR(trace_.write(index - 1, index, std::span<const db::TraceElem>()));
      HPC_RETURN_IF_ERROR(trace_.finish());
    }
    return metaWritten_ ? Status() : writeMeta(dir_, meta);
  }

  Status writeMetaEarly(const MetaInput& meta) override {
    HPC_RETURN_IF_ERROR(writeMeta(dir_, meta));
    metaWritten_ = true;
    return Status();
  }

private:
  fs::path dir_;
  db::ProfileDbWriter profiles_;
  db::CctDbWriter contexts_;
  db::TraceDbWriter trace_;
  bool traces_ = false;
  std::vector<uint8_t> traced_;  // by profile index: its trace written
  bool metaWritten_ = false;
};

}  // namespace

// Copies of the source files that exist here, under src/ at their absolute paths, as the
// reference does, so the database can be viewed on another machine. Missing files are normal
// (system headers, other machines' paths) and silently left out.
static void copySources(const fs::path& dir, const MetaInput& meta) {
  for (const File* f : meta.names->files()) {
    fs::path p(meta.replace ? replacePath(f->path, *meta.replace) : f->path);
    std::error_code ec;
    if (!p.is_absolute() || !fs::is_regular_file(p, ec)) continue;
    fs::path to = dir / "src" / p.relative_path();
    fs::create_directories(to.parent_path(), ec);
    if (!ec) fs::copy_file(p, to, fs::copy_options::overwrite_existing, ec);
  }
}

Status writeMeta(const fs::path& dir, const MetaInput& meta) {
  {
    std::vector<const Context*> entries;
    const db::Meta m = buildMeta(meta, entries);
    const TreeContexts contexts(*meta.cct, std::move(entries));
    HPC_RETURN_IF_ERROR(db::write_meta(m, dir / "meta.db", &contexts));
  }
  // Derived metrics' formulas index the metric table; specs are indexed by position here.
  std::vector<metrics::MetricSpec> specs;
  std::unordered_map<std::string, uint32_t> at;
  std::vector<std::pair<uint32_t, metrics::Expr>> formulas;
  if (meta.descs)
    for (const MetricDescIn& d : *meta.descs) {
      metrics::MetricSpec s;
      s.name = d.name;
      s.description = d.description.empty() ? d.name : d.description;
      s.visible = d.show != 0;
      s.inclusive = d.show != 3;
      s.listed = d.show != 4;
      s.percent = d.showPercent != 0;
      s.format = d.format;
      if (at.count(s.name)) continue;
      if (!d.formula.empty()) {
        auto f = metrics::parse_formula(d.formula);
        bool good = f.ok();
        auto check = [&](auto& self, const metrics::Expr& e) -> void {
          good = good && (e.kind != metrics::Expr::Kind::Ref || e.ref < meta.metrics->size());
          for (const auto& a : e.args) self(self, a);
        };
        if (good) check(check, *f);
        if (!good) continue;
        formulas.emplace_back(uint32_t(specs.size()), std::move(*f));
      }
      at.emplace(s.name, uint32_t(specs.size()));
      specs.push_back(std::move(s));
    }
  for (uint32_t i = 0; i < meta.metrics->size(); ++i) {
    if (at.count(meta.metrics->name(i))) continue;
    metrics::MetricSpec s;
    s.name = s.description = meta.metrics->name(i);
    at.emplace(s.name, uint32_t(specs.size()));
    specs.push_back(std::move(s));
  }
  for (auto& [spec, f] : formulas) {
    auto remap = [&](auto& self, metrics::Expr& e) -> void {
      if (e.kind == metrics::Expr::Kind::Ref) e.ref = at.at(meta.metrics->name(e.ref));
      for (auto& a : e.args) self(self, a);
    };
    remap(remap, f);
    specs[spec].formula = std::move(f);
  }
  HPC_ASSIGN_OR_RETURN(metrics::Taxonomy tax, metrics::default_taxonomy(specs));
  std::error_code ec;
  fs::create_directories(dir / "metrics", ec);
  if (ec) return Status::error((dir / "metrics").string() + ": cannot create: " + ec.message());
  HPC_RETURN_IF_ERROR(metrics::write(dir / "metrics" / "default.yaml", tax));
  copySources(dir, meta);
  return Status();
}

std::string replacePath(const std::string& path, const std::vector<PathReplacement>& replace) {
  for (const PathReplacement& r : replace)
    if (path.rfind(r.from, 0) == 0) return r.to + path.substr(r.from.size());
  return path;
}

Status checkDatabaseTarget(const fs::path& target) { return db::check_replaceable(target); }

Expected<std::unique_ptr<DatabaseSink>> createDatabase(const fs::path& directory) {
  return std::unique_ptr<DatabaseSink>(std::make_unique<DbSink>(directory));
}

}  // namespace hpc::analysis
