/* Handlers installed without SA_RESTART: a blocking read that a signal interrupts fails with
 * EINTR, the way a program times out a read with alarm() or notices Ctrl-C. Run with our
 * handler in front of these signals, the read must not be restarted instead (the program
 * would wait forever). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "work.h"

static volatile sig_atomic_t got;
static void on_signal(int sig) { got = sig; }

static void interrupted_read(int sig) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;  /* no SA_RESTART */
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, NULL);
  int fds[2];
  if (pipe(fds) != 0) return;
  pid_t sender = -1;
  if (sig == SIGALRM) {
    alarm(1);
  } else if ((sender = fork()) == 0) {
    spin(20000000, 1);
    usleep(200000);
    kill(getppid(), sig);
    _exit(0);
  }
  char c;
  got = 0;
  ssize_t n = read(fds[0], &c, 1);  /* nobody writes: only the signal ends it */
  printf("%s: read %zd, %s, handler ran: %s\n", sig == SIGALRM ? "SIGALRM" : "SIGINT", n,
         n < 0 && errno == EINTR ? "EINTR" : "not interrupted", got == sig ? "yes" : "no");
  fflush(stdout);
  if (sender > 0) waitpid(sender, NULL, 0);
  close(fds[0]);
  close(fds[1]);
}

int main(void) {
  spin(50000000, 2);
  interrupted_read(SIGALRM);
  interrupted_read(SIGINT);
  return 0;
}
