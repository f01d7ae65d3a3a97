/* The application's own SIGPROF and SIGALRM handlers and setitimer must keep working. */
#include <signal.h>
#include <stdio.h>
#include <sys/time.h>
#include "work.h"

static volatile sig_atomic_t profs, alrms;
static void on_prof(int sig) { (void)sig; ++profs; }
static void on_alrm(int sig) { (void)sig; ++alrms; }

int main(int argc, char** argv) {
  double s = scale_arg(argc, argv);
  struct sigaction sa = {0};
  sa.sa_handler = on_prof;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPROF, &sa, NULL);
  signal(SIGALRM, on_alrm);
  struct itimerval it = {{0, 10000}, {0, 10000}};
  setitimer(ITIMER_PROF, &it, NULL);
  setitimer(ITIMER_REAL, &it, NULL);
  /* The application also tries to block every signal: its own still get through after. */
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, NULL);
  uint64_t v = spin((uint64_t)(50000000 * s), 3);
  sigprocmask(SIG_UNBLOCK, &all, NULL);
  v += spin((uint64_t)(150000000 * s), 4);
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_PROF, &off, NULL);
  setitimer(ITIMER_REAL, &off, NULL);
  printf("signals: SIGPROF %s, SIGALRM %s %llu\n", profs > 5 ? "seen" : "missing", alrms > 5 ? "seen" : "missing",
         (unsigned long long)(v & 0));
  return 0;
}
