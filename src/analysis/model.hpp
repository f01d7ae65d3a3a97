// The source-level vocabulary of a database: load modules, source files and functions,
// interned once per analysis so contexts can refer to them by pointer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace hpc::analysis {

struct Module {
  std::string path;
  uint32_t index = 0;  // dense, assigned at finalization (sorted by path)
};

struct File {
  std::string path;
  uint32_t index = 0;
};

// A function as the structure knows it. Two inlined copies of one source function are
// distinct Functions (the reference keeps one per inline site), told apart by `site`.
struct Function {
  std::string name;
  const Module* module = nullptr;
  uint64_t offset = 0;  // entry address in module; 0 when unknown (inlined code)
  const File* file = nullptr;
  uint32_t line = 0;
  uint64_t site = 0;  // structure-assigned identity of the inline site, 0 for a procedure
  uint32_t index = 0;
};

// Three-way comparison of two values: -1, 0 or 1.
template <typename T>
int cmp3(const T& a, const T& b) {
  return a < b ? -1 : (b < a ? 1 : 0);
}

// Content ordering, so that ids do not depend on which thread interned what first.
int compare(const Module* a, const Module* b);
int compare(const File* a, const File* b);
int compare(const Function* a, const Function* b);

// Thread-safe interning of modules, files and functions.
class Names {
public:
  Names();
  ~Names();
  Names(const Names&) = delete;
  Names& operator=(const Names&) = delete;

  // MT: thread-safe; returned pointers stay valid for the lifetime of Names.
  const Module* module(std::string_view path);
  const File* file(std::string_view path);
  const Function* function(std::string_view name, const Module* m, uint64_t offset, const File* f, uint32_t line,
                           uint64_t site);

  // MT: externally synchronized (after all interning). Assigns dense indices in content
  // order and returns the objects in that order.
  void finalize();
  const std::vector<Module*>& modules() const { return moduleList_; }
  const std::vector<File*>& files() const { return fileList_; }
  const std::vector<Function*>& functions() const { return functionList_; }

private:
  // Every expanded instruction interns its steps' files and functions: in hash tables
  // spread over shards, each with its own lock (one lock and ordered maps of strings had
  // the threads of a real measurement with structure waiting on each other, and comparing
  // paths). Keys view the names of the objects they lead to.
  struct FnKey {
    std::string_view name;
    const Module* module;
    uint64_t offset;
    const File* file;
    uint32_t line;
    uint64_t site;
    bool operator==(const FnKey&) const = default;
  };
  struct FnHash {
    size_t operator()(const FnKey& k) const;
  };
  struct Shard;
  static constexpr size_t kShards = 64;
  std::unique_ptr<Shard[]> shards_;
  std::vector<Module*> moduleList_;
  std::vector<File*> fileList_;
  std::vector<Function*> functionList_;
};

}  // namespace hpc::analysis
