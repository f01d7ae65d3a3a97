/* Deep (depth 6000) and mutual recursion, neither of which can become a loop. */
#include <stdio.h>
#include "work.h"

__attribute__((noinline)) uint64_t deep(int depth, uint64_t acc) {
  if (depth == 0) return spin(500000, acc);
  uint64_t r = deep(depth - 1, acc + (uint64_t)depth);
  return r ^ (uint64_t)depth;
}

__attribute__((noinline)) uint64_t ping(int n, uint64_t acc);
__attribute__((noinline)) uint64_t pong(int n, uint64_t acc) {
  if (n == 0) return spin(100000, acc);
  return ping(n - 1, acc * 3 + 1) + 1;
}
__attribute__((noinline)) uint64_t ping(int n, uint64_t acc) {
  if (n == 0) return spin(100000, acc);
  return pong(n - 1, acc + 7) ^ 5;
}

int main(int argc, char** argv) {
  double s = scale_arg(argc, argv);
  uint64_t sum = 0;
  int rounds = (int)(300 * s);
  for (int i = 0; i < rounds; ++i) sum += deep(6000, (uint64_t)i);
  for (int i = 0; i < (int)(3000 * s); ++i) sum += ping(200, (uint64_t)i);
  printf("recursion checksum %llu\n", (unsigned long long)(sum & 0xffff));
  return 0;
}
