// The process's load modules and their executable address ranges. Refreshed from
// dl_iterate_phdr at safe points (start-up, after dlopen/dlclose); looked up lock-free from
// the signal handler through an immutable snapshot published with release/acquire.
// A module keeps its id for the life of the process (keyed by path), so a profile's
// offsets stay meaningful after the module is unloaded.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hpc::rt {

constexpr size_t kMaxModules = 4096;
constexpr size_t kModulePathMax = 1024;

struct ModuleRef {
  uint16_t id;       // 0: no module (address not mapped by a known object)
  uint64_t offset;   // address minus the module's load bias
};

// MT: thread-safe; refresh() must not run in a signal handler.
void loadmapRefresh();
ModuleRef loadmapLookup(uintptr_t addr);          // MT: async-signal-safe
uint16_t loadmapModuleCount();                     // ids are 1..count
const char* loadmapModulePath(uint16_t id);        // MT: async-signal-safe
// Where the copied vdso lives (set once at start-up, before the first refresh).
void loadmapSetVdsoPath(const char* path);
// Changes whenever the map does (dlopen, dlclose): what was learnt of addresses before may
// not hold after. MT: async-signal-safe.
uintptr_t loadmapGeneration();
// True when addr lies in libhpcrun.so itself.
bool loadmapIsSelf(uintptr_t addr);

}  // namespace hpc::rt
