#include "presentation/experiment.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <fcntl.h>
#include <cmath>
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <unordered_map>

#include "common/file.hpp"

namespace hpc::present {
namespace fs = std::filesystem;

namespace {

// ctxIds index dense tables; a listed id beyond this is treated as corrupt input.
constexpr uint32_t kMaxCtxId = 1u << 28;

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
  const std::string metaName = (dir / "meta.db").string();
  HPC_ASSIGN_OR_RETURN(MappedFile mf, MappedFile::open(dir / "meta.db"));
  e->metaFile_.emplace(std::move(mf));
  HPC_ASSIGN_OR_RETURN(BlockFile mb, BlockFile::open(dir / "meta.db"));
  e->metaBlocks_.emplace(std::move(mb));
  // The tree goes into arrays by ctxId. Their capacity is reserved up front for as many
  // contexts as the context tree section can hold (a {Ctx} is at least 0x20 bytes): pages
  // past the ids listed are never touched, so never resident, and no growth copies the
  // arrays (a copy would double the peak). Function indices go in 16 bits while they fit.
  Experiment& x = *e;
  {
    ByteView v = x.metaFile_->view();
    uint64_t szTree = v.size() >= 0x48 ? v.load<uint64_t, std::endian::little>(0x40) : 0;
    size_t bound = size_t(std::min<uint64_t>(szTree / 0x20 + 1, kMaxCtxId)) + 1;
    x.parent_.reserve(bound), x.at_.reserve(bound), x.fn16_.reserve(bound);
  }
  bool wide = false;  // fn_ (32 bits) in use instead of fn16_
  db::ContextVisitor visit = [&](uint32_t id, uint32_t parent, uint64_t at, const db::Context* c) -> Status {
    if (id >= kMaxCtxId) return Status::error(metaName + ": context id " + std::to_string(id) + " is implausibly large");
    if (at % 8 != 0 || at / 8 > UINT32_MAX) return Status::error(metaName + ": a context record is not 8-aligned or beyond 32 GiB");
    const uint32_t fn = c && c->lexicalType == 0 ? c->function : db::kNone;
    if (!wide && fn != db::kNone && fn >= 0xffff) {  // more functions than 16 bits hold
      wide = true;
      x.fn_.reserve(x.fn16_.capacity());
      for (uint16_t f : x.fn16_) x.fn_.push_back(f == 0xffff ? db::kNone : f);
      std::vector<uint16_t>().swap(x.fn16_);
    }
    if (id >= x.parent_.size()) {
      size_t n = size_t(id) + 1;
      if (n > x.parent_.capacity()) n = std::max(n, x.parent_.size() + x.parent_.size() / 2);
      x.parent_.resize(n, kNoCtx), x.at_.resize(n, 0);
      if (wide) x.fn_.resize(n, db::kNone);
      else x.fn16_.resize(n, 0xffff);
    }
    if (id == 0 || x.parent_[id] != kNoCtx)
      return Status::error(metaName + ": context id " + std::to_string(id) + " is listed twice");
    x.parent_[id] = parent;
    x.at_[id] = uint32_t(at / 8);
    if (wide) x.fn_[id] = fn;
    else x.fn16_[id] = fn == db::kNone ? 0xffff : uint16_t(fn);
    if (++x.numContexts_ % 8192 == 0)  // the walk keeps few of meta.db's pages mapped in
      db::release_pages(x.metaFile_->bytes().data(), x.metaFile_->bytes().size());
    return Status();
  };
  x.parent_.assign(1, kNoCtx), x.at_.assign(1, 0), x.fn16_.assign(1, 0xffff);
  HPC_ASSIGN_OR_RETURN(x.meta_, db::read_meta_visiting(x.metaFile_->view(), &visit, &x.layout_));
  ++x.numContexts_;  // the root
  // Trim to the largest id listed (no shrink_to_fit: the unused capacity was never touched).
  size_t used = x.parent_.size();
  while (used > 1 && x.parent_[used - 1] == kNoCtx) --used;
  x.parent_.resize(used), x.at_.resize(used);
  if (wide) x.fn_.resize(used);
  else x.fn16_.resize(used);
  // A function listed more than once alike (an inlined function has an entry per inline
  // site, as the reference writes them) is one function to every view: each context names
  // the first entry, so that flat and bottom-up views and trace colours sum its instances.
  {
    const auto& fns = x.meta_.functions;
    std::vector<uint32_t> first(fns.size());
    std::unordered_map<std::string, uint32_t> seen;
    bool any = false;
    for (uint32_t i = 0; i < fns.size(); ++i) {
      const db::Function& f = fns[i];
      std::string key = f.name ? "n" + *f.name : std::string("-");
      key += '\0' + std::to_string(f.module) + ':' + std::to_string(f.offset) + ':' + std::to_string(f.file) + ':' +
             std::to_string(f.line);
      first[i] = seen.try_emplace(std::move(key), i).first->second;
      any |= first[i] != i;
    }
    if (any) {
      for (uint16_t& f : x.fn16_)
        if (f != 0xffff && f < first.size()) f = uint16_t(first[f]);
      for (uint32_t& f : x.fn_)
        if (f != db::kNone && f < first.size()) f = first[f];
    }
  }
  for (uint32_t i = 0; i < x.meta_.entryPoints.size(); ++i) x.entries_.push_back({x.meta_.entryPoints[i].ctxId, i});
  for (const db::Function& f : x.meta_.functions)
    if (f.name && (*f.name == "main" || f.name->starts_with("main [")) && f.module < x.meta_.modules.size()) {
      x.programModule_ = f.module;
      break;
    }
  for (uint32_t i = 0; i < x.meta_.modules.size() && x.programModule_ == db::kNone; ++i)
    if (base_name(x.meta_.modules[i].path) == x.meta_.general.title) x.programModule_ = i;
  if (x.programModule_ != db::kNone) x.programSuffix_ = " [" + base_name(x.meta_.modules[x.programModule_].path) + "]";
  std::sort(x.entries_.begin(), x.entries_.end());
  db::release_pages(x.metaFile_->bytes().data(), x.metaFile_->bytes().size());
  // Records are visited in no order from now on: no read-ahead around each one.
  madvise(const_cast<uint8_t*>(x.metaFile_->bytes().data()), x.metaFile_->bytes().size(), MADV_RANDOM);

