/* A POSIX timer that notifies by SIGEV_THREAD every 20 ms: glibc runs each expiration's
 * callback, tick(), on a thread it creates itself (every signal blocked). Each callback uses
 * 8 ms of CPU time; after N of them (default 20) main deletes the timer. Prints the number
 * of callbacks run, their CPU time and their elapsed time in all, in microseconds, to stderr
 * (Threads.TimerCallbackThreadsAreMeasured). */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include "work.h"

static atomic_int fired;
static atomic_long used_us;
static atomic_long wall_us;

__attribute__((noinline)) static void tick(union sigval v) {
  double start = thread_cpu_seconds(), wall = wall_seconds();
  uint64_t x = (uint64_t)v.sival_int;
  while (thread_cpu_seconds() - start < 0.008) x += spin(20000, x);
  atomic_fetch_add(&used_us, (long)((thread_cpu_seconds() - start) * 1e6));
  atomic_fetch_add(&wall_us, (long)((wall_seconds() - wall) * 1e6));
  atomic_fetch_add(&fired, (int)(x & 0) + 1);
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 20;
  struct sigevent sev = {0};
  sev.sigev_notify = SIGEV_THREAD;
  sev.sigev_notify_function = tick;
  sev.sigev_value.sival_int = 7;
  timer_t t;
  if (timer_create(CLOCK_MONOTONIC, &sev, &t) != 0) return 1;
  struct itimerspec its = {{0, 20000000}, {0, 20000000}};
  timer_settime(t, 0, &its, NULL);
  while (atomic_load(&fired) < n) usleep(5000);
  timer_delete(t);
  usleep(50000);  /* a callback still running ends */
  printf("timer callbacks: at least %d\n", n);
  fprintf(stderr, "callbacks: %d\ncallback cpu us: %ld\ncallback wall us: %ld\n", atomic_load(&fired),
          atomic_load(&used_us), atomic_load(&wall_us));
  return 0;
}
