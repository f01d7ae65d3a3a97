#include "analysis/model.hpp"

#include <algorithm>

namespace hpc::analysis {

int compare(const Module* a, const Module* b) {
  if (a == b) return 0;
  if (!a || !b) return a ? 1 : -1;
  return cmp3(a->path, b->path);
}

int compare(const File* a, const File* b) {
  if (a == b) return 0;
  if (!a || !b) return a ? 1 : -1;
  return cmp3(a->path, b->path);
}

int compare(const Function* a, const Function* b) {
  if (a == b) return 0;
  if (!a || !b) return a ? 1 : -1;
  if (int c = compare(a->module, b->module)) return c;
  if (int c = cmp3(a->offset, b->offset)) return c;
  if (int c = cmp3(a->site, b->site)) return c;
  if (int c = cmp3(a->name, b->name)) return c;
  if (int c = compare(a->file, b->file)) return c;
  return cmp3(a->line, b->line);
}

const Module* Names::module(const std::string& path) {
  std::lock_guard lock(mu_);
  auto& slot = modules_[path];
  if (!slot) {
    slot = std::make_unique<Module>();
    slot->path = path;
  }
  return slot.get();
}

const File* Names::file(const std::string& path) {
  std::lock_guard lock(mu_);
  auto& slot = files_[path];
  if (!slot) {
    slot = std::make_unique<File>();
    slot->path = path;
  }
  return slot.get();
}

const Function* Names::function(const std::string& name, const Module* m, uint64_t offset,
                                const File* f, uint32_t line, uint64_t site) {
  std::lock_guard lock(mu_);
  auto& slot = functions_[FnKey(name, m, offset, f, line, site)];
  if (!slot) {
    slot = std::make_unique<Function>();
    *slot = Function{name, m, offset, f, line, site, 0};
  }
  return slot.get();
}

void Names::finalize() {
  moduleList_.clear();
  fileList_.clear();
  functionList_.clear();
  for (auto& [k, v] : modules_) moduleList_.push_back(v.get());
  for (auto& [k, v] : files_) fileList_.push_back(v.get());
  for (auto& [k, v] : functions_) functionList_.push_back(v.get());
  // The maps are keyed by path already; functions need content order.
  std::sort(functionList_.begin(), functionList_.end(),
            [](const Function* a, const Function* b) { return compare(a, b) < 0; });
  for (size_t i = 0; i < moduleList_.size(); ++i) moduleList_[i]->index = uint32_t(i);
  for (size_t i = 0; i < fileList_.size(); ++i) fileList_[i]->index = uint32_t(i);
  for (size_t i = 0; i < functionList_.size(); ++i) functionList_[i]->index = uint32_t(i);
}

}  // namespace hpc::analysis
