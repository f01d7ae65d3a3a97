/* Works in a thread and in main, then ends by the system call itself,
 * syscall(SYS_exit_group, 9): no exit path of libc's runs. Both threads' profiles must be
 * written and the status stay 9. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "work.h"

int main(int argc, char** argv) {
  const double scale = scale_arg(argc, argv);
  volatile uint64_t v = work_in_thread_then_here((uint64_t)(100000000 * scale), (uint64_t)(150000000 * scale));
  printf("exit_group now %d\n", (int)(v & 0));
  fflush(stdout);
  syscall(SYS_exit_group, 9);
  return 0;
}
