/* A worker thread ends the process with exit() while main waits for it forever. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "work.h"

static double scale = 1.0;

__attribute__((noinline)) void* finisher(void* arg) {
  uint64_t v = spin((uint64_t)(150000000 * scale), (uint64_t)(uintptr_t)arg);
  printf("thread_exit: exiting from a thread %llu\n", (unsigned long long)(v & 0));
  fflush(stdout);
  exit(5);
}

int main(int argc, char** argv) {
  scale = scale_arg(argc, argv);
  pthread_t t;
  pthread_create(&t, NULL, finisher, (void*)1);
  spin((uint64_t)(50000000 * scale), 2);
  pthread_join(t, NULL);
  return 0;
}
