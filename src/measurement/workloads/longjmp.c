/* setjmp/longjmp out of deep call chains, repeatedly. */
#include <setjmp.h>
#include <stdio.h>
#include "work.h"

static jmp_buf env;

__attribute__((noinline)) void dive(int depth, uint64_t v) {
  if (depth == 0) {
    v = spin(20000, v);
    longjmp(env, (int)(v & 0xff) | 1);
  }
  dive(depth - 1, v + 3);
  __asm__ volatile("");
}

int main(int argc, char** argv) {
  double s = scale_arg(argc, argv);
  long jumps = 0, total = 0;
  for (long i = 0; i < (long)(20000 * s); ++i) {
    volatile int r = setjmp(env);
    if (r == 0) dive(50, (uint64_t)i);
    total += r;
    ++jumps;
  }
  printf("longjmp jumps %ld checksum %ld\n", jumps, total & 0xffff);
  return 0;
}
