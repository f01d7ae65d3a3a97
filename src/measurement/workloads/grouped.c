/* Page faults in one function, none in the other (tests
 * Sources.CounterGroupMembersAreReadAtTheLeadersSamples, Sampling.TheTraceFollowsTheTimeBasedEvent):
 * spinner computes; toucher maps 64 MiB and writes a byte of each page, 8 times (131,072 first
 * touches), computing a little after each (its own time is not all the kernel's, where
 * user-mode samples cannot land), then spinner again. Prints the pages touched. */
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>

volatile uint64_t acc;

__attribute__((noinline)) void spinner(long n) {
  for (long i = 0; i < n; i++) acc = acc * 6364136223846793005ULL + (uint64_t)i;
}

__attribute__((noinline)) long toucher(int rounds) {
  long touched = 0;
  for (int r = 0; r < rounds; r++) {
    size_t size = (size_t)64 << 20;
    char* p = mmap(0, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return -1;
    madvise(p, size, MADV_NOHUGEPAGE); /* a fault a page, whatever the machine's THP setting */
    for (size_t o = 0; o < size; o += 4096, touched++) {
      p[o] = 1;
      for (int k = 0; k < 400; k++) /* user time beside each fault's kernel time, in toucher */
        acc = acc * 6364136223846793005ULL + (uint64_t)k;
    }
    munmap(p, size);
  }
  return touched;
}

int main(void) {
  spinner(300000000);
  long touched = toucher(8);
  spinner(150000000);
  printf("pages touched: %ld\n", touched);
  return 0;
}
