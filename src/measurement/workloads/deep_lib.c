/* Opened with RTLD_DEEPBIND by deepbind.c: a thread that spins in deep_worker, and 12,345
 * bytes written by deep_writer. It brings its own usleep (which the runtime also defines):
 * deep binding keeps its calls on it, whose count goes into the checksum. */
#include <pthread.h>
#include <unistd.h>
#include "work.h"

static uint64_t result;
static uint64_t ownCalls;

int usleep(useconds_t us) {
  ownCalls += 1000 + us;
  return 0;
}

__attribute__((noinline)) void* deep_worker(void* n) {
  result = spin(*(uint64_t*)n, 7);
  return NULL;
}

__attribute__((noinline)) long deep_writer(int fd) {
  static char buf[12345];
  long n = (long)write(fd, buf, sizeof buf);
  __asm__ volatile("" : "+r"(n));  /* no tail call: the write is deep_writer's */
  return n;
}

uint64_t deep_run(uint64_t n, int fd) {
  pthread_t t;
  if (pthread_create(&t, NULL, deep_worker, &n) != 0) return 0;
  pthread_join(t, NULL);
  usleep(7);
  return result + (uint64_t)deep_writer(fd) + ownCalls;
}
