// meta.db v4 reader.
#include <unordered_map>

#include "formats/db/db.hpp"
#include "formats/db/internal.hpp"

namespace hpc::db {
namespace {
using detail::in_section;
using detail::Section;
using detail::str_in;

template <typename T> T ld(const ByteView& v, uint64_t off) {
  return v.load<T, std::endian::little>(off);
}

// Reads an array header {p, n, sz} and checks the array lies inside `s` with a
// stride of at least `minSize`.
Status check_array(const ByteView& v, const Section& s, uint64_t at, uint64_t p, uint64_t n,
                   uint64_t stride, uint64_t minSize, std::string_view what) {
  if (n == 0) return Status();
  if (stride < minSize)
    return v.error(at, "expected the size of " + std::string(what) + " to be at least " +
                           std::to_string(minSize) + ", found " + std::to_string(stride));
  if (p % 8 != 0) return v.error(at, "expected an 8-aligned pointer to " + std::string(what));
  return in_section(v, s, p, n * stride, std::string(what) + " array");
}

struct Reader {
  const ByteView& v;
  std::vector<Section> sec;  // General, IdNames, Metrics, Context, Strings, Modules, Files, Functions
  Meta m;
  std::unordered_map<uint64_t, uint32_t> scopeAt, moduleAt, fileAt, functionAt;
  uint64_t visited = 0;
  const ContextVisitor* visit = nullptr;  // set: the tree goes to the visitor, not into m
  MetaLayout layout;

  const Section& S(int i) const { return sec[i]; }

  Status general() {
    const Section& s = S(0);
    HPC_RETURN_IF_ERROR(in_section(v, s, s.p, 0x10, "General Properties header"));
    HPC_ASSIGN_OR_RETURN(m.general.title, str_in(v, s, ld<uint64_t>(v, s.p), "pTitle"));
    HPC_ASSIGN_OR_RETURN(m.general.description, str_in(v, s, ld<uint64_t>(v, s.p + 8), "pDescription"));
    return Status();
  }

  Status idNames() {
    const Section& s = S(1);
    HPC_RETURN_IF_ERROR(in_section(v, s, s.p, 0x9, "Identifier Names header"));
    uint64_t pp = ld<uint64_t>(v, s.p);
    uint8_t n = ld<uint8_t>(v, s.p + 8);
    HPC_RETURN_IF_ERROR(check_array(v, s, s.p, pp, n, 8, 8, "ppNames"));
    for (uint32_t i = 0; i < n; ++i) {
      HPC_ASSIGN_OR_RETURN(auto name, str_in(v, s, ld<uint64_t>(v, pp + 8 * i), "ppNames[i]"));
      m.idNames.push_back(std::move(name));
    }
    return Status();
  }

  Expected<uint16_t> scopeOf(uint64_t at, uint64_t p) {
    auto it = scopeAt.find(p);
    if (it == scopeAt.end()) return v.error(at, "expected pScope to point at a {PS} in pScopes");
    return uint16_t(it->second);
  }

