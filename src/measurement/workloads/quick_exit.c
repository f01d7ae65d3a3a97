/* Works in a thread, in main and in an at_quick_exit handler, then ends by quick_exit(5):
 * glibc runs at_quick_exit's handlers (not atexit's) and ends by its own _exit. Every
 * thread's profile must be written, the handler's samples in main's, and the status 5. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "work.h"

static double scale;

static void last_words(void) {
  volatile uint64_t v = spin((uint64_t)(50000000 * scale), 3);
  printf("quick_exit handler %d\n", (int)(v & 0));
  fflush(stdout);
}

int main(int argc, char** argv) {
  scale = scale_arg(argc, argv);
  at_quick_exit(last_words);
  volatile uint64_t v = work_in_thread_then_here((uint64_t)(100000000 * scale), (uint64_t)(100000000 * scale));
  printf("quick_exit now %d\n", (int)(v & 0));
  fflush(stdout);
  quick_exit(5);
}
