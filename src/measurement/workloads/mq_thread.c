/* A POSIX message queue that notifies by SIGEV_THREAD: glibc runs each notification's
 * callback, drain(), on a thread it creates itself (every signal blocked). Each callback
 * reads the message, uses 8 ms of CPU time and registers the next notification; main sends
 * N messages (default 20), one after each callback has run. Prints to stderr the number of
 * callbacks run and their CPU time in all, in microseconds (test
 * Threads.MessageQueueNotificationThreadsAreMeasured); exit status 77 where message queues
 * cannot be made. */
#include <fcntl.h>
#include <mqueue.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "work.h"

static mqd_t q;
static atomic_int ran;
static atomic_long used_us;
static struct sigevent sev;

__attribute__((noinline)) static void drain(union sigval v) {
  double start = thread_cpu_seconds();
  char msg[64];
  uint64_t x = (uint64_t)v.sival_int;
  mq_notify(q, &sev); /* the next one, before the queue is read empty */
  while (mq_receive(q, msg, sizeof msg, NULL) >= 0) x += (uint64_t)msg[0];
  while (thread_cpu_seconds() - start < 0.008) x += spin(20000, x);
  atomic_fetch_add(&used_us, (long)((thread_cpu_seconds() - start) * 1e6));
  atomic_fetch_add(&ran, (int)(x & 0) + 1);
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 20;
  char name[64];
  snprintf(name, sizeof name, "/hpcrun-mq-thread-%d", (int)getpid());
  struct mq_attr attr = {0};
  attr.mq_maxmsg = 4;
  attr.mq_msgsize = 64;
  q = mq_open(name, O_CREAT | O_RDWR | O_NONBLOCK, 0600, &attr);
  if (q == (mqd_t)-1) {
    perror("mq_open");
    return 77;
  }
  mq_unlink(name);
  sev.sigev_notify = SIGEV_THREAD;
  sev.sigev_notify_function = drain;
  sev.sigev_value.sival_int = 7;
  if (mq_notify(q, &sev) != 0) return 1;
  for (int i = 0; i < n; i++) {
    char msg[1] = {(char)i};
    mq_send(q, msg, 1, 0);
    while (atomic_load(&ran) <= i) usleep(1000);
  }
  usleep(50000); /* the last callback's thread ends */
  printf("message notifications: %d\n", n);
  fprintf(stderr, "callbacks: %d\ncallback cpu us: %ld\n", atomic_load(&ran), atomic_load(&used_us));
  return 0;
}
