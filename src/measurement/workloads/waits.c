/* Waits Linux never restarts after a signal handler: under REALTIME the sampling signal
 * must not end them (before: each returned -1/EINTR after one period, the sleeps cut short),
 * while the application's own signal still does. Prints each call's result; the waits take
 * about 1.5 s in all (nine of 0.1 s, then two of up to 0.3 s that the application's SIGUSR1,
 * sent every 0.3 s from another thread, ends), with some 0.1 s of work in work() before the
 * last two. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>
#include "work.h"

static void onUsr1(int sig) { (void)sig; }

__attribute__((noinline)) uint64_t work(void) { return spin(100000000, 3); }

static void report(const char* what, long r) { printf("%s: %ld%s\n", what, r, r < 0 ? (errno == EINTR ? " EINTR" : errno == EAGAIN ? " EAGAIN" : " other") : ""); }

static volatile int finished;  /* the main thread's last wait has ended */

/* A listener that waits the whole run and is never joined: the process ends around it. */
static void* listen_forever(void* arg) {
  (void)arg;
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &usr1, NULL);  /* the main thread's signal is not for it */
  poll(NULL, 0, -1);
  return NULL;
}

/* SIGUSR1 to the main thread every 0.3 s until its last wait has ended (whatever time its
 * work before the waits took on a busy machine). */
static void* poke(void* main_thread) {
  while (!finished) {
    struct timespec t = {0, 300000000};
    nanosleep(&t, NULL);
    if (!finished) pthread_kill(*(pthread_t*)main_thread, SIGUSR1);
  }
  return NULL;
}

int main(void) {
  pthread_t listener;
  pthread_create(&listener, NULL, listen_forever, NULL);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = onUsr1;  /* no SA_RESTART: the application's signal ends its waits */
  sigaction(SIGUSR1, &sa, NULL);
  struct timespec tenth = {0, 100000000};
  report("nanosleep", nanosleep(&tenth, NULL));
  report("clock_nanosleep", -clock_nanosleep(CLOCK_MONOTONIC, 0, &tenth, NULL));
  report("usleep", usleep(100000));
  report("poll", poll(NULL, 0, 100));
  report("ppoll", ppoll(NULL, 0, &tenth, NULL));
  struct timeval tv = {0, 100000};
  report("select", select(0, NULL, NULL, NULL, &tv));
  sigset_t none;
  sigemptyset(&none);
  report("pselect", pselect(0, NULL, NULL, NULL, &tenth, &none));
  int ep = epoll_create1(0);
  struct epoll_event ev;
  report("epoll_wait", epoll_wait(ep, &ev, 1, 100));
  sigset_t usr2;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  sigprocmask(SIG_BLOCK, &usr2, NULL);
  report("sigtimedwait", sigtimedwait(&usr2, NULL, &tenth));
  /* The application's own signal, from another thread, still ends a wait. */
  pthread_t self = pthread_self(), t;
  pthread_create(&t, NULL, poke, &self);
  if (work() == 1) return 1; /* never: keeps the work */
  report("pause", pause());
  report("poll forever", poll(NULL, 0, -1));
  finished = 1;
  pthread_join(t, NULL);
  return 0;
}
