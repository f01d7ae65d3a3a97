// Structure -> structure file (reference/hpc-structure.dtd), through src/formats.
#pragma once

#include <string>

#include "common/status.hpp"
#include "structure/model.hpp"

namespace hpc::structure {

// Writes atomically: a failed run leaves no partial file at `path`.
Status write_structure_file(const Structure& s, const std::string& path);

}  // namespace hpc::structure
