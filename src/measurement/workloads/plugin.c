/* Loaded and unloaded repeatedly by dlopen.c. */
#include "work.h"

__attribute__((noinline)) uint64_t plugin_work(uint64_t n, uint64_t seed) { return spin(n, seed); }
