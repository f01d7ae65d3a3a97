/* Four long worker threads plus 500 short-lived ones (created in waves of 10). */
#include <pthread.h>
#include <stdio.h>
#include "work.h"

static double scale = 1.0;

__attribute__((noinline)) void* worker(void* arg) {
  uint64_t v = spin((uint64_t)(150000000 * scale), (uint64_t)(uintptr_t)arg);
  return (void*)(uintptr_t)(v & 1);
}

__attribute__((noinline)) void* brief(void* arg) {
  uint64_t v = spin(20000, (uint64_t)(uintptr_t)arg);
  return (void*)(uintptr_t)(v & 1);
}

int main(int argc, char** argv) {
  scale = scale_arg(argc, argv);
  pthread_t w[4];
  for (int i = 0; i < 4; ++i) pthread_create(&w[i], NULL, worker, (void*)(uintptr_t)(i + 1));
  int done = 0;
  for (int wave = 0; wave < 50; ++wave) {
    pthread_t t[10];
    for (int i = 0; i < 10; ++i) pthread_create(&t[i], NULL, brief, (void*)(uintptr_t)(wave * 10 + i));
    for (int i = 0; i < 10; ++i) pthread_join(t[i], NULL), ++done;
  }
  for (int i = 0; i < 4; ++i) pthread_join(w[i], NULL);
  printf("threads: 4 workers, %d brief threads\n", done);
  return 0;
}
