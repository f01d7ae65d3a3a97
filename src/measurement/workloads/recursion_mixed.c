/* Deep recursion through frame-pointer frames, plain frames that keep a value in rbp and plain
   frames that leave rbp alone (gcc; clang ignores the optimize attribute and keeps no frame
   pointer anywhere). */
#include <stdio.h>
#include "work.h"

#if defined(__clang__)
#define WITH_FP
#else
#define WITH_FP __attribute__((optimize("no-omit-frame-pointer")))
#endif

__attribute__((noinline)) WITH_FP uint64_t with_fp(int depth, uint64_t acc);

__attribute__((noinline)) uint64_t mix(uint64_t x, uint64_t k) { return (x ^ k) * 0x9E3779B97F4A7C15ull; }

__attribute__((noinline)) uint64_t thin(int depth, uint64_t acc) {
  return with_fp(depth - 1, acc + 5) ^ (uint64_t)depth;  /* one value across the call */
}

__attribute__((noinline)) uint64_t plain(int depth, uint64_t acc) {
  /* Seven values live across the call: more than the other callee-saved registers hold. */
  uint64_t a = mix(acc, 1), b = mix(acc, 2), c = mix(acc, 3), d = mix(acc, 4), e = mix(acc, 5), f = mix(acc, 6);
  uint64_t r = with_fp(depth - 1, acc + 1);
  return r ^ a ^ (b << 1) ^ (c << 2) ^ (d << 3) ^ (e << 4) ^ (f << 5) ^ (uint64_t)depth;
}

__attribute__((noinline)) WITH_FP uint64_t with_fp(int depth, uint64_t acc) {
  if (depth <= 0) return spin(500000, acc);
  /* Each kind of plain frame right below a frame-pointer frame, whose step needs the rbp it
     leaves or restores. */
  return ((depth >> 1) & 1 ? plain(depth - 1, acc + 3) : thin(depth - 1, acc + 3)) + 1;
}

int main(int argc, char** argv) {
  double s = scale_arg(argc, argv);
  uint64_t sum = 0;
  for (int i = 0; i < (int)(300 * s); ++i) sum += with_fp(6000, (uint64_t)i);
  printf("mixed recursion checksum %llu\n", (unsigned long long)(sum & 0xffff));
  return 0;
}
