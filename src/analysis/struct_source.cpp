// Adapter: structure files (hpc_fmt_structfile) -> the pipeline's StructureSource.
// An instruction's nesting is the chain of scopes above the statement (S or C) whose
// address ranges hold it; the last such statement in document order wins.
#include <tbb/parallel_for.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <atomic>
#include <map>
#include <mutex>
#include <set>

#include "analysis/io.hpp"
#include "common/file.hpp"
#include "formats/structfile/structfile.hpp"

namespace hpc::analysis {

namespace fs = std::filesystem;
using structfile::Kind;
using SScope = structfile::Scope;

namespace {

uint64_t firstAddress(const SScope& s) {
  return s.vranges && !s.vranges->empty() ? s.vranges->front().begin : 0;
}

}  // namespace

bool structureSteps(const structfile::AddressIndex& index, uint64_t offset, std::vector<ScopeStep>& out,
                    uint64_t siteBase) {
  const SScope* leaf = index.find(offset);
  if (!leaf || (leaf->kind != Kind::Statement && leaf->kind != Kind::Call)) return false;
  std::string_view file;
  auto text = [](const std::optional<std::string>& v) { return v ? std::string_view(*v) : std::string_view(); };
  out.clear();
  thread_local std::vector<const SScope*> path;  // one a thread, not one a lookup
  index.path(offset, path);
  for (const SScope* s : path) {
    ScopeStep st;
    st.line = static_cast<uint32_t>(s->line.value_or(0));
    switch (s->kind) {
    case Kind::File:
      file = text(s->name);
      continue;
    case Kind::Procedure:
      st.kind = ScopeStep::Kind::Procedure;
      st.name = text(s->name);
      st.file = file;
      st.offset = firstAddress(*s);
      break;
    case Kind::Alien:
      if (s->file) file = *s->file;
      st.file = file;
      if (s->name && !s->name->empty()) {
        st.kind = ScopeStep::Kind::Inline;
        st.name = *s->name;
        st.site = siteBase + s->id;
      } else {
        st.kind = ScopeStep::Kind::Line;  // the call site of the inlined code below
      }
      break;
    case Kind::Loop:
      if (s->file) file = *s->file;
      st.kind = ScopeStep::Kind::Loop;
      st.file = file;
      st.offset = firstAddress(*s);
      break;
    case Kind::Statement:
    case Kind::Call:
      st.kind = ScopeStep::Kind::Line;
      st.file = file;
      break;
    default:
      continue;
    }
    out.push_back(std::move(st));
  }
  return !out.empty();
}

namespace {

// A C element with a target, in the procedure entered at `proc`: a call site.
void addCallSite(const SScope& s, uint64_t proc, std::vector<CallSite>& out) {
  if (s.kind == Kind::Call && s.target && s.vranges && !s.vranges->empty())
    out.push_back({s.vranges->front().begin, proc, *s.target});
}

}  // namespace

void appendCallSites(const SScope& scope, std::vector<CallSite>& out) {
  // Iterative (a deep nest of scopes must not overflow the stack): each scope with the
  // entry of the procedure it lies in.
  std::vector<std::pair<const SScope*, uint64_t>> todo{{&scope, 0}};
  while (!todo.empty()) {
    auto [s, proc] = todo.back();
    todo.pop_back();
    if (s->kind == Kind::Procedure) proc = firstAddress(*s);
    addCallSite(*s, proc, out);
    for (auto it = s->children.rbegin(); it != s->children.rend(); ++it) todo.push_back({&*it, proc});
  }
}

namespace {

// One structure file, read lazily: checked whole and indexed up front (structfile::
// index_units), each group of units whose address ranges overlap (mostly one procedure)
// read from the file, parsed and indexed when an address in it is first looked up. A
// module's answers are those of an AddressIndex over the whole load module: an address
// only ever involves the units whose ranges hold it, all in its group, parsed together in
// document order and at the same depths.
class LazyFile {
public:
  LazyFile(fs::path path, int fd, structfile::UnitIndex index) : path_(std::move(path)), fd_(fd), index_(std::move(index)) {
    // Groups: units linked by overlapping ranges (union-find), each group's ranges merged
    // into disjoint hulls, by module.
    std::vector<uint32_t> parent(index_.units.size());
    for (uint32_t u = 0; u < parent.size(); ++u) parent[u] = u;
    auto root = [&](uint32_t u) {
      while (parent[u] != u) u = parent[u] = parent[parent[u]];
      return u;
    };
    std::vector<structfile::UnitIndex::Range>& ranges = index_.ranges;
    std::stable_sort(ranges.begin(), ranges.end(), [&](const auto& a, const auto& b) {
      const uint32_t ma = index_.units[a.unit].module, mb = index_.units[b.unit].module;
      return ma != mb ? ma < mb : a.begin < b.begin;
    });
    struct Hull {
      uint64_t begin, end;
      uint32_t module, unit;
    };
    std::vector<Hull> hulls;
    hulls.reserve(ranges.size());
    for (const auto& r : ranges) {
      const uint32_t m = index_.units[r.unit].module;
      if (!hulls.empty() && hulls.back().module == m && r.begin < hulls.back().end) {
        hulls.back().end = std::max(hulls.back().end, r.end);
        parent[root(r.unit)] = root(hulls.back().unit);
      } else {
        hulls.push_back({r.begin, r.end, m, r.unit});
      }
    }
    std::vector<structfile::UnitIndex::Range>().swap(ranges);
    // A group's units, in document order; each hull names its group.
    std::vector<uint32_t> groupOf(parent.size(), UINT32_MAX);
    uint32_t groups = 0;
    for (uint32_t u = 0; u < parent.size(); ++u)
      if (uint32_t& g = groupOf[root(u)]; g == UINT32_MAX) g = groups++;
    // Each group's units in one array, in document order (a vector a group was an allocation
    // each, tens of thousands for a large binary's file).
    groups_ = std::make_unique<Group[]>(groups);
    for (uint32_t u = 0; u < parent.size(); ++u) ++groups_[groupOf[root(u)]].count;
    for (uint32_t g = 0, at = 0; g < groups; ++g) {
      groups_[g].first = at;
      at += groups_[g].count;
      groups_[g].count = 0;
    }
    groupUnits_.resize(parent.size());
    for (uint32_t u = 0; u < parent.size(); ++u) {
      Group& g = groups_[groupOf[root(u)]];
      groupUnits_[g.first + g.count++] = u;
    }
    modules_.resize(index_.modules.size());
    {
      std::vector<size_t> spans(modules_.size(), 0);
      for (const Hull& h : hulls) ++spans[h.module];
      for (size_t m = 0; m < modules_.size(); ++m) modules_[m].reserve(spans[m]);
    }
    for (const Hull& h : hulls) modules_[h.module].push_back({h.begin, h.end, groupOf[root(h.unit)]});
    std::string prolog;
    if (readBytes(0, index_.prolog_end, prolog).ok()) prolog_ = structfile::unit_prolog(prolog, index_);
  }
  ~LazyFile() { ::close(fd_); }
  LazyFile(const LazyFile&) = delete;
  LazyFile& operator=(const LazyFile&) = delete;

