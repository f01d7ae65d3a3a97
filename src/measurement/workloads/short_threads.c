/* N threads one after another (default 400), each spinning until it has used 0.4 ms of CPU
 * time: each far shorter than a 1 ms sampling period. Prints the CPU time the threads used in
 * short_work, in all, in microseconds, to stderr (Sampling.ShortThreadsCountWhatTheyCost). */
#include <pthread.h>
#include <stdio.h>
#include "work.h"

static double used[4096];

__attribute__((noinline)) void* short_work(void* arg) {
  uintptr_t k = (uintptr_t)arg;
  double start = thread_cpu_seconds();
  uint64_t v = 0;
  while (thread_cpu_seconds() - start < 0.0004) v += spin(2000, k + v);
  used[k] = thread_cpu_seconds() - start;
  return (void*)(uintptr_t)(v & 1);
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 400;
  if (n < 1 || n > 4096) n = 400;
  double total = 0;
  for (int k = 0; k < n; ++k) {
    pthread_t t;
    pthread_create(&t, NULL, short_work, (void*)(uintptr_t)k);
    pthread_join(t, NULL);
    total += used[k];
  }
  printf("short threads: %d\n", n);
  fprintf(stderr, "thread cpu us: %.0f\n", total * 1e6);
  return 0;
}
