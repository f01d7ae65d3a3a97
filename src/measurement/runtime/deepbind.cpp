// Libraries the program opens with RTLD_DEEPBIND look symbols up in their own dependencies
// first: libc's pthread_create, read, malloc... before the preloaded runtime's, so their
// threads went unmeasured and their calls uncounted. After such a dlopen, each object it
// loaded has the GOT slots (JUMP_SLOT, GLOB_DAT) of its imports that the runtime interposes
// pointed at the runtime's definitions, as the preload would have bound them: only where the
// deep binding resolves to a library that was there before (libc, libstdc++), never to one of
// the objects just loaded (a library bringing its own allocator keeps it). RELRO pages are
// made writable for the write and read-only again.
#include "deepbind.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

namespace hpc::rt {

namespace {

struct Object {
  uintptr_t base;
  std::string name;
  const ElfW(Phdr)* phdr;
  ElfW(Half) phnum;
};

std::vector<Object> loadedObjects() {
  std::vector<Object> out;
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void* data) {
        static_cast<std::vector<Object>*>(data)->push_back(
            {uintptr_t(info->dlpi_addr), info->dlpi_name ? info->dlpi_name : "", info->dlpi_phdr, info->dlpi_phnum});
        return 0;
      },
      &out);
  return out;
}

bool endsWith(const char* s, const char* tail) {
  const size_t n = strlen(s), m = strlen(tail);
  return n >= m && strcmp(s + n - m, tail) == 0;
}

// Whether `fn` is defined by one of the runtime's libraries.
bool runtimeDefines(void* fn) {
  Dl_info info;
  if (!fn || !dladdr(fn, &info) || !info.dli_fname) return false;
  return endsWith(info.dli_fname, "/libhpcrun.so") || endsWith(info.dli_fname, "/libhpcrun_io.so") ||
         endsWith(info.dli_fname, "/libhpcrun_memleak.so");
}

// The dynamic section's pointer at `tag`, as an address (ld.so relocates some in place).
uintptr_t dynAddress(const ElfW(Dyn)* dyn, ElfW(Sxword) tag, uintptr_t base, bool& found) {
  for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; ++d)
    if (d->d_tag == tag) {
      found = true;
      const uintptr_t v = uintptr_t(d->d_un.d_ptr);
      return v < base ? v + base : v;
    }
  found = false;
  return 0;
}
size_t dynValue(const ElfW(Dyn)* dyn, ElfW(Sxword) tag) {
  for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; ++d)
    if (d->d_tag == tag) return size_t(d->d_un.d_val);
  return 0;
}

// Points the object's interposed imports at the runtime's definitions; returns how many.
size_t rebindObject(const Object& o, void* handle, const std::vector<Object>& fresh) {
  const ElfW(Dyn)* dyn = nullptr;
  uintptr_t relroLo = 0, relroHi = 0;
  for (ElfW(Half) i = 0; i < o.phnum; ++i) {
    if (o.phdr[i].p_type == PT_DYNAMIC) dyn = reinterpret_cast<const ElfW(Dyn)*>(o.base + o.phdr[i].p_vaddr);
    if (o.phdr[i].p_type == PT_GNU_RELRO) relroLo = o.base + o.phdr[i].p_vaddr, relroHi = relroLo + o.phdr[i].p_memsz;
  }
  if (!dyn) return 0;
  bool hasSym = false, hasStr = false, hasJmp = false, hasRela = false;
  const auto* symtab = reinterpret_cast<const ElfW(Sym)*>(dynAddress(dyn, DT_SYMTAB, o.base, hasSym));
  const char* strtab = reinterpret_cast<const char*>(dynAddress(dyn, DT_STRTAB, o.base, hasStr));
  if (!hasSym || !hasStr) return 0;
  struct Table {
    const ElfW(Rela)* rela;
    size_t count;
  } tables[2] = {
      {reinterpret_cast<const ElfW(Rela)*>(dynAddress(dyn, DT_JMPREL, o.base, hasJmp)), 0},
      {reinterpret_cast<const ElfW(Rela)*>(dynAddress(dyn, DT_RELA, o.base, hasRela)), 0},
  };
  if (hasJmp && dynValue(dyn, DT_PLTREL) == DT_RELA) tables[0].count = dynValue(dyn, DT_PLTRELSZ) / sizeof(ElfW(Rela));
  if (hasRela) tables[1].count = dynValue(dyn, DT_RELASZ) / sizeof(ElfW(Rela));
  const long page = sysconf(_SC_PAGESIZE);
  size_t done = 0;
  for (const Table& t : tables)
    for (size_t i = 0; i < t.count; ++i) {
      const ElfW(Rela)& r = t.rela[i];
      const auto type = ELF64_R_TYPE(r.r_info);
      if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) continue;
      const ElfW(Sym)& s = symtab[ELF64_R_SYM(r.r_info)];
      if (s.st_shndx != SHN_UNDEF || (ELF64_ST_TYPE(s.st_info) != STT_FUNC && ELF64_ST_TYPE(s.st_info) != STT_NOTYPE))
        continue;  // its own definition, or not a function
      const char* name = strtab + s.st_name;
      if (!*name) continue;
      void* ours = dlsym(RTLD_DEFAULT, name);
      if (!runtimeDefines(ours)) continue;
      // Where the deep binding goes: a library loaded before (libc) is what the preload
      // would have come ahead of; one of the objects this dlopen brought keeps its own.
      void* deep = dlsym(handle, name);
      if (!deep || runtimeDefines(deep)) continue;
      Dl_info di;
      if (!dladdr(deep, &di)) continue;
      const bool own = std::any_of(fresh.begin(), fresh.end(),
                                   [&](const Object& f) { return uintptr_t(di.dli_fbase) == f.base && f.base != 0; });
      if (own) continue;
      auto* slot = reinterpret_cast<void**>(o.base + r.r_offset);
      const bool relro = uintptr_t(slot) >= relroLo && uintptr_t(slot) < relroHi;
      void* pageStart = reinterpret_cast<void*>(uintptr_t(slot) & ~uintptr_t(page - 1));
      if (relro && mprotect(pageStart, size_t(page), PROT_READ | PROT_WRITE) != 0) continue;
      __atomic_store_n(slot, ours, __ATOMIC_RELEASE);
      if (relro) mprotect(pageStart, size_t(page), PROT_READ);
      ++done;
    }
  return done;
}

}  // namespace

std::vector<uintptr_t> deepbindBefore() {
  std::vector<uintptr_t> bases;
  for (const Object& o : loadedObjects()) bases.push_back(o.base);
  std::sort(bases.begin(), bases.end());
  return bases;
}

size_t deepbindRebind(void* handle, const std::vector<uintptr_t>& before) {
  if (!handle) return 0;
  std::vector<Object> fresh;
  for (const Object& o : loadedObjects())
    if (!std::binary_search(before.begin(), before.end(), o.base) && o.base != 0) fresh.push_back(o);
  size_t n = 0;
  for (const Object& o : fresh) n += rebindObject(o, handle, fresh);
  return n;
}

}  // namespace hpc::rt
