// Test-side symbolization of (load module, offset) with libelf: function symbols from
// .symtab, else .dynsym.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace hpc::measurement::test {

class Symbolizer {
public:
  // "" when the offset is in no known function.
  const std::string& name(const std::string& module, uint64_t offset);

private:
  struct Fn {
    uint64_t end;
    std::string name;
  };
  std::map<std::string, std::map<uint64_t, Fn>> modules_;
};

}  // namespace hpc::measurement::test
