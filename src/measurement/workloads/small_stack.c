/* A thread that has used up its stack but for 2 KiB (a deep recursion, a small thread or
 * fiber stack), then works in a leaf that needs little. Unmeasured it runs; a sample
 * handler that ran on what is left of that stack (it needs some 6-12 KiB) overflowed it. */
#define _GNU_SOURCE
#include <alloca.h>
#include <pthread.h>
#include <stdio.h>
#include "work.h"

static double scale = 1.0;

__attribute__((noinline)) static uint64_t leaf(uint64_t seed) {
  return spin((uint64_t)(300000000 * scale), seed);
}

__attribute__((noinline)) static uint64_t at_the_edge(void) {
  pthread_attr_t attr;
  void* low = NULL;
  size_t size = 0;
  if (pthread_getattr_np(pthread_self(), &attr) != 0 || pthread_attr_getstack(&attr, &low, &size) != 0) return 1;
  pthread_attr_destroy(&attr);
  char here;
  size_t left = (size_t)(&here - (char*)low);
  const size_t keep = 2048;
  volatile char* p = alloca(left - keep);
  p[0] = 1;  /* the lowest byte taken: 2 KiB above the stack's end */
  return leaf((uint64_t)(uintptr_t)p) ^ (uint64_t)p[0];
}

static void* run(void* arg) {
  (void)arg;
  return (void*)(uintptr_t)(at_the_edge() & 0);
}

int main(int argc, char** argv) {
  scale = scale_arg(argc, argv);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 << 10);
  pthread_t t;
  if (pthread_create(&t, &attr, run, NULL) != 0) return 1;
  void* rv;
  pthread_join(t, &rv);
  printf("small_stack: done %p\n", rv);
  return 0;
}
