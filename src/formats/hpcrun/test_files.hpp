// Conformance measurement files for the tests.
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace hpc::hpcrun::testing {

inline std::filesystem::path meas_dir() {
  return std::filesystem::path(HPC_SHARED_DIR) / "conformance" / "meas";
}

// Every file with the given extension in every measurement directory, sorted.
inline std::vector<std::filesystem::path> meas_files(const std::string& ext) {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  for (auto& d : std::filesystem::directory_iterator(meas_dir(), ec))
    if (d.is_directory())
      for (auto& f : std::filesystem::directory_iterator(d.path(), ec))
        if (f.path().extension() == ext) out.push_back(f.path());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace hpc::hpcrun::testing
