/* Waits made by raw system calls through syscall(2), as libaio makes its io_getevents: each
 * one Linux never restarts after a signal handler. Ten each of io_getevents (an AIO context
 * with nothing queued, 20 ms timeout), nanosleep, clock_nanosleep, poll and epoll_wait (no
 * descriptor ready), select, and the forms taking a mask (ppoll, epoll_pwait, pselect6,
 * io_pgetevents, each with a mask that blocks nothing), 20 ms each: 2 s of waiting. Prints what each kind of call
 * returned; unmeasured, every one times out (0). Test Signals.RawSystemCallWaitsAreNotEnded. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/aio_abi.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* pselect6's and io_pgetevents' mask argument: the mask and its size. */
struct kernel_mask {
  const unsigned long* mask;
  size_t size;
};

static void report(const char* what, long rc) {
  static const char* last;
  static long lastRc, times;
  if (what == last && rc == lastRc) {
    times++;
    return;
  }
  if (last) printf("%s: %ld x%ld\n", last, lastRc, times);
  last = what, lastRc = rc, times = 1;
}

int main(void) {
  aio_context_t ctx = 0;
  if (syscall(SYS_io_setup, 8, &ctx) != 0) {
    perror("io_setup");
    return 77;
  }
  struct io_event ev[1];
  int ep = epoll_create1(0);
  for (int i = 0; i < 10; i++) {
    struct timespec t = {0, 20000000};
    report("io_getevents", syscall(SYS_io_getevents, ctx, 1, 1, ev, &t));
  }
  for (int i = 0; i < 10; i++) {
    struct timespec t = {0, 20000000};
    report("nanosleep", syscall(SYS_nanosleep, &t, NULL));
  }
  for (int i = 0; i < 10; i++) {
    struct timespec t = {0, 20000000};
    report("clock_nanosleep", syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, &t, NULL));
  }
  for (int i = 0; i < 10; i++) report("poll", syscall(SYS_poll, NULL, 0, 20));
  for (int i = 0; i < 10; i++) {
    struct epoll_event e;
    report("epoll_wait", syscall(SYS_epoll_wait, ep, &e, 1, 20));
  }
  for (int i = 0; i < 10; i++) {
    struct timeval t = {0, 20000};
    report("select", syscall(SYS_select, 0, NULL, NULL, NULL, &t));
  }
  /* The p-forms, each with a mask of its own that blocks nothing (the kernel's 8 bytes). */
  unsigned long none = 0;
  for (int i = 0; i < 10; i++) {
    struct timespec t = {0, 20000000};
    report("ppoll", syscall(SYS_ppoll, NULL, 0, &t, &none, sizeof none));
  }
  for (int i = 0; i < 10; i++) {
    struct epoll_event e;
    report("epoll_pwait", syscall(SYS_epoll_pwait, ep, &e, 1, 20, &none, sizeof none));
  }
  for (int i = 0; i < 10; i++) {
    struct timespec t = {0, 20000000};
    struct kernel_mask m = {&none, sizeof none};
    report("pselect6", syscall(SYS_pselect6, 0, NULL, NULL, NULL, &t, &m));
  }
  for (int i = 0; i < 10; i++) {
    struct timespec t = {0, 20000000};
    struct kernel_mask m = {&none, sizeof none};
    long rc = syscall(SYS_io_pgetevents, ctx, 1, 1, ev, &t, &m);
    report("io_pgetevents", rc < 0 && errno == ENOSYS ? -38 : rc); /* before Linux 4.18 */
  }
  report(NULL, 0);
  syscall(SYS_io_destroy, ctx);
  return 0;
}