  HPC_ASSIGN_OR_RETURN(db::LazyProfileDb pdb, db::LazyProfileDb::open(dir / "profile.db"));
  x.prof_.emplace(std::move(pdb));
  for (auto& in : x.prof_->profiles()) x.profiles_.push_back({in.flags, in.idTuple, {}});
  if (x.profiles_.empty() || !(x.profiles_[0].flags & 1))
    return Status::error((dir / "profile.db").string() + ": no summary profile (row 0 must have isSummary set)");
  e->index_metrics();
  uint64_t bytes = 0;
  for (const char* f : {"meta.db", "profile.db", "cct.db", "trace.db"}) {
    auto n = fs::file_size(dir / f, ec);
    if (!ec) bytes += n;
  }
  e->pageBudget_ = std::max<uint64_t>(256u << 10, bytes / 1024);
  e->release_pages(false);
  e->baseShared_ = shared_bytes();  // the binary's own pages: not the database's
  return e;
}

namespace {
// /proc/self/statm's resident and shared (file-backed) pages, in bytes; 0 where unknown.
std::pair<uint64_t, uint64_t> statm_bytes() {
  static const long page = sysconf(_SC_PAGESIZE);
  // One descriptor for the process's life, read again from its start each time: whole-tree
  // walks ask every few hundred contexts (an open, a parse and a close cost several times
  // the read).
  static const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  char buf[128];
  const ssize_t n = fd >= 0 ? ::pread(fd, buf, sizeof buf - 1, 0) : -1;
  if (n <= 0) return {0, 0};
  buf[n] = '\0';
  unsigned long long size = 0, resident = 0, shared = 0;
  if (std::sscanf(buf, "%llu %llu %llu", &size, &resident, &shared) != 3) return {0, 0};
  return {uint64_t(resident) * uint64_t(page), uint64_t(shared) * uint64_t(page)};
}
}  // namespace

// File-backed pages resident in the process (the binary and libraries included).
uint64_t Experiment::shared_bytes() { return statm_bytes().second; }

uint64_t Experiment::resident_bytes() { return statm_bytes().first; }

NodeKind Experiment::kind(uint32_t ctx) const {
  if (ctx == 0) return NodeKind::Root;
  auto it = std::lower_bound(entries_.begin(), entries_.end(), std::pair{ctx, 0u});
  return it != entries_.end() && it->first == ctx ? NodeKind::Entry : NodeKind::Context;
}

void Experiment::children(uint32_t ctx, std::vector<uint32_t>& out) const {
  out.clear();
  if (ctx == 0) {
    for (auto& ep : meta_.entryPoints) out.push_back(ep.ctxId);
    return;
  }
  if (!has(ctx)) return;
  // {Ctx} records from pChildren to pChildren + szChildren: the id at 0x10, the flex words'
  // count at 0x17 (as db::child_ids reads them), read through the block cache.
  const BlockFile& f = *metaBlocks_;
  const uint64_t at = uint64_t(at_[ctx]) * 8;
  const uint64_t sz = f.load<uint64_t>(at);
  uint64_t p = f.load<uint64_t>(at + 8);
  const uint64_t end = p + sz;
  if (end < p || end > f.size()) return;  // checked when opened; not trusted here
  while (p < end) {
    uint8_t rec[8];
    f.read(p + 0x10, rec, sizeof rec);
    uint32_t id;
    std::memcpy(&id, rec, 4);
    if constexpr (std::endian::native != std::endian::little) id = __builtin_bswap32(id);
    out.push_back(id);
    p += 0x20 + 8 * uint64_t(rec[7]);
  }
}

std::vector<uint32_t> Experiment::children(uint32_t ctx) const {
  std::vector<uint32_t> out;
  children(ctx, out);
  return out;
}

bool Experiment::has_children(uint32_t ctx) const {
  if (ctx == 0) return !meta_.entryPoints.empty();
  if (!has(ctx)) return false;
  return metaBlocks_->load<uint64_t>(uint64_t(at_[ctx]) * 8) != 0;  // szChildren
}

uint32_t Experiment::depth(uint32_t ctx) const {
  uint32_t d = 0;
  for (uint32_t c = ctx; c != 0 && c != kNoCtx; c = parent_[c]) ++d;
  return d;
}

uint32_t Experiment::call_depth(uint32_t ctx) const {
  uint32_t d = 0;
  for (uint32_t c = ctx; c != 0 && c != kNoCtx; c = parent_[c])
    if (function_of(c) != db::kNone) ++d;
  return d;
}

db::Context Experiment::context(uint32_t ctx) const {
  // The record's head and every flex word decode_context may read (at most 40 bytes of
  // them: function, file, line, module, offset), through the block cache.
  std::array<uint8_t, 0x20 + 48> rec;
  metaBlocks_->read(uint64_t(at_[ctx]) * 8, rec.data(), rec.size());
  return db::decode_context(ByteView(rec, std::string()), layout_, 0);
}

const db::EntryPoint& Experiment::entry(uint32_t ctx) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), std::pair{ctx, 0u});
  return meta_.entryPoints[it->second];
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