  const structfile::UnitIndex& index() const { return index_; }

  // The nesting of `offset` in module m.
  bool lookup(uint32_t m, uint64_t offset, std::vector<ScopeStep>& out) const {
    const std::vector<Span>& spans = modules_[m];
    auto it = std::upper_bound(spans.begin(), spans.end(), offset, [](uint64_t a, const Span& s) { return a < s.begin; });
    if (it == spans.begin() || offset >= (--it)->end) return false;
    const Parsed* p = parsed(it->group);
    return p && structureSteps(p->index, offset, out);
  }

  // The groups holding these offsets of module m, parsed in parallel.
  void prepare(uint32_t m, std::vector<uint64_t>& offsets) const {
    const std::vector<Span>& spans = modules_[m];
    std::sort(offsets.begin(), offsets.end());
    std::vector<uint32_t> todo;
    size_t k = 0;
    for (const Span& sp : spans) {
      k = size_t(std::lower_bound(offsets.begin() + k, offsets.end(), sp.begin) - offsets.begin());
      if (k == offsets.size()) break;
      if (offsets[k] < sp.end && !groups_[sp.group].done.load(std::memory_order_acquire)) todo.push_back(sp.group);
    }
    std::sort(todo.begin(), todo.end());
    todo.erase(std::unique(todo.begin(), todo.end()), todo.end());
    tbb::parallel_for(size_t(0), todo.size(), [&](size_t i) { parsed(todo[i]); });
  }

