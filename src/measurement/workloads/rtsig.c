/* Every real-time signal number used by the application itself: a handler installed for
 * each, each raised and queued to itself, and each sent by a POSIX timer of its own with
 * value 0 (the runtime samples with one of these numbers, its timers' values the events'
 * indices from 0), and the counts printed. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "work.h"

static volatile sig_atomic_t count[_NSIG];
static volatile int last_value;

static void on_rt(int sig, siginfo_t* si, void* uc) {
  (void)uc;
  ++count[sig];
  if (si->si_code == SI_QUEUE) last_value = si->si_value.sival_int;
}

int main(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_rt;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int s = SIGRTMIN; s <= SIGRTMAX; ++s) sigaction(s, &sa, NULL);
  uint64_t v = spin(30000000, 5);
  int mismatched = 0;
  for (int s = SIGRTMIN; s <= SIGRTMAX; ++s) {
    raise(s);
    union sigval val = {.sival_int = s * 10};
    sigqueue(getpid(), s, val);
    spin(100000, (uint64_t)s);
    if (count[s] != 2 || last_value != s * 10) {
      printf("signal SIGRTMIN+%d: %d deliveries, value %d\n", s - SIGRTMIN, (int)count[s], last_value);
      ++mismatched;
    }
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_SIGNAL;
    sev.sigev_signo = s;
    sev.sigev_value.sival_int = 0;
    timer_t timer;
    struct itimerspec once = {{0, 0}, {0, 1000000}};
    if (timer_create(CLOCK_MONOTONIC, &sev, &timer) != 0 || timer_settime(timer, 0, &once, NULL) != 0) return 1;
    for (int tries = 0; count[s] < 3 && tries < 2000; ++tries) {
      struct timespec ms = {0, 1000000};
      nanosleep(&ms, NULL);
    }
    timer_delete(timer);
    if (count[s] != 3) {
      printf("signal SIGRTMIN+%d: its timer's signal not delivered\n", s - SIGRTMIN);
      ++mismatched;
    }
  }
  printf("real-time signals delivered as sent: %s %llu\n", mismatched ? "no" : "all", (unsigned long long)(v & 0));
  return 0;
}
