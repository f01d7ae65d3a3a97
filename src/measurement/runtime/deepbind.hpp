// Objects opened with RTLD_DEEPBIND bound to the runtime's interposed functions
// (deepbind.cpp). Not for the sample handler: it allocates and takes the loader's lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace hpc::rt {

// The load addresses of the objects loaded now, sorted (taken before the dlopen).
std::vector<uintptr_t> deepbindBefore();
// Each object `handle`'s dlopen loaded (those not in `before`): its imports that the runtime
// interposes, bound by the deep binding to a library loaded before, pointed at the runtime's
// definitions. Returns how many slots were written.
size_t deepbindRebind(void* handle, const std::vector<uintptr_t>& before);

}  // namespace hpc::rt
