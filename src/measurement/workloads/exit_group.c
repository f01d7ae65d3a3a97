/* Works in a thread and in main, then ends by the system call itself,
 * syscall(SYS_exit_group, 9): no exit path of libc's runs. Both threads' profiles must be
 * written and the status stay 9. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>
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
  printf("exit_group now %d\n", (int)(v & 0));
  fflush(stdout);
  syscall(SYS_exit_group, 9);
  return 0;
}