  Status metrics() {
    const Section& s = S(2);
    HPC_RETURN_IF_ERROR(in_section(v, s, s.p, 0x1b, "Performance Metrics header"));
    uint64_t pMetrics = ld<uint64_t>(v, s.p), pScopes = ld<uint64_t>(v, s.p + 0x10);
    uint32_t nMetrics = ld<uint32_t>(v, s.p + 8);
    uint8_t szMetric = ld<uint8_t>(v, s.p + 0xc), szInst = ld<uint8_t>(v, s.p + 0xd),
            szSum = ld<uint8_t>(v, s.p + 0xe), szScope = ld<uint8_t>(v, s.p + 0x1a);
    uint16_t nScopes = ld<uint16_t>(v, s.p + 0x18);
    HPC_RETURN_IF_ERROR(check_array(v, s, s.p + 0x10, pScopes, nScopes, szScope, 0x10, "pScopes"));
    HPC_RETURN_IF_ERROR(check_array(v, s, s.p, pMetrics, nMetrics, szMetric, 0x20, "pMetrics"));
    for (uint32_t i = 0; i < nScopes; ++i) {
      uint64_t at = pScopes + uint64_t(i) * szScope;
      Scope sc;
      HPC_ASSIGN_OR_RETURN(sc.name, str_in(v, s, ld<uint64_t>(v, at), "pScopeName"));
      sc.type = ld<uint8_t>(v, at + 8);
      sc.propagationIndex = ld<uint8_t>(v, at + 9);
      scopeAt[at] = i;
      m.scopes.push_back(std::move(sc));
    }
    for (uint32_t i = 0; i < nMetrics; ++i) {
      uint64_t at = pMetrics + uint64_t(i) * szMetric;
      Metric md;
      HPC_ASSIGN_OR_RETURN(md.name, str_in(v, s, ld<uint64_t>(v, at), "pName"));
      uint64_t pInsts = ld<uint64_t>(v, at + 8), pSums = ld<uint64_t>(v, at + 0x10);
      uint16_t nInsts = ld<uint16_t>(v, at + 0x18), nSums = ld<uint16_t>(v, at + 0x1a);
      HPC_RETURN_IF_ERROR(check_array(v, s, at + 8, pInsts, nInsts, szInst, 0x10, "pScopeInsts"));
      HPC_RETURN_IF_ERROR(check_array(v, s, at + 0x10, pSums, nSums, szSum, 0x18, "pSummaries"));
      for (uint32_t j = 0; j < nInsts; ++j) {
        uint64_t a = pInsts + uint64_t(j) * szInst;
        ScopeInstance si;
        HPC_ASSIGN_OR_RETURN(si.scope, scopeOf(a, ld<uint64_t>(v, a)));
        si.propMetricId = ld<uint16_t>(v, a + 8);
        md.scopeInsts.push_back(si);
      }
      for (uint32_t j = 0; j < nSums; ++j) {
        uint64_t a = pSums + uint64_t(j) * szSum;
        Summary ss;
        HPC_ASSIGN_OR_RETURN(ss.scope, scopeOf(a, ld<uint64_t>(v, a)));
        HPC_ASSIGN_OR_RETURN(ss.formula, str_in(v, s, ld<uint64_t>(v, a + 8), "pFormula"));
        ss.combine = ld<uint8_t>(v, a + 0x10);
        ss.statMetricId = ld<uint16_t>(v, a + 0x12);
        md.summaries.push_back(std::move(ss));
      }
      m.metrics.push_back(std::move(md));
    }
    return Status();
  }

  // Modules and Files share a layout: {p, n u32, sz u16} then {flags u32, pPath}.
  template <typename T>
  Status pathList(int si, const char* what, std::vector<T>& out,
                  std::unordered_map<uint64_t, uint32_t>& at) {
    const Section& s = S(si);
    HPC_RETURN_IF_ERROR(in_section(v, s, s.p, 0xe, std::string(what) + " header"));
    uint64_t p = ld<uint64_t>(v, s.p);
    uint32_t n = ld<uint32_t>(v, s.p + 8);
    uint16_t sz = ld<uint16_t>(v, s.p + 0xc);
    HPC_RETURN_IF_ERROR(check_array(v, s, s.p, p, n, sz, 0x10, what));
    (si == 5 ? layout.pModules : layout.pFiles) = p;
    (si == 5 ? layout.szModule : layout.szFile) = sz;
    for (uint32_t i = 0; i < n; ++i) {
      uint64_t a = p + uint64_t(i) * sz;
      T t;
      t.flags = ld<uint32_t>(v, a);
      HPC_ASSIGN_OR_RETURN(t.path, str_in(v, S(4), ld<uint64_t>(v, a + 8), "pPath"));
      at[a] = i;
      out.push_back(std::move(t));
    }
    return Status();
  }

  Expected<uint32_t> lookup(const std::unordered_map<uint64_t, uint32_t>& map, uint64_t at,
                            uint64_t p, const char* what) {
    auto it = map.find(p);
    if (it == map.end()) return v.error(at, std::string("expected ") + what);
    return it->second;
  }

  Status functions() {
    const Section& s = S(7);
    HPC_RETURN_IF_ERROR(in_section(v, s, s.p, 0xe, "Functions header"));
    uint64_t p = ld<uint64_t>(v, s.p);
    uint32_t n = ld<uint32_t>(v, s.p + 8);
    uint16_t sz = ld<uint16_t>(v, s.p + 0xc);
    HPC_RETURN_IF_ERROR(check_array(v, s, s.p, p, n, sz, 0x28, "pFunctions"));
    layout.pFunctions = p, layout.szFunction = sz;
    for (uint32_t i = 0; i < n; ++i) {
      uint64_t a = p + uint64_t(i) * sz;
      Function f;
      if (uint64_t pn = ld<uint64_t>(v, a)) {
        HPC_ASSIGN_OR_RETURN(f.name, str_in(v, S(4), pn, "pName"));
      }
      if (uint64_t pm = ld<uint64_t>(v, a + 8)) {
        HPC_ASSIGN_OR_RETURN(f.module, lookup(moduleAt, a + 8, pm, "pModule to point at a module"));
      }
      f.offset = ld<uint64_t>(v, a + 0x10);
      if (uint64_t pf = ld<uint64_t>(v, a + 0x18)) {
        HPC_ASSIGN_OR_RETURN(f.file, lookup(fileAt, a + 0x18, pf, "pFile to point at a file"));
      }
      f.line = ld<uint32_t>(v, a + 0x20);
      f.flags = ld<uint32_t>(v, a + 0x24);
      functionAt[a] = i;
      m.functions.push_back(std::move(f));
    }
    return Status();
  }

