/* vfork children that exec, exit and fail to exec, between two pieces of the parent's work.
 * Each child writes to memory it shares with the parent (what Linux's vfork does, and what a
 * fork would not show); the parent prints what it sees and each child's status. */
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
#include "work.h"

static volatile int shared;

__attribute__((noinline)) uint64_t parent_before(double s) { return spin((uint64_t)(150000000 * s), 1); }
__attribute__((noinline)) uint64_t parent_after(double s) { return spin((uint64_t)(150000000 * s), 2); }

static int status_of(pid_t p) {
  int st = 0;
  if (p < 0 || waitpid(p, &st, 0) != p) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(int argc, char** argv) {
  double s = scale_arg(argc, argv);
  uint64_t v = parent_before(s);
  fflush(stdout);
  pid_t p = vfork();
  if (p == 0) {
    shared = 1;
    execl("/bin/true", "true", (char*)NULL);
    _exit(127);
  }
  int st = status_of(p);
  printf("exec: status %d shared %d\n", st, shared);
  p = vfork();
  if (p == 0) {
    shared = 2;
    _exit(3);
  }
  st = status_of(p);
  printf("exit: status %d shared %d\n", st, shared);
  p = vfork();
  if (p == 0) {
    execl("/nonexistent/program", "program", (char*)NULL);
    shared = 4;
    _exit(4);
  }
  st = status_of(p);
  printf("failed exec: status %d shared %d\n", st, shared);
  v ^= parent_after(s);
  printf("vfork: done %llu\n", (unsigned long long)(v & 0));
  return 0;
}
