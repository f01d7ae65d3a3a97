#include "analysis/mpi/tree_codec.hpp"

#include <string>
#include <unordered_map>

#include "analysis/mpi/wire.hpp"

namespace hpc::analysis::mpi {

namespace {

// Dense numbering of the names a tree refers to (0 = none).
template <typename T>
class Table {
public:
  uint32_t id(const T* p) {
    if (!p) return 0;
    auto [it, added] = ids_.emplace(p, uint32_t(list_.size() + 1));
    if (added) list_.push_back(p);
    return it->second;
  }
  const std::vector<const T*>& list() const { return list_; }

private:
  std::unordered_map<const T*, uint32_t> ids_;
  std::vector<const T*> list_;
};

}  // namespace

std::vector<uint8_t> encodeTree(Cct& cct) {
  cct.finalize();
  Table<Module> modules;
  Table<File> files;
  Table<Function> functions;
  ByteWriter nodes;
  nodes.le<uint32_t>(cct.size());
  for (uint32_t id = 1; id < cct.size(); ++id) {
    const Context* c = cct.byId(id);
    const ContextKey& k = c->key();
    nodes.le<uint32_t>(c->parent()->id());
    nodes.le<uint8_t>(uint8_t(k.kind));
    nodes.le<uint16_t>(uint16_t(k.entry));
    nodes.le<uint8_t>(uint8_t(k.relation));
    nodes.le<uint8_t>(uint8_t(k.type));
    nodes.le<uint8_t>(uint8_t(k.hidden));
    nodes.le<uint32_t>(functions.id(k.function));
    nodes.le<uint32_t>(files.id(k.file));
    nodes.le<uint32_t>(k.line);
    nodes.le<uint32_t>(modules.id(k.module));
    nodes.le<uint64_t>(k.offset);
  }
  // Functions name modules and files too: number them before writing those tables.
  for (const Function* f : functions.list()) {
    modules.id(f->module);
    files.id(f->file);
  }
  ByteWriter w;
  w.le<uint32_t>(uint32_t(modules.list().size()));
  for (const Module* m : modules.list()) putStr(w, m->path);
  w.le<uint32_t>(uint32_t(files.list().size()));
  for (const File* f : files.list()) putStr(w, f->path);
  w.le<uint32_t>(uint32_t(functions.list().size()));
  for (const Function* f : functions.list()) {
    putStr(w, f->name);
    w.le<uint32_t>(modules.id(f->module));
    w.le<uint64_t>(f->offset);
    w.le<uint32_t>(files.id(f->file));
    w.le<uint32_t>(f->line);
    w.le<uint64_t>(f->site);
  }
  w.bytes(nodes.buffer().data(), nodes.size());
  return std::move(w.buffer());
}

Status mergeTree(std::span<const uint8_t> bytes, Cct& cct, Names& names) {
  WireReader r(bytes);
  auto bad = [](const std::string& what) { return Status::error("calling-context tree from another rank: " + what); };
  std::vector<const Module*> modules{nullptr};
  for (uint32_t n = r.get<uint32_t>(); n-- && !r.failed();) modules.push_back(names.module(r.str()));
  std::vector<const File*> files{nullptr};
  for (uint32_t n = r.get<uint32_t>(); n-- && !r.failed();) files.push_back(names.file(r.str()));
  std::vector<const Function*> functions{nullptr};
  for (uint32_t n = r.get<uint32_t>(); n-- && !r.failed();) {
    std::string name = r.str();
    uint32_t m = r.get<uint32_t>();
    uint64_t offset = r.get<uint64_t>();
    uint32_t f = r.get<uint32_t>();
    uint32_t line = r.get<uint32_t>();
    uint64_t site = r.get<uint64_t>();
    if (r.failed() || m >= modules.size() || f >= files.size()) return bad("bad function entry");
    functions.push_back(names.function(name, modules[m], offset, files[f], line, site));
  }
  uint32_t count = r.get<uint32_t>();
  if (r.failed()) return bad("truncated name tables");
  std::vector<Context*> byId(count, nullptr);
  if (count) byId[0] = cct.root();
  for (uint32_t id = 1; id < count; ++id) {
    uint32_t parent = r.get<uint32_t>();
    ContextKey k;
    k.kind = NodeKind(r.get<uint8_t>());
    k.entry = EntryKind(r.get<uint16_t>());
    k.relation = Relation(r.get<uint8_t>());
    k.type = LexType(r.get<uint8_t>());
    k.hidden = r.get<uint8_t>() != 0;
    uint32_t fn = r.get<uint32_t>(), file = r.get<uint32_t>();
    k.line = r.get<uint32_t>();
    uint32_t mod = r.get<uint32_t>();
    k.offset = r.get<uint64_t>();
    if (r.failed()) return bad("truncated at context " + std::to_string(id));
    // Pre-order: a parent always precedes its children.
    if (parent >= id || fn >= functions.size() || file >= files.size() || mod >= modules.size())
      return bad("bad reference at context " + std::to_string(id));
    k.function = functions[fn];
    k.file = files[file];
    k.module = modules[mod];
    byId[id] = byId[parent]->child(k);
  }
  return Status();
}

}  // namespace hpc::analysis::mpi
