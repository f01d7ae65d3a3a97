/* Each thread sets a signal stack of 8 KiB and a guard page, as Rust's runtime does, with a
 * SIGSEGV handler on it that reports a stack overflow and aborts. Both work (samples land on
 * those stacks); then a thread of 256 KiB overflows its stack: the handler writes its line
 * and aborts (status 134). Every thread's profile must be written. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include "work.h"

static double scale;

static void on_segv(int sig) {
  static const char msg[] = "small_altstack: stack overflow caught\n";
  (void)sig;
  (void)!write(2, msg, sizeof msg - 1);
  abort();
}

static void small_signal_stack(void) {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  char* m = mmap(NULL, 8192 + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (m == MAP_FAILED) abort();
  mprotect(m, page, PROT_NONE);
  stack_t ss = {.ss_sp = m + page, .ss_size = 8192, .ss_flags = 0};
  if (sigaltstack(&ss, NULL) != 0) abort();
}

static __attribute__((noinline)) uint64_t recurse(uint64_t n) {
  volatile char pad[512];
  pad[n % 512] = (char)n;
  return recurse(n + 1) + pad[(n + 1) % 512];
}

static void* overflow(void* arg) {
  small_signal_stack();
  volatile uint64_t v = spin((uint64_t)(100000000 * scale), (uint64_t)(uintptr_t)arg);
  return (void*)(uintptr_t)(recurse(v & 1) & 1);
}

int main(int argc, char** argv) {
  scale = scale_arg(argc, argv);
  struct sigaction sa = {0};
  sa.sa_handler = on_segv;
  sa.sa_flags = SA_ONSTACK;
  sigaction(SIGSEGV, &sa, NULL);
  small_signal_stack();
  volatile uint64_t v = spin((uint64_t)(100000000 * scale), 2);
  printf("small_altstack: main worked %d\n", (int)(v & 0));
  fflush(stdout);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 256 << 10);
  pthread_t t;
  pthread_create(&t, &attr, overflow, (void*)1);
  pthread_join(t, NULL);
  return 0;
}
