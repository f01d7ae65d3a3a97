#include "analysis/model.hpp"

#include <algorithm>
#include <mutex>
#include <unordered_map>

#include <oneapi/tbb/spin_mutex.h>

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

namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h;
}

}  // namespace

struct alignas(64) Names::Shard {
  tbb::spin_mutex mu;  // held for a lookup or an insertion: spun on, not slept on
  std::unordered_map<std::string_view, std::unique_ptr<Module>> modules;
  std::unordered_map<std::string_view, std::unique_ptr<File>> files;
  std::unordered_map<FnKey, std::unique_ptr<Function>, FnHash> functions;
};

size_t Names::FnHash::operator()(const FnKey& k) const {
  uint64_t h = std::hash<std::string_view>()(k.name);
  h = mix(h, reinterpret_cast<uintptr_t>(k.module));
  h = mix(h, k.offset);
  h = mix(h, reinterpret_cast<uintptr_t>(k.file));
  h = mix(h, k.line);
  return size_t(mix(h, k.site));
}

Names::Names() : shards_(std::make_unique<Shard[]>(kShards)) {}
Names::~Names() = default;

// A module's or file's object by its path: found, or made under the shard's lock.
template <typename T>
static const T* internPath(tbb::spin_mutex& mu, std::unordered_map<std::string_view, std::unique_ptr<T>>& map,
                           std::string_view path) {
  std::lock_guard lock(mu);
  if (auto it = map.find(path); it != map.end()) return it->second.get();
  auto made = std::make_unique<T>();
  made->path = std::string(path);
  T* object = made.get();
  map.emplace(std::string_view(object->path), std::move(made));  // the key views the object's path
  return object;
}

const Module* Names::module(std::string_view path) {
  Shard& sh = shards_[(std::hash<std::string_view>()(path) >> 7) % kShards];
  return internPath(sh.mu, sh.modules, path);
}

const File* Names::file(std::string_view path) {
  Shard& sh = shards_[(std::hash<std::string_view>()(path) >> 7) % kShards];
  return internPath(sh.mu, sh.files, path);
}

const Function* Names::function(std::string_view name, const Module* m, uint64_t offset, const File* f,
                                uint32_t line, uint64_t site) {
  const FnKey key{name, m, offset, f, line, site};
  Shard& sh = shards_[(FnHash()(key) >> 7) % kShards];
  std::lock_guard lock(sh.mu);
  if (auto it = sh.functions.find(key); it != sh.functions.end()) return it->second.get();
  auto fn = std::make_unique<Function>();
  *fn = Function{std::string(name), m, offset, f, line, site, 0};
  Function* made = fn.get();
  sh.functions.emplace(FnKey{made->name, m, offset, f, line, site}, std::move(fn));
  return made;
}

void Names::finalize() {
  moduleList_.clear();
  fileList_.clear();
  functionList_.clear();
  for (size_t k = 0; k < kShards; ++k) {
    for (auto& [key, v] : shards_[k].modules) moduleList_.push_back(v.get());
    for (auto& [key, v] : shards_[k].files) fileList_.push_back(v.get());
    for (auto& [key, v] : shards_[k].functions) functionList_.push_back(v.get());
  }
  // Content order: modules and files by path, functions by compare().
  std::sort(moduleList_.begin(), moduleList_.end(), [](const Module* a, const Module* b) { return a->path < b->path; });
  std::sort(fileList_.begin(), fileList_.end(), [](const File* a, const File* b) { return a->path < b->path; });
  std::sort(functionList_.begin(), functionList_.end(),
            [](const Function* a, const Function* b) { return compare(a, b) < 0; });
  for (size_t i = 0; i < moduleList_.size(); ++i) moduleList_[i]->index = uint32_t(i);
  for (size_t i = 0; i < fileList_.size(); ++i) fileList_[i]->index = uint32_t(i);
  for (size_t i = 0; i < functionList_.size(); ++i) functionList_[i]->index = uint32_t(i);
}

}  // namespace hpc::analysis