  // Every call site of module m with a target: each group's read from the model where it
  // is parsed already, else streamed through once and not kept (a GPU library's structure
  // holds thousands of procedures; its samples fall in a few, whose models are all kept).
  void callSites(uint32_t m, std::vector<CallSite>& out) const {
    out.clear();
    std::vector<uint32_t> groups;
    for (const Span& sp : modules_[m]) groups.push_back(sp.group);
    std::sort(groups.begin(), groups.end());
    groups.erase(std::unique(groups.begin(), groups.end()), groups.end());
    struct Calls final : structfile::Visitor {
      explicit Calls(std::vector<CallSite>& o) : out(o) {}
      Status enter(const SScope& s, int) override {
        if (s.kind == Kind::Procedure) proc = firstAddress(s);
        addCallSite(s, proc, out);
        return Status();
      }
      bool wants_text(Kind) const override { return false; }
      std::vector<CallSite>& out;
      uint64_t proc = 0;
    } calls(out);
    auto read = [this](uint64_t at, uint64_t n, std::string& into) { return readBytes(at, n, into); };
    for (uint32_t g : groups) {
      const Group& group = groups_[g];
      if (group.done.load(std::memory_order_acquire)) {
        if (group.parsed) appendCallSites(group.parsed->doc, out);
        continue;
      }
      if (prolog_.empty()) continue;
      auto doc = structfile::units_document(read, index_, prolog_,
                                            std::span(groupUnits_).subspan(group.first, group.count));
      // A damaged group is said when a lookup parses it; its calls are left out.
      if (doc.ok()) (void)structfile::parse(*doc, path_.string(), calls);
    }
  }

private:
  struct Span {
    uint64_t begin, end;
    uint32_t group;
  };
  struct Parsed {
    explicit Parsed(structfile::Structure d) : doc(std::move(d)), index(doc.children.front()) {}
    structfile::Structure doc;  // the root, its load module, the group's units
    structfile::AddressIndex index;
  };
  struct Group {
    uint32_t first = 0, count = 0;  // its units: groupUnits_[first, first + count)
    std::once_flag once;
    std::atomic<bool> done{false};
    std::unique_ptr<Parsed> parsed;
  };

  const Parsed* parsed(uint32_t g) const {
    Group& group = groups_[g];
    std::call_once(group.once, [&] {
      auto read = [this](uint64_t at, uint64_t n, std::string& out) { return readBytes(at, n, out); };
      auto doc = prolog_.empty() ? Expected<std::string>(Status::error(path_.string() + ": cannot read it again"))
                                 : structfile::units_document(read, index_, prolog_,
                                                              std::span(groupUnits_).subspan(group.first, group.count));
      auto model = doc.ok() ? structfile::parse_model(*doc, path_.string()) : Expected<structfile::Structure>(doc.status());
      if (model.ok() && model->children.size() == 1) {
        group.parsed = std::make_unique<Parsed>(std::move(*model));
      } else {
        addBinaryWarning(path_.string() + ": " +
                         (model.ok() ? std::string("unexpected content") : model.status().message()) +
                         "; its addresses there are attributed without structure");
      }
      group.done.store(true, std::memory_order_release);
    });
    return group.parsed.get();
  }

  Status readBytes(uint64_t at, uint64_t n, std::string& out) const {
    const size_t was = out.size();
    out.resize(was + n);
    for (uint64_t done = 0; done < n;) {
      const ssize_t got = counted_pread(fd_, out.data() + was + done, n - done, off_t(at + done));
      if (got <= 0) return Status::error(path_.string() + ": cannot read it again (changed since it was read?)");
      done += uint64_t(got);
    }
    return Status();
  }

