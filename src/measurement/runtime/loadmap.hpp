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

// Code outside every module (a JIT compiler's, stubs generated at run time) is recorded
// against one module of its own whose offsets are the addresses themselves. Its path names
// the copy of the process's perf map (`/tmp/perf-<pid>.map`, which JVMs, V8 and others write
// on request) that the runtime makes as the process ends, relative to the measurement
// directory; hpcprof names the functions from it. Set at start-up and in a fork's child.
void loadmapSetAnonymousPath(const char* path);
// The module's id, taken at the first address that needs it (only profiles with such code
// list it); 0 where it cannot be had now (the map being refreshed). MT: async-signal-safe.
uint16_t loadmapAnonymousId();
// The module of addr, or the anonymous one (offset: addr) where no module holds addr; id 0
// only where neither can be had. MT: async-signal-safe.
ModuleRef loadmapLookupOrAnonymous(uintptr_t addr);

}  // namespace hpc::rt
