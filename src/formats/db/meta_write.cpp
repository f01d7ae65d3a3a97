// meta.db v4 writer. Layout: header, General, IdNames, Metrics, Strings, Modules,
// Files, Functions, Context, footer; every section 8-aligned.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
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

constexpr size_t kChunk = size_t(1) << 20;

// meta.db's bytes: all of them (fd < 0), or written to `fd` and none returned.
Expected<std::vector<uint8_t>> writeMeta(const Meta& m, const ContextSource* source, int fd) {
  ByteWriter w;
  {
    // Room for the whole file at once, or with a file for all but a chunk of the Context
    // section (a buffer grown by doubling touched and copied up to three times the file's
    // size: 19 MB for 400,000 contexts). A context takes at most 0x40 bytes; names, paths and
    // functions what they take, and some.
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
    bytes += (fd < 0 ? contexts * 0x40 : kChunk + 0x40) + m.functions.size() * 0x30 + m.general.title.size() +
             m.general.description.size();
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

  // Context: the entry points, then the child arrays breadth-first, the last section. It is
  // laid out first (every array's size), so that each record is written once, with the place
  // of its children's array, in file order: with a file, it goes out a chunk at a time and is
  // never held whole (it is most of a large tree's meta.db, 19 MB at 400,000 contexts).
  w.align(8);
  const uint64_t p3 = w.size();
  const MetaContexts own(m);
  if (!source) source = &own;
  // A record's flexible fields: (offset, value) of its u64s, and where its line goes.
  struct Flex {
    detail::FlexAlloc alloc;
    std::pair<uint32_t, uint64_t> fields[4];
    size_t n = 0;
    uint32_t lineAt = UINT32_MAX;
  };
  auto flexOf = [&](const Context& c, bool values) {
    Flex f;
    if (c.function != kNone) f.fields[f.n++] = {f.alloc.take(8), values ? ptr(functionAt, c.function) : 0};
    if (c.file != kNone) {
      f.fields[f.n++] = {f.alloc.take(8), values ? ptr(fileAt, c.file) : 0};
      f.lineAt = f.alloc.take(4);
    }
    if (c.module != kNone) {
      f.fields[f.n++] = {f.alloc.take(8), values ? ptr(moduleAt, c.module) : 0};
      f.fields[f.n++] = {f.alloc.take(8), c.offset};
    }
    return f;
  };
  // Layout: every context's handle in file order (breadth-first), and each child array's
  // parent (a position in `order`; entry point e's: kEntry - e), length and bytes.
  constexpr uint32_t kEntry = UINT32_MAX;
  // Breadth-first order scatters the contexts over memory (a tree is built depth first): the
  // layout fetches contexts 2 x kAhead ahead of the one described and lists of children
  // kAhead ahead; the records' pass fetches contexts kAhead ahead.
  constexpr size_t kAhead = 8;
  struct Array {
    uint32_t parent, count;
    uint64_t bytes;
  };
  std::vector<const void*> order, kids;
  std::vector<Array> arrays;
  for (size_t e = 0; e < m.entryPoints.size(); ++e) {
    kids.clear();
    source->entryChildren(e, kids);
    if (kids.empty()) continue;
    arrays.push_back({kEntry - uint32_t(e), uint32_t(kids.size()), 0});
    order.insert(order.end(), kids.begin(), kids.end());
  }
  for (size_t k = 0, a = 0, left = arrays.empty() ? 0 : arrays[0].count; k < order.size(); ++k) {
    while (left == 0) left = arrays[++a].count;  // the array position k is in
    --left;
    const void* c = order[k];
    if (k + 2 * kAhead < order.size()) source->prefetch(order[k + 2 * kAhead]);
    if (k + kAhead < order.size()) source->prefetchChildren(order[k + kAhead]);
    arrays[a].bytes += 0x20 + 8 * flexOf(source->describe(c), false).alloc.words();
    kids.clear();
    source->children(c, kids);
    if (kids.empty()) continue;
    arrays.push_back({uint32_t(k), uint32_t(kids.size()), 0});
    order.insert(order.end(), kids.begin(), kids.end());
  }
  std::vector<uint64_t> arrayAt(arrays.size() + 1);
  arrayAt[0] = p3 + 0x10 + (m.entryPoints.empty() ? 0 : 0x20 * m.entryPoints.size());
  for (size_t a = 0; a < arrays.size(); ++a) arrayAt[a + 1] = arrayAt[a] + arrays[a].bytes;
  detail::set_section(w, 3, p3, arrayAt.back() - p3);

  // Out: w holds the file from `base` on; with a file, it is written out between records
  // once it holds a chunk.
  uint64_t base = 0;
  Status written;
  auto flush = [&](bool all) {
    if (fd < 0 || !written.ok() || (!all && w.size() < kChunk)) return;
    const std::vector<uint8_t>& b = w.buffer();
    for (size_t done = 0; done < b.size();) {
      const ssize_t n = counted_pwrite(fd, b.data() + done, b.size() - done, off_t(base + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        written = Status::error(std::string("meta.db: write failed: ") + std::strerror(errno));
        return;
      }
      done += size_t(n);
    }
    base += b.size();
    w.buffer().clear();
  };
  size_t next = 0;  // the next array, in file order
  auto children = [&](size_t at, uint32_t parent) {
    if (next < arrays.size() && arrays[next].parent == parent) {
      w.patch_le<uint64_t>(at, arrays[next].bytes);
      w.patch_le<uint64_t>(at + 8, arrayAt[next]);
      ++next;
    }
  };
  {
    const size_t h = w.size();
    w.zeros(0x10);
    w.patch_le<uint16_t>(h + 8, uint16_t(m.entryPoints.size()));
    w.patch_le<uint8_t>(h + 0xa, 0x20);
    if (!m.entryPoints.empty()) w.patch_le<uint64_t>(h, base + w.size());
  }
  for (size_t e = 0; e < m.entryPoints.size(); ++e) {
    const EntryPoint& ep = m.entryPoints[e];
    const size_t a = w.size();
    w.zeros(0x10);
    w.le<uint32_t>(ep.ctxId);
    w.le<uint16_t>(ep.entryPoint);
    w.zeros(2);
    w.le<uint64_t>(strAt[ep.prettyName]);
    children(a, kEntry - uint32_t(e));
  }
  for (size_t k = 0; k < order.size(); ++k) {
    if (k + kAhead < order.size()) source->prefetch(order[k + kAhead]);
    const Context c = source->describe(order[k]);
    const Flex f = flexOf(c, true);
    const size_t a = w.size();
    // The whole record at once, then its fields in place (one growth per context).
    w.zeros(0x20 + 8 * f.alloc.words());
    children(a, uint32_t(k));
    w.patch_le<uint32_t>(a + 0x10, c.ctxId);
    w.patch_le<uint8_t>(a + 0x14, c.flags());
    w.patch_le<uint8_t>(a + 0x15, c.relation);
    w.patch_le<uint8_t>(a + 0x16, c.lexicalType);
    w.patch_le<uint8_t>(a + 0x17, uint8_t(f.alloc.words()));
    w.patch_le<uint16_t>(a + 0x18, c.propagation);
    for (size_t x = 0; x < f.n; ++x) w.patch_le<uint64_t>(a + 0x20 + f.fields[x].first, f.fields[x].second);
    if (f.lineAt != UINT32_MAX) w.patch_le<uint32_t>(a + 0x20 + f.lineAt, c.line);
    flush(false);
  }

  w.align(8);  // (records are whole words: nothing to add)
  w.str("_meta.db");
  flush(true);
  HPC_RETURN_IF_ERROR(written);
  return std::move(w.buffer());
}

}  // namespace

std::vector<uint8_t> write_meta(const Meta& m, const ContextSource* source) {
  Expected<std::vector<uint8_t>> bytes = writeMeta(m, source, -1);
  return bytes.ok() ? std::move(*bytes) : std::vector<uint8_t>();  // no file: nothing fails
}

// The file written as write_meta lays it out, its Context section a chunk at a time.
Status write_meta(const Meta& meta, const std::filesystem::path& file, const ContextSource* contexts) {
  AtomicOutput out(file, AtomicOutput::Kind::File);
  HPC_RETURN_IF_ERROR(out.begin());
  // Written without truncating the file begin() made (see write_file_atomically).
  const int fd = ::open(out.temp_path().c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Status::error(out.temp_path().string() + ": cannot open: " + std::strerror(errno));
  Expected<std::vector<uint8_t>> rest = writeMeta(meta, contexts, fd);
  const bool closed = ::close(fd) == 0;
  if (!rest.ok()) return Status::error(out.temp_path().string() + ": " + rest.status().message());
  if (!closed) return Status::error(out.temp_path().string() + ": write failed: " + std::strerror(errno));
  return out.commit();
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