  // Reads the {Ctx} array [p, p+sz) and, depth first, the arrays below it into `out`,
  // without recursion: deep recursion in an application makes call chains of hundreds of
  // thousands of contexts. (Each {Ctx} is read once: a cycle is an error.)
  Status children(uint64_t at, uint64_t p, uint64_t sz, std::vector<Context>& out, uint32_t parent) {
    // Frames hold where their contexts go: a list only grows while its frame is on top, when
    // no frame points into it (depth first), so those pointers stay valid.
    struct Frame {
      uint64_t p, end;  // the next {Ctx}, the array's end
      std::vector<Context>* out;
      uint32_t parent;
    };
    const Section& s = S(3);
    std::vector<Frame> stack;
    auto open = [&](uint64_t hdr, uint64_t q, uint64_t n, std::vector<Context>* into, uint32_t up) -> Status {
      if (n == 0) return Status();
      if (q % 8 != 0) return v.error(hdr, "expected an 8-aligned pChildren");
      HPC_RETURN_IF_ERROR(in_section(v, s, q, n, "pChildren array"));
      stack.push_back({q, q + n, into, up});
      return Status();
    };
    HPC_RETURN_IF_ERROR(open(at, p, sz, &out, parent));
    while (!stack.empty()) {
      Frame& f = stack.back();
      if (f.p >= f.end) {
        stack.pop_back();
        continue;
      }
      p = f.p;
      const uint64_t end = f.end;
      if (++visited > S(3).sz / 0x20)
        return v.error(p, "expected each context once (the tree has a cycle)");
      HPC_RETURN_IF_ERROR(in_section(v, s, p, 0x20, "{Ctx}"));
      if (end - p < 0x20) return v.error(p, "expected a whole {Ctx} inside szChildren");
      Context c;
      c.ctxId = ld<uint32_t>(v, p + 0x10);
      uint8_t flags = ld<uint8_t>(v, p + 0x14);
      c.relation = ld<uint8_t>(v, p + 0x15);
      c.lexicalType = ld<uint8_t>(v, p + 0x16);
      uint64_t size = 0x20 + 8 * uint64_t(ld<uint8_t>(v, p + 0x17));
      c.propagation = ld<uint16_t>(v, p + 0x18);
      if (size > end - p) return v.error(p + 0x17, "expected nFlexWords to fit inside szChildren");
      detail::FlexAlloc flex;
      auto sub = [&](uint32_t n) -> Expected<uint64_t> {
        uint32_t o = flex.take(n);
        if (0x20 + o + n > size) return v.error(p + 0x17, "expected nFlexWords to cover the flex fields");
        return n == 8 ? ld<uint64_t>(v, p + 0x20 + o) : ld<uint32_t>(v, p + 0x20 + o);
      };
      if (flags & 1) {
        HPC_ASSIGN_OR_RETURN(uint64_t pf, sub(8));
        HPC_ASSIGN_OR_RETURN(c.function, lookup(functionAt, p + 0x20, pf, "pFunction to point at a function"));
      }
      if (flags & 2) {
        HPC_ASSIGN_OR_RETURN(uint64_t pf, sub(8));
        HPC_ASSIGN_OR_RETURN(c.file, lookup(fileAt, p + 0x20, pf, "pFile to point at a file"));
        HPC_ASSIGN_OR_RETURN(uint64_t line, sub(4));
        c.line = uint32_t(line);
      }
      if (flags & 4) {
        HPC_ASSIGN_OR_RETURN(uint64_t pm, sub(8));
        HPC_ASSIGN_OR_RETURN(c.module, lookup(moduleAt, p + 0x20, pm, "pModule to point at a module"));
        HPC_ASSIGN_OR_RETURN(c.offset, sub(8));
      }
      f.p = p + size;  // the next sibling, once this one's subtree is read
      if (visit) HPC_RETURN_IF_ERROR((*visit)(c.ctxId, f.parent, p, &c));
      std::vector<Context>* below = nullptr;
      if (!visit) {
        f.out->push_back(std::move(c));
        below = &f.out->back().children;
      }
      const uint32_t id = visit ? c.ctxId : f.out->back().ctxId;
      // `f` is not used past here: opening the array below may move the stack.
      HPC_RETURN_IF_ERROR(open(p + 8, ld<uint64_t>(v, p + 8), ld<uint64_t>(v, p), below, id));
    }
    return Status();
  }

