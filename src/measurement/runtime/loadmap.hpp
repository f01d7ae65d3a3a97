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

// Modules that are no file of the process's, each named by a file the runtime writes into
// the measurement directory as the process ends (paths relative to it):
// - Anonymous: code outside every module (a JIT compiler's, stubs generated at run time), at
//   offsets that are the addresses themselves; the file is the copy of the process's perf
//   map (`/tmp/perf-<pid>.map`, which JVMs, V8 and others write on request), from which
//   hpcprof names the functions.
// - Python: Python frames (python.hpp), at offsets (code object's index << 24 | line); the
//   file is the table of the code objects' names, files and first lines.
enum class Pseudo : uint8_t { Anonymous, Python };
constexpr int kPseudoModules = 2;
// Set at start-up and in a fork's child (a module already taken is renamed).
void loadmapSetPseudoPath(Pseudo which, const char* path);
// The module's id, taken at the first node that needs it (only profiles with such nodes
// list it); 0 where it cannot be had now (the map being refreshed). MT: async-signal-safe.
uint16_t loadmapPseudoId(Pseudo which);
inline uint16_t loadmapAnonymousId() { return loadmapPseudoId(Pseudo::Anonymous); }
// The module of addr, or the anonymous one (offset: addr) where no module holds addr; id 0
// only where neither can be had. MT: async-signal-safe.
ModuleRef loadmapLookupOrAnonymous(uintptr_t addr);

}  // namespace hpc::rt
