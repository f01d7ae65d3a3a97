/* Shared helpers for the measurement workloads: a unit of CPU work the optimizer cannot
 * remove, and a CPU-time clock. Deterministic output goes to stdout; timings to stderr. */
#pragma once
#include <pthread.h>
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

static inline void* work_h_worker(void* n) { return (void*)(uintptr_t)(spin(*(uint64_t*)n, 1) & 1); }

/* Work in a new thread (joined), then in the calling one: what the workloads that end their
 * process in some unusual way do first, so that both threads' profiles must be written. */
static inline uint64_t work_in_thread_then_here(uint64_t inThread, uint64_t here) {
  pthread_t t;
  pthread_create(&t, NULL, work_h_worker, &inThread);
  pthread_join(t, NULL);
  return spin(here, 2);
}
