/* daemon(3) forks inside glibc (no fork() call the runtime interposes) and its parent leaves
 * by _exit. The process that calls it works first; the daemon works, sends its pid up a
 * pipe and exits; this program waits for that and says so (both pids on stderr, which
 * vary). */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include "work.h"

int main(int argc, char** argv) {
  double scale = scale_arg(argc, argv);
  int fds[2];
  if (pipe(fds) != 0) return 1;
  pid_t first = fork();
  if (first == 0) {
    close(fds[0]);
    uint64_t before = spin((uint64_t)(150000000 * scale), 5);
    if (before == 1) return 4;  /* never: keeps the work */
    if (daemon(1, 1) != 0) _exit(2);
    uint64_t v = spin((uint64_t)(150000000 * scale), 7);
    char msg[64];
    int len = snprintf(msg, sizeof msg, "%d %llu\n", (int)getpid(), (unsigned long long)(v & 0));
    if (write(fds[1], msg, (size_t)len) != len) _exit(3);
    return 0;  /* its end of the pipe closes as the process ends, after its exit handlers */
  }
  close(fds[1]);
  waitpid(first, NULL, 0);
  char buf[64] = {0};
  ssize_t n = read(fds[0], buf, sizeof buf - 1);
  char more;
  while (read(fds[0], &more, 1) > 0) {  /* until the daemon has exited (its end closed) */
  }
  int pid = n > 0 ? atoi(buf) : -1;
  fprintf(stderr, "daemon pid %d parent %d\n", pid, (int)first);
  printf("daemon: %s\n", pid > 0 ? "worked and exited" : "never reported");
  return 0;
}
