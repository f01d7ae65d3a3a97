/* Code with neither CFI nor frame pointers (built -fno-asynchronous-unwind-tables): libunwind
 * cannot step through it, so the runtime's binary-analysis fallback must find the callers. */
#include <stdio.h>
#include "work.h"

__attribute__((noinline)) uint64_t inner(uint64_t x, int d) {
  uint64_t r = d ? inner(x * 3 + 1, d - 1) : spin(2000000, x);
  __asm__ volatile("" : "+r"(r));
  return r + 1;
}
__attribute__((noinline)) uint64_t outer(uint64_t x) { return inner(x, 6) ^ 7; }

int main(int argc, char** argv) {
  double s = scale_arg(argc, argv);
  uint64_t acc = 0;
  for (int i = 0; i < (int)(300 * s); ++i) acc += outer((uint64_t)i);
  printf("nocfi checksum %llu\n", (unsigned long long)(acc & 0xffff));
  return 0;
}
