/* Signals the program waits for instead of handling: every signal blocked, then a
 * sigwaitinfo, a sigwait and a sigtimedwait for all of them (the signals sent from another
 * thread after 0.2 s), and an epoll loop over a signalfd of every signal, ended by a SIGUSR1
 * after 0.3 s. Prints each signal received: only the program's own may come. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

static pthread_t main_thread;

static void pause_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000};
  while (nanosleep(&t, &t) != 0) {}
}

static void* sender(void* arg) {
  (void)arg;
  pause_ms(200);
  pthread_kill(main_thread, SIGUSR1);
  pause_ms(200);
  pthread_kill(main_thread, SIGUSR2);
  pause_ms(300);
  kill(getpid(), SIGUSR1);
  return NULL;
}

static const char* name(int sig) { return sig == SIGUSR1 ? "SIGUSR1" : sig == SIGUSR2 ? "SIGUSR2" : "another signal"; }

int main(void) {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  main_thread = pthread_self();
  pthread_t t;
  pthread_create(&t, NULL, sender, NULL);
  siginfo_t si;
  printf("sigwaitinfo: %s\n", name(sigwaitinfo(&all, &si)));
  int sig = 0;
  sigwait(&all, &sig);
  printf("sigwait: %s\n", name(sig));
  struct timespec tenth = {0, 100000000};
  printf("sigtimedwait: %d\n", sigtimedwait(&all, &si, &tenth));
  int fd = signalfd(-1, &all, SFD_CLOEXEC);
  int ep = epoll_create1(0);
  struct epoll_event ev = {.events = EPOLLIN};
  epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
  for (;;) {
    struct epoll_event out;
    if (epoll_wait(ep, &out, 1, 5000) <= 0) {
      printf("signalfd: nothing\n");
      break;
    }
    struct signalfd_siginfo fsi;
    if (read(fd, &fsi, sizeof fsi) != sizeof fsi) break;
    printf("signalfd: %s\n", name((int)fsi.ssi_signo));
    if (fsi.ssi_signo == SIGUSR1) break;
  }
  pthread_join(t, NULL);
  return 0;
}