std::string Experiment::id_kind_name(uint8_t kind) const {
  const auto& names = meta_.idNames;
  return kind < names.size() ? names[kind] : "KIND" + std::to_string(kind);
}

std::string Experiment::profile_label(size_t index) const {
  if (index >= profiles_.size()) return "";
  const db::Profile& p = profiles_[index];
  if (p.flags & 1) return "summary";
  std::string label;
  if (p.idTuple)
    for (const db::Identifier& id : *p.idTuple)
      label += (label.empty() ? "" : " ") + id_kind_name(id.kind) + " " + std::to_string(id.logicalId);
  return label;
}

uint32_t Experiment::function_of(uint32_t ctx) const {
  if (ctx == 0) return db::kNone;
  if (ctx < fn16_.size()) return fn16_[ctx] == 0xffff ? db::kNone : fn16_[ctx];
  return ctx < fn_.size() ? fn_[ctx] : db::kNone;
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
  if (!has(ctx) || kind(ctx) != NodeKind::Context) return {db::kNone, 0};
  db::Context c = context(ctx);
  if (c.file != db::kNone) return {c.file, c.line};
  if (c.function != db::kNone && c.function < meta_.functions.size()) {
    const db::Function& f = meta_.functions[c.function];
    return {f.file, f.line};
  }
  return {db::kNone, 0};
}