  fs::path path_;
  int fd_;
  structfile::UnitIndex index_;
  std::string prolog_;  // for the units' documents (empty: unreadable)
  std::vector<std::vector<Span>> modules_;  // by module: disjoint, sorted
  std::unique_ptr<Group[]> groups_;  // units whose ranges overlap, transitively
  std::vector<uint32_t> groupUnits_;  // every group's units, a group's together
};

class StructFiles final : public StructureSource {
public:
  StructFiles(std::vector<std::unique_ptr<LazyFile>> files, std::vector<PathReplacement> replace)
      : files_(std::move(files)), replace_(std::move(replace)) {
    for (const auto& f : files_)
      for (uint32_t m = 0; m < f->index().modules.size(); ++m)
        modules_.emplace(f->index().modules[m].name, Module{f.get(), m});
  }

  bool lookup(const std::string& modulePath, uint64_t offset,
              std::vector<ScopeStep>& out) const override {
    auto it = find(modulePath);
    return it != modules_.end() && it->second.file->lookup(it->second.module, offset, out);
  }

  void prepare(const std::string& modulePath, std::vector<uint64_t>& offsets) const override {
    auto it = find(modulePath);
    if (it != modules_.end()) it->second.file->prepare(it->second.module, offsets);
  }

  void callSites(const std::string& modulePath, std::vector<CallSite>& out) const override {
    out.clear();
    auto it = find(modulePath);
    if (it != modules_.end()) it->second.file->callSites(it->second.module, out);
  }

  bool mayCover(const std::string& modulePath) const override {
    if (find(modulePath) != modules_.end()) return true;
    hintReplacement(modulePath);
    return false;
  }

private:
  struct Module {
    const LazyFile* file;
    uint32_t module;
  };
  using Modules = std::map<std::string, Module>;
  Modules::const_iterator find(const std::string& modulePath) const {
    auto it = modules_.find(modulePath);
    if (it != modules_.end() || replace_.empty()) return it;
    const std::string replaced = replacePath(modulePath, replace_);
    return replaced == modulePath ? it : modules_.find(replaced);
  }

  // A module no structure file covers, where one describes a binary of the same file name
  // elsewhere: most likely the same binary, built or measured under another directory. Said
  // once a module (mayCover is asked by every profile).
  void hintReplacement(const std::string& modulePath) const {
    const fs::path measured(modulePath);
    if (measured.filename().empty() || !measured.is_absolute()) return;
    {
      std::lock_guard lock(hintedMu_);
      if (!hinted_.insert(modulePath).second) return;
    }
    for (const auto& [path, index] : modules_) {
      const fs::path described(path);
      if (described.filename() != measured.filename()) continue;
      addBinaryWarning(modulePath + ": no structure file describes this binary, but one describes " + path +
                       "; if that is the same binary, add -R '" + measured.parent_path().string() + "=" +
                       described.parent_path().string() + "'");
      return;
    }
  }

  std::vector<std::unique_ptr<LazyFile>> files_;
  std::vector<PathReplacement> replace_;
  Modules modules_;
  mutable std::mutex hintedMu_;
  mutable std::set<std::string> hinted_;
};

}  // namespace

Expected<std::unique_ptr<StructureSource>> loadStructure(const std::vector<fs::path>& files, unsigned threads,
                                                         std::vector<PathReplacement> replace) {
  std::vector<std::unique_ptr<LazyFile>> loaded(files.size());
  std::vector<Status> errors(files.size());
  tbb::parallel_for(size_t(0), files.size(), [&](size_t i) {
    // A large file in chunks of 1 MiB at once (its check and index are otherwise one
    // expat pass, about 100 MB/s: the largest file's alone before any profile is read).
    auto index = threads > 1 ? structfile::index_units(files[i], size_t(1) << 20,
                                                       [](size_t n, const std::function<void(size_t)>& f) {
                                                         tbb::parallel_for(size_t(0), n, f);
                                                       })
                             : structfile::index_units(files[i]);
    if (!index.ok()) {
      errors[i] = index.status();
      return;
    }
    const int fd = ::open(files[i].c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      errors[i] = Status::error(files[i].string() + ": cannot open: " + std::strerror(errno));
      return;
    }
    loaded[i] = std::make_unique<LazyFile>(files[i], fd, std::move(*index));
  });
  for (const Status& e : errors) HPC_RETURN_IF_ERROR(e);
  return std::unique_ptr<StructureSource>(std::make_unique<StructFiles>(std::move(loaded), std::move(replace)));
}

}  // namespace hpc::analysis
