/* Works in a thread and in main, then dies of SIGSEGV: the profiles of both threads must
 * still be written, and the exit status must stay the signal's. */
#include <pthread.h>
#include <stdio.h>
#include "work.h"

int main(int argc, char** argv) {
  const double scale = scale_arg(argc, argv);
  volatile uint64_t v = work_in_thread_then_here((uint64_t)(100000000 * scale), (uint64_t)(150000000 * scale));
  printf("crashing now %d\n", (int)(v & 0));
  fflush(stdout);
  *(volatile int*)(uintptr_t)(v & 0) = 1; /* a null store the compiler cannot prove */
  return 0;
}
