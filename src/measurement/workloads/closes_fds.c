/* A daemon's start: every descriptor past stderr closed while threads run, then its own
 * files on the freed numbers, the high ones too. What it prints through them, and the
 * numbers its opens get, must be as unmeasured: the runtime's log, traces and perf events
 * must neither write into those files nor close them. Exits with 3. `closes_fds SCALE exhaust`:
 * see exhaust() below; `closes_fds SCALE noreadv`: the same as without it, in a sandbox whose
 * seccomp filter refuses process_vm_readv (as some container profiles do). */
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include "work.h"

static double scale = 1.0;
static volatile int phase;  /* 1: the descriptors are the application's again */

/* Work at the bottom of d frames of 1 KiB each: samples there find their frames on stack
 * pages an unwinder has not read before (libunwind tests each new page it reads through a
 * pipe of its own, whose numbers the application has taken by then). */
__attribute__((noinline)) uint64_t deep(int d, uint64_t v, uint64_t n) {
  volatile char pad[1024];
  pad[d & 1023] = (char)v;
  if (d == 0) return spin(n, v);
  return deep(d - 1, v, n) + (uint64_t)pad[d & 1023];
}

__attribute__((noinline)) void* worker(void* arg) {
  uint64_t v = spin((uint64_t)(40000000 * scale), (uint64_t)(uintptr_t)arg);
  while (!phase) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  /* Samples after the descriptors changed hands, so the trace's end is written now, at
   * depths that move each one to stack pages not read before. */
  for (int i = 0; i < 64; ++i) v ^= deep(i * 7 % 64, v, (uint64_t)(40000000 / 64 * scale));
  return (void*)(uintptr_t)(v & 0);
}

/* `exhaust`: a server out of descriptors instead. Every number the process may have is
 * taken (files opened until EMFILE) while its threads run and end: their profiles and the
 * log must still be written. */
static int exhaust(void) {
  pthread_t t;
  pthread_create(&t, NULL, worker, (void*)1);
  uint64_t v = spin((uint64_t)(40000000 * scale), 2);
  while (open("/dev/null", O_RDONLY) >= 0) {
  }
  phase = 1;
  pthread_join(t, NULL);
  v ^= spin((uint64_t)(40000000 * scale), v);
  printf("out of descriptors %llu\n", (unsigned long long)(v & 0));
  return 3;
}

/* process_vm_readv fails with EPERM from here on, in this thread and those it starts. */
static void refuse_process_vm_readv(void) {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {sizeof f / sizeof f[0], f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
    perror("seccomp");
}

int main(int argc, char** argv) {
  scale = scale_arg(argc, argv);
  if (argc > 2 && argv[2][0] == 'e') return exhaust();
  if (argc > 2 && argv[2][0] == 'n') refuse_process_vm_readv();
  int first = open("/dev/null", O_RDONLY);
  printf("first open: %d\n", first);
  fflush(stdout);
  close(first);
  pthread_t t;
  pthread_create(&t, NULL, worker, (void*)1);
  uint64_t v = spin((uint64_t)(40000000 * scale), 2);

  struct rlimit lim;
  int top = getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < 4096 ? (int)lim.rlim_cur : 4096;
  for (int fd = 3; fd < top; ++fd) close(fd);
  /* stdout on the low numbers and on a band of high ones (a runtime's usual hiding place). */
  int dups = 0;
  for (int fd = 3; fd < top; ++fd)
    if ((fd < 64 || (fd >= 700 && fd < 900)) && dup2(1, fd) == fd) ++dups;
  phase = 1;
  pthread_join(t, NULL);
  v ^= spin((uint64_t)(40000000 * scale), v);

  /* One byte through each: a number the runtime closed (or wrote into) shows here. */
  int written = 0;
  for (int fd = 3; fd < top; ++fd)
    if ((fd < 64 || (fd >= 700 && fd < 900)) && write(fd, ".", 1) == 1) ++written;
  int next = open("/dev/null", O_RDONLY);
  printf("\ndescriptors: %d, written through: %d, next open: %d %llu\n", dups, written, next,
         (unsigned long long)(v & 0));
  return 3;
}
