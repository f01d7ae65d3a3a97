/* dlopen, call, dlclose, many times over: samples land in a module that comes and goes.
 * Each cycle does enough work that the loader (where samples are blocked) stays a few percent. */
#include <dlfcn.h>
#include <stdio.h>
#include "work.h"

int main(int argc, char** argv) {
  double s = scale_arg(argc, argv);
  const char* lib = argc > 2 ? argv[2] : "./libplugin.so";
  uint64_t sum = 0;
  int cycles = (int)(100 * s);
  for (int i = 0; i < cycles; ++i) {
    void* h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      printf("dlopen failed: %s\n", dlerror());
      return 1;
    }
    uint64_t (*fn)(uint64_t, uint64_t) = (uint64_t(*)(uint64_t, uint64_t))dlsym(h, "plugin_work");
    sum += fn(4000000, (uint64_t)i);
    dlclose(h);
  }
  printf("dlopen cycles %d checksum %llu\n", cycles, (unsigned long long)(sum & 0xffff));
  return 0;
}
