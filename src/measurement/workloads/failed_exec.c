/* Execs that fail, and the work after them: a path that does not exist, a command execvp
 * finds nowhere, a file with the execute bit but no format the kernel knows (ENOEXEC, past any
 * check a wrapper can make beforehand), the same by fexecve, then a thread and more work.
 * A thread started before the execs works after them too (across_after). Prints each exec's
 * errno and the work's checksum (deterministic). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "work.h"

static double scale;

__attribute__((noinline)) uint64_t work_before(void) { return spin((uint64_t)(100000000 * scale), 3); }
__attribute__((noinline)) uint64_t work_after(void) { return spin((uint64_t)(150000000 * scale), 5); }
__attribute__((noinline)) uint64_t thread_work(void) { return spin((uint64_t)(100000000 * scale), 9); }

__attribute__((noinline)) uint64_t across_after(void) { return spin((uint64_t)(100000000 * scale), 11); }

static atomic_int acrossStarted, execsDone;

static void* across_main(void* arg) {
  atomic_store(&acrossStarted, 1);
  while (!atomic_load(&execsDone)) usleep(1000);
  *(uint64_t*)arg = across_after();
  return NULL;
}

static void* thread_main(void* arg) {
  *(uint64_t*)arg = thread_work();
  return NULL;
}

int main(int argc, char** argv) {
  scale = scale_arg(argc, argv);
  uint64_t sum = work_before();
  uint64_t across = 0;
  pthread_t acrossThread;
  if (pthread_create(&acrossThread, NULL, across_main, &across) != 0) return 5;
  while (!atomic_load(&acrossStarted)) usleep(1000); /* running before the first exec */
  char* args[] = {"nothing", NULL};
  execv("/nonexistent/hpcrun-test/prog", args);
  printf("execv missing: %s\n", strerror(errno));
  execvp("no-such-command-for-hpcrun-test", args);
  printf("execvp missing: %s\n", strerror(errno));

  char path[] = "/tmp/hpcrun-failed-exec-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return 2;
  static const char junk[] = "\x7f" "ELX not a program\n";
  if (write(fd, junk, sizeof junk) != (ssize_t)sizeof junk) return 3;
  close(fd);
  chmod(path, 0700);
  execv(path, args);
  printf("execv unknown format: %s\n", strerror(errno));
  fd = open(path, O_RDONLY | O_CLOEXEC);
  extern char** environ;
  fexecve(fd, args, environ);
  printf("fexecve unknown format: %s\n", strerror(errno));
  close(fd);
  unlink(path);
  atomic_store(&execsDone, 1);

  uint64_t t = 0;
  pthread_t th;
  if (pthread_create(&th, NULL, thread_main, &t) != 0) return 4;
  sum ^= work_after();
  pthread_join(th, NULL);
  pthread_join(acrossThread, NULL);
  sum ^= t ^ across;
  printf("failed_exec: done %llu\n", (unsigned long long)(sum & 0));
  return 0;
}
