/* An OpenMP parallel loop with a reduction, on 3 threads. */
#include <omp.h>
#include <stdio.h>
#include "work.h"

__attribute__((noinline)) uint64_t body(long i) { return spin(100000, (uint64_t)i); }

int main(int argc, char** argv) {
  double s = scale_arg(argc, argv);
  long n = (long)(6000 * s);
  uint64_t sum = 0;
  omp_set_num_threads(3);
#pragma omp parallel for reduction(+ : sum) schedule(static)
  for (long i = 0; i < n; ++i) sum += body(i);
  printf("omp checksum %llu\n", (unsigned long long)(sum & 0xffff));
  return 0;
}