  Status context() {
    const Section& s = S(3);
    HPC_RETURN_IF_ERROR(in_section(v, s, s.p, 0xb, "Context Tree header"));
    uint64_t p = ld<uint64_t>(v, s.p);
    uint16_t n = ld<uint16_t>(v, s.p + 8);
    uint8_t sz = ld<uint8_t>(v, s.p + 0xa);
    HPC_RETURN_IF_ERROR(check_array(v, s, s.p, p, n, sz, 0x20, "pEntryPoints"));
    for (uint32_t i = 0; i < n; ++i) {
      uint64_t a = p + uint64_t(i) * sz;
      EntryPoint e;
      e.ctxId = ld<uint32_t>(v, a + 0x10);
      e.entryPoint = ld<uint16_t>(v, a + 0x14);
      HPC_ASSIGN_OR_RETURN(e.prettyName, str_in(v, S(4), ld<uint64_t>(v, a + 0x18), "pPrettyName"));
      if (visit) HPC_RETURN_IF_ERROR((*visit)(e.ctxId, 0, a, nullptr));
      HPC_RETURN_IF_ERROR(children(a + 8, ld<uint64_t>(v, a + 8), ld<uint64_t>(v, a), e.children, e.ctxId));
      m.entryPoints.push_back(std::move(e));
    }
    return Status();
  }
};

}  // namespace

Expected<Meta> read_meta(const ByteView& v) { return read_meta_visiting(v, nullptr, nullptr); }

Expected<Meta> read_meta_visiting(const ByteView& v, const ContextVisitor* visit, MetaLayout* layout) {
  Reader r{v, {}, {}, {}, {}, {}, {}, 0, visit, {}};
  HPC_ASSIGN_OR_RETURN(r.sec, detail::read_header(v, "meta", "_meta.db",
                                                  {"General", "IdNames", "Metrics", "Context",
                                                   "Strings", "Modules", "Files", "Functions"}));
  HPC_RETURN_IF_ERROR(r.general());
  HPC_RETURN_IF_ERROR(r.idNames());
  HPC_RETURN_IF_ERROR(r.metrics());
  HPC_RETURN_IF_ERROR(r.pathList(5, "pModules", r.m.modules, r.moduleAt));
  HPC_RETURN_IF_ERROR(r.pathList(6, "pFiles", r.m.files, r.fileAt));
  HPC_RETURN_IF_ERROR(r.functions());
  HPC_RETURN_IF_ERROR(r.context());
  if (layout) *layout = r.layout;
  return std::move(r.m);
}

Context decode_context(const ByteView& v, const MetaLayout& l, uint64_t p) {
  Context c;
  c.ctxId = ld<uint32_t>(v, p + 0x10);
  uint8_t flags = ld<uint8_t>(v, p + 0x14);
  c.relation = ld<uint8_t>(v, p + 0x15);
  c.lexicalType = ld<uint8_t>(v, p + 0x16);
  c.propagation = ld<uint16_t>(v, p + 0x18);
  detail::FlexAlloc flex;
  auto sub = [&](uint32_t n) -> uint64_t {
    uint32_t o = flex.take(n);
    return n == 8 ? ld<uint64_t>(v, p + 0x20 + o) : ld<uint32_t>(v, p + 0x20 + o);
  };
  if (flags & 1) c.function = uint32_t((sub(8) - l.pFunctions) / l.szFunction);
  if (flags & 2) {
    c.file = uint32_t((sub(8) - l.pFiles) / l.szFile);
    c.line = uint32_t(sub(4));
  }
  if (flags & 4) {
    c.module = uint32_t((sub(8) - l.pModules) / l.szModule);
    c.offset = sub(8);
  }
  return c;
}

void child_ids(const ByteView& v, uint64_t at, std::vector<uint32_t>& out) {
  uint64_t sz = ld<uint64_t>(v, at), p = ld<uint64_t>(v, at + 8), end = p + sz;
  while (sz && p < end) {
    out.push_back(ld<uint32_t>(v, p + 0x10));
    p += 0x20 + 8 * uint64_t(ld<uint8_t>(v, p + 0x17));
  }
}

}  // namespace hpc::db
