/* An application's own alternate signal stack: what it sees (none at first, in main and in
 * a thread, however the runtime runs its handlers), and a stack overflow caught on it, as
 * a language runtime catches one. Exits with 0 from the handler. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "work.h"

static const char* seen(void) {
  stack_t cur;
  if (sigaltstack(NULL, &cur) != 0) return "error";
  return (cur.ss_flags & SS_DISABLE) ? "none" : "set";
}

static void* thread_view(void* arg) {
  (void)arg;
  spin(20000000, 3);
  printf("thread: %s\n", seen());
  return NULL;
}

static void on_overflow(int sig, siginfo_t* si, void* uc) {
  (void)sig, (void)si, (void)uc;
  stack_t cur;
  sigaltstack(NULL, &cur);
  const char* msg = (cur.ss_flags & SS_ONSTACK) ? "overflow caught on its own stack\n" : "overflow caught elsewhere\n";
  if (write(1, msg, strlen(msg)) < 0) _exit(2);
  _exit(0);
}

/* A handler that did not ask for the alternate stack runs on the thread's. */
static void on_fpe(int sig) {
  (void)sig;
  stack_t cur;
  sigaltstack(NULL, &cur);
  const char* msg = (cur.ss_flags & SS_ONSTACK) ? "fpe handler: on an alternate stack\n" : "fpe handler: on the thread's stack\n";
  if (write(1, msg, strlen(msg)) < 0) _exit(2);
}

static volatile uint64_t sink;
__attribute__((noinline)) static uint64_t down(uint64_t n) {
  volatile char pad[256];
  pad[0] = (char)n;
  uint64_t v = spin(2000, n) + down(n + 1);  /* never returns: the stack runs out */
  return v + (uint64_t)pad[0];
}

int main(void) {
  printf("main: %s\n", seen());
  pthread_t t;
  pthread_create(&t, NULL, thread_view, NULL);
  pthread_join(t, NULL);
  fflush(stdout);
  signal(SIGFPE, on_fpe);
  raise(SIGFPE);
  static char own[1 << 16];
  stack_t ss = {.ss_sp = own, .ss_size = sizeof own, .ss_flags = 0};
  if (sigaltstack(&ss, NULL) != 0) return 3;
  stack_t cur;
  sigaltstack(NULL, &cur);
  printf("main after setting its own: %s, %s\n", seen(), cur.ss_sp == own ? "its own" : "another");
  fflush(stdout);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_overflow;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigaction(SIGSEGV, &sa, NULL);
  sink = down(1);
  return 4;
}
