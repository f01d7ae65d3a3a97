// The structure files of the conformance kit, for tests.
#pragma once

#include <algorithm>
#include <filesystem>
#include <vector>

namespace hpc::structfile::testing {

inline std::vector<std::filesystem::path> conformance_files() {
  namespace fs = std::filesystem;
  std::vector<fs::path> out;
  fs::path kit = fs::path(HPC_SHARED_DIR) / "conformance";
  std::error_code ec;
  for (auto& e : fs::directory_iterator(kit / "struct" / "expected", ec))
    if (e.path().extension() == ".hpcstruct") out.push_back(e.path());
  for (auto& m : fs::directory_iterator(kit / "meas", ec))
    for (auto& e : fs::directory_iterator(m.path() / "structs", ec))
      if (e.path().extension() == ".hpcstruct") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace hpc::structfile::testing
