/* The benchmark workload: many short calls through a deep-ish chain, no frame pointers. */
#include <stdio.h>
#include "work.h"

__attribute__((noinline)) uint64_t leaf(uint64_t x) { return x * 2654435761u + (x >> 7); }
__attribute__((noinline)) uint64_t mid(uint64_t x, int d) { return d ? mid(leaf(x), d - 1) + 1 : leaf(x); }
__attribute__((noinline)) uint64_t top(uint64_t x) { return mid(x, 8) ^ mid(x + 1, 4); }

int main(int argc, char** argv) {
  double s = scale_arg(argc, argv);
  uint64_t acc = 0;
  for (long i = 0; i < (long)(20000000 * s); ++i) acc += top((uint64_t)i);
  printf("callheavy %llu\n", (unsigned long long)(acc & 0xffff));
  return 0;
}
