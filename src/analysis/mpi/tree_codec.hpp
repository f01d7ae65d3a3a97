// The calling-context tree as bytes between ranks: the contexts in id order (parent, key)
// with the modules, files and functions they name, by content. Decoding merges into any
// tree, so a rank-level tree can be folded into another (the reduction) and the unified
// tree into every rank's own (the broadcast of the numbering: after the merge a rank's
// tree holds every context, and Cct::finalize() numbers it as rank 0 does).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "analysis/cct.hpp"
#include "analysis/model.hpp"
#include "common/status.hpp"

namespace hpc::analysis::mpi {

// Finalizes `cct` (re-numbering it) and encodes it. MT: externally synchronized.
std::vector<uint8_t> encodeTree(Cct& cct);

// Adds every context of `bytes` to `cct`, interning names in `names`. The tree must be
// finalized again afterwards. MT: externally synchronized.
Status mergeTree(std::span<const uint8_t> bytes, Cct& cct, Names& names);

}  // namespace hpc::analysis::mpi
