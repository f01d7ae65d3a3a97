// meta.db v4 writer. Layout: header, General, IdNames, Metrics, Strings, Modules,
// Files, Functions, Context, footer; every section 8-aligned.
#include <deque>
#include <unordered_map>

#include "common/file.hpp"
#include "formats/db/db.hpp"
#include "formats/db/internal.hpp"

namespace hpc::db {
namespace {

// Strings placed at the end of a section: pointers are patched once their offsets are known.
class StringPool {
public:
  void ref(size_t patchAt, const std::string& s) { refs_.push_back({patchAt, s}); }
  void flush(ByteWriter& w) {
    std::unordered_map<std::string, uint64_t> at;
    for (auto& [patch, s] : refs_) {
      auto it = at.find(s);
      if (it == at.end()) {
        it = at.emplace(s, w.size()).first;
        w.cstr(s);
      }
      w.patch_le<uint64_t>(patch, it->second);
    }
    refs_.clear();
  }

private:
  std::vector<std::pair<size_t, std::string>> refs_;
};

// Meta::entryPoints' Context trees as a ContextSource.
class MetaContexts final : public ContextSource {
public:
  explicit MetaContexts(const Meta& m) : m_(m) {}
  void entryChildren(size_t e, std::vector<const void*>& out) const override { add(m_.entryPoints[e].children, out); }
  void children(const void* c, std::vector<const void*>& out) const override {
    add(static_cast<const Context*>(c)->children, out);
  }
  Context describe(const void* c) const override {
    const Context& x = *static_cast<const Context*>(c);
    Context d;  // all but the children
    d.ctxId = x.ctxId;
    d.relation = x.relation;
    d.lexicalType = x.lexicalType;
    d.propagation = x.propagation;
    d.function = x.function;
    d.file = x.file;
    d.line = x.line;
    d.module = x.module;
    d.offset = x.offset;
    return d;
  }
  uint64_t size() const override { return 0; }  // write_meta counts them itself

private:
  static void add(const ContextList& kids, std::vector<const void*>& out) {
    for (const Context& k : kids) out.push_back(&k);
  }
  const Meta& m_;
};

}  // namespace

std::vector<uint8_t> write_meta(const Meta& m, const ContextSource* source) {
  ByteWriter w;
  {
    // Room for the whole file at once (a buffer grown by doubling touched and copied up to
    // three times the file's size: 19 MB for 400,000 contexts). A context takes at most 0x40
    // bytes; names, paths and functions what they take, and some.
    uint64_t bytes = 4096, contexts = 0;
    std::vector<const ContextList*> todo;
    for (const EntryPoint& e : m.entryPoints) {
      bytes += 0x20 + e.prettyName.size();
      todo.push_back(&e.children);
    }
    while (!todo.empty()) {
      const ContextList* kids = todo.back();
      todo.pop_back();
      contexts += kids->size();
      for (const Context& c : *kids)
        if (!c.children.empty()) todo.push_back(&c.children);
    }
    if (source) contexts = source->size();
    bytes += contexts * 0x40 + m.functions.size() * 0x30 + m.general.title.size() + m.general.description.size();
    for (const Metric& x : m.metrics) bytes += 0x40 + x.name.size() + x.scopeInsts.size() * 0x10 + x.summaries.size() * 0x40;
    for (const auto& f : m.functions) bytes += f.name ? f.name->size() + 1 : 0;
    for (const auto& x : m.modules) bytes += 0x20 + x.path.size();
    for (const auto& x : m.files) bytes += 0x20 + x.path.size();
    for (const auto& x : m.idNames) bytes += 0x10 + x.size();
    w.buffer().reserve(bytes);
  }
  detail::begin_file(w, "meta", 8);
  auto section = [&](size_t index, auto&& body) {
    w.align(8);
    size_t p = w.size();
    body();
    detail::set_section(w, index, p, w.size() - p);
  };
  StringPool pool;

  section(0, [&] {  // General
    size_t h = w.size();
    w.zeros(0x10);
    pool.ref(h, m.general.title);
    pool.ref(h + 8, m.general.description);
    pool.flush(w);
  });

  section(1, [&] {  // IdNames
    size_t h = w.size();
    w.zeros(0x10);
    w.patch_le<uint8_t>(h + 8, uint8_t(m.idNames.size()));
    if (!m.idNames.empty()) w.patch_le<uint64_t>(h, w.size());
    for (auto& n : m.idNames) {
      pool.ref(w.size(), n);
      w.zeros(8);
    }
    pool.flush(w);
  });

  section(2, [&] {  // Metrics
    size_t h = w.size();
    w.zeros(0x20);
    w.patch_le<uint32_t>(h + 8, uint32_t(m.metrics.size()));
    w.patch_le<uint8_t>(h + 0xc, 0x20);
    w.patch_le<uint8_t>(h + 0xd, 0x10);
    w.patch_le<uint8_t>(h + 0xe, 0x18);
    w.patch_le<uint16_t>(h + 0x18, uint16_t(m.scopes.size()));
    w.patch_le<uint8_t>(h + 0x1a, 0x10);
    size_t pMetrics = w.size();
    if (!m.metrics.empty()) w.patch_le<uint64_t>(h, pMetrics);
    w.zeros(0x20 * m.metrics.size());
    // Scopes come after the per-metric arrays; remember which pointers name which scope.
    std::vector<std::pair<size_t, uint16_t>> scopeRefs;
    for (size_t i = 0; i < m.metrics.size(); ++i) {
      const Metric& md = m.metrics[i];
      size_t a = pMetrics + 0x20 * i;
      pool.ref(a, md.name);
      w.patch_le<uint16_t>(a + 0x18, uint16_t(md.scopeInsts.size()));
      w.patch_le<uint16_t>(a + 0x1a, uint16_t(md.summaries.size()));
      if (!md.scopeInsts.empty()) w.patch_le<uint64_t>(a + 8, w.size());
      for (auto& si : md.scopeInsts) {
        scopeRefs.push_back({w.size(), si.scope});
        w.le<uint64_t>(0);
        w.le<uint16_t>(si.propMetricId);
        w.zeros(6);
      }
      if (!md.summaries.empty()) w.patch_le<uint64_t>(a + 0x10, w.size());
      for (auto& ss : md.summaries) {
        scopeRefs.push_back({w.size(), ss.scope});
        w.le<uint64_t>(0);
        pool.ref(w.size(), ss.formula);
        w.le<uint64_t>(0);
        w.le<uint8_t>(ss.combine);
        w.le<uint8_t>(0);
        w.le<uint16_t>(ss.statMetricId);
        w.zeros(4);
      }
    }
    size_t pScopes = w.size();
    if (!m.scopes.empty()) w.patch_le<uint64_t>(h + 0x10, pScopes);
    for (auto& sc : m.scopes) {
      pool.ref(w.size(), sc.name);
      w.le<uint64_t>(0);
      w.le<uint8_t>(sc.type);
      w.le<uint8_t>(sc.propagationIndex);
      w.zeros(6);
    }
    for (auto& [at, scope] : scopeRefs)
      w.patch_le<uint64_t>(at, scope < m.scopes.size() ? pScopes + 0x10 * scope : 0);
    pool.flush(w);
  });

  // Common string table: every string of Modules, Files, Functions and Context.
  std::unordered_map<std::string, uint64_t> strAt;
  section(4, [&] {
    auto add = [&](const std::string& s) {
      if (strAt.emplace(s, w.size()).second) w.cstr(s);
    };
    for (auto& x : m.modules) add(x.path);
    for (auto& x : m.files) add(x.path);
    for (auto& x : m.functions)
      if (x.name) add(*x.name);
    for (auto& e : m.entryPoints) add(e.prettyName);
  });

  std::vector<uint64_t> moduleAt, fileAt, functionAt;
  auto pathList = [&](size_t index, const auto& list, std::vector<uint64_t>& at) {
    section(index, [&] {
      size_t h = w.size();
      w.zeros(0x10);
      w.patch_le<uint32_t>(h + 8, uint32_t(list.size()));
      w.patch_le<uint16_t>(h + 0xc, 0x10);
      if (!list.empty()) w.patch_le<uint64_t>(h, w.size());
      for (auto& x : list) {
        at.push_back(w.size());
        w.le<uint32_t>(x.flags);
        w.zeros(4);
        w.le<uint64_t>(strAt[x.path]);
      }
    });
  };
  pathList(5, m.modules, moduleAt);
  pathList(6, m.files, fileAt);
  auto ptr = [](const std::vector<uint64_t>& at, uint32_t i) -> uint64_t {
    return i < at.size() ? at[i] : 0;
  };

  section(7, [&] {  // Functions
    size_t h = w.size();
    w.zeros(0x10);
    w.patch_le<uint32_t>(h + 8, uint32_t(m.functions.size()));
    w.patch_le<uint16_t>(h + 0xc, 0x28);
    if (!m.functions.empty()) w.patch_le<uint64_t>(h, w.size());
    for (auto& f : m.functions) {
      functionAt.push_back(w.size());
      w.le<uint64_t>(f.name ? strAt[*f.name] : 0);
      w.le<uint64_t>(ptr(moduleAt, f.module));
      w.le<uint64_t>(f.offset);
      w.le<uint64_t>(ptr(fileAt, f.file));
      w.le<uint32_t>(f.line);
      w.le<uint32_t>(f.flags);
    }
  });

  section(3, [&] {  // Context: entry points, then child arrays breadth-first
    size_t h = w.size();
    w.zeros(0x10);
    w.patch_le<uint16_t>(h + 8, uint16_t(m.entryPoints.size()));
    w.patch_le<uint8_t>(h + 0xa, 0x20);
    if (!m.entryPoints.empty()) w.patch_le<uint64_t>(h, w.size());
    const MetaContexts own(m);
    if (!source) source = &own;
    // One {Ctx} record; its children's array is patched in when the array is written.
    auto record = [&](const Context& c) {
      size_t a = w.size();
      detail::FlexAlloc flex;
      std::pair<uint32_t, uint64_t> fields[4];  // (offset, value) of u64s: no allocation per context
      size_t numFields = 0;
      uint32_t lineAt = UINT32_MAX;
      if (c.function != kNone) fields[numFields++] = {flex.take(8), ptr(functionAt, c.function)};
      if (c.file != kNone) {
        fields[numFields++] = {flex.take(8), ptr(fileAt, c.file)};
        lineAt = flex.take(4);
      }
      if (c.module != kNone) {
        fields[numFields++] = {flex.take(8), ptr(moduleAt, c.module)};
        fields[numFields++] = {flex.take(8), c.offset};
      }
      // The whole record at once, then its fields in place (one growth per context).
      w.zeros(0x20 + 8 * flex.words());
      w.patch_le<uint32_t>(a + 0x10, c.ctxId);
      w.patch_le<uint8_t>(a + 0x14, c.flags());
      w.patch_le<uint8_t>(a + 0x15, c.relation);
      w.patch_le<uint8_t>(a + 0x16, c.lexicalType);
      w.patch_le<uint8_t>(a + 0x17, uint8_t(flex.words()));
      w.patch_le<uint16_t>(a + 0x18, c.propagation);
      for (size_t f = 0; f < numFields; ++f) w.patch_le<uint64_t>(a + 0x20 + fields[f].first, fields[f].second);
      if (lineAt != UINT32_MAX) w.patch_le<uint32_t>(a + 0x20 + lineAt, c.line);
      return a;
    };
    auto entry = [&](const EntryPoint& e) {
      size_t a = w.size();
      w.zeros(0x10);
      w.le<uint32_t>(e.ctxId);
      w.le<uint16_t>(e.entryPoint);
      w.zeros(2);
      w.le<uint64_t>(strAt[e.prettyName]);
      return a;
    };
    {
      // Breadth-first: each pending array is a run of handles in one pool, consumed from the
      // front. Without a source, Meta::entryPoints' own trees are the source.
      std::vector<const void*> pool, kids;
      struct Pending {
        size_t parent;        // where its record is, to patch
        size_t first, count;  // its children in pool
      };
      std::deque<Pending> todo;
      for (size_t i = 0; i < m.entryPoints.size(); ++i) {
        const size_t a = entry(m.entryPoints[i]);
        kids.clear();
        source->entryChildren(i, kids);
        if (!kids.empty()) {
          todo.push_back({a, pool.size(), kids.size()});
          pool.insert(pool.end(), kids.begin(), kids.end());
        }
      }
      while (!todo.empty()) {
        const Pending at = todo.front();
        todo.pop_front();
        size_t p = w.size();
        for (size_t k = at.first; k < at.first + at.count; ++k) {
          const void* c = pool[k];
          const size_t a = record(source->describe(c));
          kids.clear();
          source->children(c, kids);
          if (!kids.empty()) {
            todo.push_back({a, pool.size(), kids.size()});
            pool.insert(pool.end(), kids.begin(), kids.end());
          }
        }
        w.patch_le<uint64_t>(at.parent, w.size() - p);
        w.patch_le<uint64_t>(at.parent + 8, p);
      }
    }
  });

  w.align(8);
  w.str("_meta.db");
  return std::move(w.buffer());
}

Status write_meta(const Meta& meta, const std::filesystem::path& file, const ContextSource* contexts) {
  auto bytes = write_meta(meta, contexts);
  return write_file_atomically(file, bytes);
}

ContextList::~ContextList() {
  std::vector<Context> pending;
  for (Context& c : *this) {
    for (Context& k : c.children) pending.push_back(std::move(k));
    c.children.clear();  // moved from: nothing below them
  }
  while (!pending.empty()) {
    Context c = std::move(pending.back());
    pending.pop_back();
    for (Context& k : c.children) pending.push_back(std::move(k));
    c.children.clear();
  }
}

}  // namespace hpc::db
