/* A process whose main runs for 2 ms of CPU time, shorter than the kernel's tick: prints the
 * CPU time main used, in microseconds, to stderr (Sampling.ShortThreadsCountWhatTheyCost). */
#include <stdio.h>
#include "work.h"

__attribute__((noinline)) uint64_t short_main_work(void) {
  double start = thread_cpu_seconds();
  uint64_t v = 0;
  while (thread_cpu_seconds() - start < 0.002) v += spin(2000, v);
  return v;
}

int main(void) {
  double start = thread_cpu_seconds();
  uint64_t v = short_main_work();
  fprintf(stderr, "main cpu us: %.0f\n", (thread_cpu_seconds() - start) * 1e6);
  return (int)(v & 0);
}
