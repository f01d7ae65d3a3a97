#pragma once
// What the interposing files (interpose.cpp, waits.cpp) share: the export attribute of an
// interposed function, and REAL(fn), the next definition of fn (libc's, or another
// preloaded library's), looked up once into the slot real_<fn>.
#include <dlfcn.h>

#define HPC_EXPORT extern "C" __attribute__((visibility("default")))

namespace hpc::rt {

template <typename Fn>
Fn nextDefinition(Fn& slot, const char* name) {
  if (!slot) slot = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
  return slot;
}

}  // namespace hpc::rt

#define REAL(fn) ::hpc::rt::nextDefinition(real_##fn, #fn)
