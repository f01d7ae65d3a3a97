// Canonical text (for comparison with the reference reader) and the readable dump.
#include <algorithm>
#include <bit>
#include <cstdio>
#include <fstream>
#include <ostream>
#include <sstream>
#include <tuple>

#include "common/file.hpp"
#include "formats/db/db.hpp"

namespace hpc::db {
namespace fs = std::filesystem;

namespace {

std::string fbits(double v) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(std::bit_cast<uint64_t>(v)));
  return buf;
}

std::string opt_str(const Meta& m, uint32_t i, int what) {
  if (i == kNone) return "-";
  if (what == 0) return i < m.functions.size() && m.functions[i].name ? *m.functions[i].name : "-";
  if (what == 1) return i < m.files.size() ? m.files[i].path : "-";
  return i < m.modules.size() ? m.modules[i].path : "-";
}

// Pre-order, without recursion (call chains can be hundreds of thousands deep).
void ctx_text(const Meta& m, const std::vector<Context>& top, uint32_t topParent, std::ostream& os) {
  std::vector<std::pair<const Context*, uint32_t>> stack;  // (context, its parent's id)
  for (auto it = top.rbegin(); it != top.rend(); ++it) stack.emplace_back(&*it, topParent);
  while (!stack.empty()) {
    const auto [cp, parent] = stack.back();
    stack.pop_back();
    const Context& c = *cp;
    char off[32] = "-";
    if (c.module != kNone) std::snprintf(off, sizeof off, "%llx", static_cast<unsigned long long>(c.offset));
    os << "ctx " << c.ctxId << "|parent " << parent << "|rel " << int(c.relation) << "|lex "
       << int(c.lexicalType) << "|prop " << c.propagation << "|fn " << opt_str(m, c.function, 0)
       << "|file " << opt_str(m, c.file, 1) << "|line "
       << (c.file != kNone ? std::to_string(c.line) : "-") << "|mod " << opt_str(m, c.module, 2)
       << "|off " << off << "\n";
    for (auto it = c.children.rbegin(); it != c.children.rend(); ++it) stack.emplace_back(&*it, c.ctxId);
  }
}

template <typename K, typename S>
std::vector<std::tuple<K, S, double>> sorted_nonzero(const Sparse<K, S>& v) {
  std::vector<std::tuple<K, S, double>> out;
  for (size_t i = 0; i < v.key.size(); ++i)
    for (uint64_t j = v.start[i]; j < v.start[i + 1] && j < v.size(); ++j)
      if (v.value[j] != 0) out.emplace_back(v.key[i], v.sub[j], v.value[j]);
  std::stable_sort(out.begin(), out.end(), [](auto& a, auto& b) {
    return std::tie(std::get<0>(a), std::get<1>(a)) < std::tie(std::get<0>(b), std::get<1>(b));
  });
  return out;
}

}  // namespace

std::string canonical_text(const Database& db) {
  std::ostringstream os;
  const Meta& m = db.meta;
  for (auto& e : m.entryPoints) {
    os << "entry " << e.ctxId << "|kind " << e.entryPoint << "|name " << e.prettyName << "\n";
    ctx_text(m, e.children, e.ctxId, os);
  }
  for (size_t i = 0; i < db.profiles.size(); ++i) {
    const Profile& p = db.profiles[i];
    os << "prof " << i << "|flags " << (p.flags & 1) << "|ids ";
    if (p.idTuple)
      for (size_t j = 0; j < p.idTuple->size(); ++j) {
        const Identifier& id = (*p.idTuple)[j];
        os << (j ? " " : "") << int(id.kind) << ":" << (id.flags & 1) << ":" << id.logicalId << ":" << id.physicalId;
      }
    os << "\n";
    for (auto& [c, mid, v] : sorted_nonzero(p.values))
      os << "pv " << i << " " << c << " " << mid << " " << fbits(v) << "\n";
  }
  for (size_t c = 0; c < db.contexts.size(); ++c)
    for (auto& [mid, p, v] : sorted_nonzero(db.contexts[c]))
      os << "cv " << c << " " << mid << " " << p << " " << fbits(v) << "\n";
  if (db.trace) {
    os << "trange " << db.trace->minTimestamp << " " << db.trace->maxTimestamp << "\n";
    for (auto& t : db.trace->traces) {
      os << "trace " << t.profIndex << "|";
      for (size_t j = 0; j < t.line.size(); ++j)
        os << (j ? " " : "") << t.line[j].timestamp << ":" << t.line[j].ctxId;
      os << "\n";
    }
  }
  return os.str();
}

namespace {
void dump_meta(const Meta& m, std::ostream& os) {
  os << "meta.db\n  title: " << m.general.title << "\n  description: " << m.general.description << "\n";
  os << "  id names:";
  for (size_t i = 0; i < m.idNames.size(); ++i) os << " " << i << "=" << m.idNames[i];
  os << "\n  scopes:\n";
  for (size_t i = 0; i < m.scopes.size(); ++i)
    os << "    [" << i << "] " << m.scopes[i].name << " type " << int(m.scopes[i].type) << " bit "
       << int(m.scopes[i].propagationIndex) << "\n";
  os << "  metrics:\n";
  for (auto& md : m.metrics) {
    os << "    " << md.name << "\n";
    for (auto& si : md.scopeInsts) os << "      prop #" << si.propMetricId << " scope " << si.scope << "\n";
    for (auto& ss : md.summaries)
      os << "      stat #" << ss.statMetricId << " scope " << ss.scope << " formula " << ss.formula
         << " combine " << int(ss.combine) << "\n";
  }
  os << "  modules: " << m.modules.size() << ", files: " << m.files.size()
     << ", functions: " << m.functions.size() << "\n";
}
}  // namespace

Status dump(const fs::path& p, std::ostream& os) {
  std::error_code ec;
  if (fs::is_directory(p, ec)) {
    HPC_ASSIGN_OR_RETURN(Database db, read_database(p));
    dump_meta(db.meta, os);
    os << canonical_text(db);
    return Status();
  }
  HPC_ASSIGN_OR_RETURN(MappedFile f, MappedFile::open(p));
  ByteView v = f.view();
  if (v.size() < 14) return v.error(0, "expected a v4 database file header");
  std::string fmt(reinterpret_cast<const char*>(v.bytes().data()) + 10, 4);
  Database db;
  if (fmt == "meta") {
    HPC_ASSIGN_OR_RETURN(db.meta, read_meta(v));
    dump_meta(db.meta, os);
  } else if (fmt == "prof") {
    HPC_ASSIGN_OR_RETURN(db.profiles, read_profile_db(v));
  } else if (fmt == "ctxt") {
    HPC_ASSIGN_OR_RETURN(db.contexts, read_cct_db(v));
  } else if (fmt == "trce") {
    HPC_ASSIGN_OR_RETURN(db.trace, read_trace_db(v));
  } else {
    return v.error(10, "expected format meta, prof, ctxt or trce");
  }
  os << canonical_text(db);
  return Status();
}

}  // namespace hpc::db
