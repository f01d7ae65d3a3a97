// Which binaries a measurement directory's profiles used (seed 000's hpcproflm).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "common/status.hpp"

namespace hpc::structure {

// Reads every profile's load map (in parallel) and returns the binaries that exist on
// disk, sorted, without duplicates. The vdso copies are left out: hpcprof names their
// functions from their symbols. Unreadable profiles are skipped with a warning.
Expected<std::vector<std::string>> measured_binaries(const std::filesystem::path& dir);

}  // namespace hpc::structure
