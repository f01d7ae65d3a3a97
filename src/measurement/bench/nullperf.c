/* nullperf.c: the floor of perf_event sampling on this machine, as nullsample.c (../shared/bench)
   is the floor of timer sampling. A preloaded library opens, for the main thread, a software
   cpu-clock event that samples NULLPERF_HZ times a second of the thread's CPU time (the
   kernel adjusting the period, as `hpcrun -e perf::cpu-clock@fHZ` asks), armed for many
   overflows at once and notifying by a real-time signal sent to the thread (F_SETOWN_EX,
   F_SETSIG, O_ASYNC), as hpcrun's runtime sets its events up, into an empty handler. What the
   kernel's perf path costs beyond a POSIX timer's is what separates this floor from
   nullsample's. NULLPERF_REPORT=1 prints the signals taken at exit. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static volatile unsigned long taken;
static int fd = -1;

static void handler(int sig, siginfo_t *si, void *uc) {
  (void)sig; (void)si; (void)uc;
  taken++;
}

__attribute__((constructor)) static void start(void) {
  const char *hz = getenv("NULLPERF_HZ");
  const int signo = SIGRTMIN + 3;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = handler;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigaction(signo, &sa, NULL);
  struct perf_event_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_CPU_CLOCK;
  attr.freq = 1;
  attr.sample_freq = hz ? strtoul(hz, NULL, 10) : 4000;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  attr.disabled = 1;
  const pid_t tid = (pid_t)syscall(SYS_gettid);
  fd = (int)syscall(SYS_perf_event_open, &attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0) return;
  struct f_owner_ex owner = {F_OWNER_TID, tid};
  if (fcntl(fd, F_SETOWN_EX, &owner) != 0 || fcntl(fd, F_SETSIG, signo) != 0 ||
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_ASYNC) != 0) {
    close(fd);
    fd = -1;
    return;
  }
  ioctl(fd, PERF_EVENT_IOC_REFRESH, 1 << 30);
}

__attribute__((destructor)) static void stop(void) {
  if (fd >= 0) ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
  if (getenv("NULLPERF_REPORT")) {
    char b[32], t[24];
    int n = 0, k = 0;
    unsigned long v = taken;
    do t[k++] = (char)('0' + v % 10), v /= 10; while (v);
    b[n++] = 't';
    b[n++] = '=';
    while (k) b[n++] = t[--k];
    b[n++] = '\n';
    if (write(2, b, (size_t)n) < 0) return;
  }
}
