/* Works in a thread and in main, then dies of SIGSEGV: the profiles of both threads must
 * still be written, and the exit status must stay the signal's. */
#include <pthread.h>
#include <stdio.h>
#include "work.h"

static double scale;

static void* worker(void* arg) {
  return (void*)(uintptr_t)(spin((uint64_t)(100000000 * scale), (uint64_t)(uintptr_t)arg) & 1);
}

int main(int argc, char** argv) {
  scale = scale_arg(argc, argv);
  pthread_t t;
  pthread_create(&t, NULL, worker, (void*)1);
  pthread_join(t, NULL);
  volatile uint64_t v = spin((uint64_t)(150000000 * scale), 2);
  printf("crashing now %d\n", (int)(v & 0));
  fflush(stdout);
  *(volatile int*)(uintptr_t)(v & 0) = 1; /* a null store the compiler cannot prove */
  return 0;
}