std::string Experiment::name(uint32_t ctx) const {
  if (ctx == 0) return "<program root>";
  if (!has(ctx)) return "<context " + std::to_string(ctx) + " not in meta.db>";
  if (kind(ctx) == NodeKind::Entry) return entry(ctx).prettyName.empty() ? "<entry>" : entry(ctx).prettyName;
  const db::Context c = context(ctx);
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

double Experiment::profile_value(size_t prof, uint32_t ctx, uint16_t metricId) const {
  if (metricId == kNoMetric || prof >= profiles_.size()) return 0;
  return prof_->value(uint32_t(prof), ctx, metricId);
}

void Experiment::select_profiles(std::vector<uint32_t> profiles) {
  std::sort(profiles.begin(), profiles.end());
  profiles.erase(std::unique(profiles.begin(), profiles.end()), profiles.end());
  selected_ = std::move(profiles);
  sumToProp_.clear();
  for (const MetricView& m : metrics_) {
    if (m.inc.sum != kNoMetric) sumToProp_.push_back({m.inc.sum, m.incProp});
    if (m.exc.sum != kNoMetric) sumToProp_.push_back({m.exc.sum, m.excProp});
  }
  std::sort(sumToProp_.begin(), sumToProp_.end());
}

double Experiment::summary(uint32_t ctx, uint16_t statId) const {
  if (statId == kNoMetric) return 0;
  if (!selected_.empty()) {
    auto it = std::lower_bound(sumToProp_.begin(), sumToProp_.end(), std::pair<uint16_t, uint16_t>{statId, 0});
    return it == sumToProp_.end() || it->first != statId ? 0 : profiles_value(selected_, ctx, it->second);
  }
  return prof_->value(0, ctx, statId);
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

Expected<db::ContextValues> Experiment::context_values(uint32_t ctx) const {
  std::call_once(cct_.once, [&] {
    auto c = db::LazyCctDb::open(dir_ / "cct.db");
    if (!c.ok()) cct_.value.emplace(std::move(c).take_status());
    else cct_.value.emplace(std::optional<db::LazyCctDb>(std::move(c).value()));
  });
  if (!cct_.value->ok()) return cct_.value->status();
  cctOpen_.store(&*cct_.value->value(), std::memory_order_release);
  return (*cct_.value->value()).values(ctx);
}

Expected<const db::LazyTraceDb*> Experiment::trace() const {
  std::call_once(trace_.once, [&]() {
    std::error_code ec;
    if (!fs::exists(dir_ / "trace.db", ec)) {
      trace_.value.emplace(std::optional<db::LazyTraceDb>());
      return;
    }
    auto t = db::LazyTraceDb::open(dir_ / "trace.db");
    if (!t.ok()) trace_.value.emplace(std::move(t).take_status());
    else trace_.value.emplace(std::optional<db::LazyTraceDb>(std::move(t).value()));
  });
  if (!trace_.value->ok()) return trace_.value->status();
  const auto& t = trace_.value->value();
  if (t) traceOpen_.store(&*t, std::memory_order_release);
  return t ? &*t : nullptr;
}

void Experiment::release_pages(bool withHeap) const {
  if (withHeap) BlockFile::drop_thread_cache(), malloc_trim(0);  // a request's freed temporaries go back to the system
  // Mapped pages are a bounded cache: kept while the file pages resident in the process
  // (statm's "shared") stay under 1/1024 of the database (at least 256 KiB), all dropped above.
  if (uint64_t shared = shared_bytes(); shared < baseShared_ + pageBudget_) return;
  db::release_pages(metaFile_->bytes().data(), metaFile_->bytes().size());
  prof_->release();
  // Only once the lazy readers exist (never forces one open).
  if (auto* c = cctOpen_.load(std::memory_order_acquire)) c->release();
  if (auto* t = traceOpen_.load(std::memory_order_acquire)) t->release();
}

}  // namespace hpc::present
