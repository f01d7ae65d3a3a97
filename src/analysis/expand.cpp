#include "analysis/expand.hpp"

#include <string>
#include <vector>

namespace hpc::analysis {

namespace {

ContextKey entryKey(EntryKind k) {
  ContextKey key;
  key.kind = NodeKind::Entry;
  key.entry = k;
  return key;
}

const char* gpuPlaceholderName(Placeholder p) {
  switch (p) {
  case Placeholder::GpuCopy: return "<gpu copy>";
  case Placeholder::GpuMemset: return "<gpu memset>";
  case Placeholder::GpuSync: return "<gpu sync>";
  case Placeholder::GpuAlloc: return "<gpu alloc>";
  default: return "<gpu kernel>";
  }
}

}  // namespace

Context* Expander::gpuOperation(Context* launch, Placeholder p) const {
  // Each placeholder kind is a Function of its own, even where two share a name (a kernel
  // and the stream trace path): the reference lists them apart. `site` tells them apart.
  ContextKey k;
  k.type = LexType::Function;
  k.relation = Relation::Call;
  k.function = names_.function(gpuPlaceholderName(p), nullptr, 0, nullptr, 0, uint64_t(p));
  return launch->child(k);
}

Context* Expander::expandInstruction(Context* callSite, const std::string& modulePath,
                                     uint64_t offset, Gpu gpu) const {
  const Module* module = names_.module(modulePath);
  std::vector<ScopeStep> steps;
  // hpcrun already records a return address minus one for callers, so the offset
  // itself lies in the calling instruction.
  if (structure_ && structure_->lookup(modulePath, offset, steps) && !steps.empty()) {
    Context* at = callSite;
    Context* entry = nullptr;
    bool first = true;
    for (const ScopeStep& s : steps) {
      ContextKey k;
      const File* file = s.file.empty() ? nullptr : names_.file(s.file);
      switch (s.kind) {
      case ScopeStep::Kind::Procedure:
      case ScopeStep::Kind::Inline:
        k.type = LexType::Function;
        k.relation = s.kind == ScopeStep::Kind::Procedure ? Relation::Call : Relation::InlinedCall;
        k.function = names_.function(s.name, module, s.kind == ScopeStep::Kind::Procedure ? s.offset : 0,
                                     file, s.line, s.site);
        break;
      case ScopeStep::Kind::Loop:
        k.type = LexType::Loop;
        k.relation = first ? Relation::Call : Relation::Lexical;
        k.file = file;
        k.line = s.line;
        k.module = module;
        k.offset = s.offset;
        break;
      case ScopeStep::Kind::Line:
        k.type = LexType::Line;
        k.relation = first ? Relation::Call : Relation::Lexical;
        k.file = file;
        k.line = s.line;
        break;
      }
      at = at->child(k);
      if (first && gpu == Gpu::Entry && s.kind == ScopeStep::Kind::Procedure && s.offset == offset) entry = at;
      first = false;
    }
    ContextKey leaf;
    leaf.type = LexType::Instruction;
    leaf.relation = Relation::Lexical;
    leaf.module = module;
    leaf.offset = offset;
    leaf.hidden = true;
    Context* instruction = at->child(leaf);
    return entry ? entry : instruction;
  }
  // No structure: the instruction stands for its whole (unknown) function.
  if (gpu == Gpu::Sample) {
    ContextKey unknown;
    unknown.type = LexType::Function;
    unknown.relation = Relation::Call;
    callSite = callSite->child(unknown);
  }
  ContextKey k;
  k.type = LexType::Instruction;
  k.relation = Relation::Call;
  k.module = module;
  k.offset = offset;
  return callSite->child(k);
}

Expected<NodeMap> Expander::unify(const ProfileTree& tree) const {
  std::unordered_map<uint16_t, const std::string*> modules;
  for (const auto& [id, path] : tree.loadMap) modules[id] = &path;
  std::unordered_map<uint32_t, const TreeNode*> byId;
  byId.reserve(tree.nodes.size());
  for (const TreeNode& n : tree.nodes) byId[n.id] = &n;

  std::unordered_map<uint32_t, Context*> map;
  map.reserve(tree.nodes.size());
  Context* root = cct_.root();
  std::vector<const TreeNode*> chain;
  for (const TreeNode& start : tree.nodes) {
    if (map.count(start.id)) continue;
    // Resolve the unmapped ancestors first, outermost first; the file need not list
    // parents before children.
    chain.clear();
    for (const TreeNode* n = &start; n && !map.count(n->id);) {
      chain.push_back(n);
      if (chain.size() > tree.nodes.size())
        return Status::error("calling-context tree has a cycle at node " + std::to_string(n->id));
      auto it = n->parent ? byId.find(n->parent) : byId.end();
      n = it == byId.end() ? nullptr : it->second;
    }
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      const TreeNode& n = **it;
      Context* parent = nullptr;
      bool orphan = true;
      if (n.parent) {
        auto pm = map.find(n.parent);
        if (pm != map.end()) {
          parent = pm->second;
          orphan = false;
        }
      }
      Context* self = nullptr;
      switch (n.placeholder) {
      case Placeholder::Root: self = root; break;
      case Placeholder::NoActivity: self = nullptr; break;
      case Placeholder::MainThread: self = root->child(entryKey(EntryKind::MainThread)); break;
      case Placeholder::Thread: self = root->child(entryKey(EntryKind::ApplicationThread)); break;
      case Placeholder::Other: self = parent ? parent : root; break;
      case Placeholder::GpuKernel:
      case Placeholder::GpuCopy:
      case Placeholder::GpuMemset:
      case Placeholder::GpuSync:
      case Placeholder::GpuAlloc:
      case Placeholder::GpuTrace:
        if (orphan || !parent || parent == root) parent = root->child(entryKey(EntryKind::Unknown));
        self = gpuOperation(parent, n.placeholder);
        break;
      case Placeholder::None: {
        // Code reached without a known entry (partial unwind) hangs on "unknown entry".
        if (orphan || !parent || parent == root)
          parent = root->child(entryKey(EntryKind::Unknown));
        auto mod = modules.find(n.module);
        std::string unknown = "<unknown load module " + std::to_string(n.module) + ">";
        auto up = orphan ? byId.end() : byId.find(n.parent);
        Gpu gpu = Gpu::No;
        if (up != byId.end() && isGpuPlaceholder(up->second->placeholder))
          gpu = n.unwound ? Gpu::Entry : Gpu::Sample;
        self = expandInstruction(parent, mod == modules.end() ? unknown : *mod->second, n.offset, gpu);
        break;
      }
      }
      map.emplace(n.id, self);
    }
  }
  return NodeMap(map);
}

}  // namespace hpc::analysis
