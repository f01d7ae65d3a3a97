// Adapter: structure files (hpc_fmt_structfile) -> the pipeline's StructureSource.
// An instruction's nesting is the chain of scopes above the statement (S or C) whose
// address ranges hold it; the last such statement in document order wins.
#include <tbb/parallel_for.h>

#include <map>
#include <mutex>
#include <set>

#include "analysis/io.hpp"
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
  std::string file;
  out.clear();
  for (const SScope* s : index.path(offset)) {
    ScopeStep st;
    st.line = static_cast<uint32_t>(s->line.value_or(0));
    switch (s->kind) {
    case Kind::File:
      file = s->name.value_or("");
      continue;
    case Kind::Procedure:
      st.kind = ScopeStep::Kind::Procedure;
      st.name = s->name.value_or("");
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

class StructFiles final : public StructureSource {
public:
  StructFiles(std::vector<structfile::Structure> files, std::vector<PathReplacement> replace)
      : files_(std::move(files)), replace_(std::move(replace)) {
    for (const auto& f : files_)
      for (const SScope& lm : f.children)
        if (lm.kind == Kind::LoadModule && lm.name)
          modules_.emplace(*lm.name, std::make_unique<structfile::AddressIndex>(lm));
  }

  bool lookup(const std::string& modulePath, uint64_t offset,
              std::vector<ScopeStep>& out) const override {
    auto it = find(modulePath);
    return it != modules_.end() && structureSteps(*it->second, offset, out);
  }

  bool mayCover(const std::string& modulePath) const override {
    if (find(modulePath) != modules_.end()) return true;
    hintReplacement(modulePath);
    return false;
  }

private:
  using Modules = std::map<std::string, std::unique_ptr<structfile::AddressIndex>>;
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

  std::vector<structfile::Structure> files_;
  std::vector<PathReplacement> replace_;
  Modules modules_;
  mutable std::mutex hintedMu_;
  mutable std::set<std::string> hinted_;
};

}  // namespace

Expected<std::unique_ptr<StructureSource>> loadStructure(const std::vector<fs::path>& files, unsigned threads,
                                                         std::vector<PathReplacement> replace) {
  std::vector<structfile::Structure> loaded(files.size());
  std::vector<Status> errors(files.size());
  tbb::parallel_for(size_t(0), files.size(), [&](size_t i) {
    auto s = structfile::load(files[i]);
    if (s.ok())
      loaded[i] = std::move(*s);
    else
      errors[i] = s.status();
  });
  for (const Status& e : errors) HPC_RETURN_IF_ERROR(e);
  return std::unique_ptr<StructureSource>(std::make_unique<StructFiles>(std::move(loaded), std::move(replace)));
}

}  // namespace hpc::analysis
