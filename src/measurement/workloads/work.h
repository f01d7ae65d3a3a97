/* Shared helpers for the measurement workloads: a unit of CPU work the optimizer cannot
 * remove, and a CPU-time clock. Deterministic output goes to stdout; timings to stderr. */
#pragma once
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static inline uint64_t spin(uint64_t n, uint64_t seed) {
  uint64_t x = seed | 1;
  for (uint64_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
  }
  __asm__ volatile("" : "+r"(x));
  return x;
}

static inline double thread_cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline double wall_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Scale factor from argv[1] (default 1.0): tests keep runs short, benchmarks make them long. */
static inline double scale_arg(int argc, char** argv) {
  return argc > 1 ? atof(argv[1]) : 1.0;
}
