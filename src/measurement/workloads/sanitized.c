/* Built with -fsanitize=address (gcc: its runtime a shared library the program needs): two
 * threads work, then main reads past a heap block, which AddressSanitizer reports before
 * ending the process with status 1 by its own system call. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "work.h"

__attribute__((noinline)) void* sanitized_work(void* arg) {
  uint64_t v = spin(60000000, (uint64_t)(uintptr_t)arg);
  return (void*)(uintptr_t)(v & 0);
}

int main(int argc, char** argv) {
  pthread_t t[2];
  for (int i = 0; i < 2; ++i) pthread_create(&t[i], NULL, sanitized_work, (void*)(uintptr_t)(i + 1));
  for (int i = 0; i < 2; ++i) pthread_join(t[i], NULL);
  sanitized_work((void*)3);
  printf("threads done\n");
  fflush(stdout);
  int* p = malloc(10 * sizeof(int));
  volatile int r = p[argc + 10];  /* out of bounds: reported */
  free(p);
  (void)argv;
  return r;
}
