/* fork, then the child execs this program again in "child" mode; both do work. */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "work.h"

__attribute__((noinline)) uint64_t parent_work(double s) { return spin((uint64_t)(250000000 * s), 1); }
__attribute__((noinline)) uint64_t child_work(double s) { return spin((uint64_t)(250000000 * s), 2); }

int main(int argc, char** argv) {
  if (argc > 2 && strcmp(argv[2], "child") == 0) {
    uint64_t v = child_work(atof(argv[1]));
    return (int)(v & 0) + 7;
  }
  double s = scale_arg(argc, argv);
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    execl("/proc/self/exe", argv[0], argc > 1 ? argv[1] : "1", "child", (char*)NULL);
    _exit(99);
  }
  uint64_t v = parent_work(s);
  int status = 0;
  waitpid(pid, &status, 0);
  printf("forkexec child exit %d parent %llu\n", WEXITSTATUS(status), (unsigned long long)(v & 0));
  return 0;
}
