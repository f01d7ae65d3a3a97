/* Waits Linux never restarts after a signal handler: under REALTIME the sampling signal
 * must not end them (before: each returned -1/EINTR after one period, the sleeps cut short),
 * while the application's own signal still does. Prints each call's result; the waits take
 * about 3.3 s in all (twenty-seven of 0.1 s: sleeps, polls, selects, epoll, a signal wait,
 * socket calls on sockets with a timeout (read and write among them, and one through a dup
 * of the descriptor the timeout was set on), POSIX semaphores' timed waits, POSIX AIO's
 * aio_suspend, a System V
 * semaphore's timed
 * wait, and, built with _FORTIFY_SOURCE, the checked forms of poll, ppoll, recv and recvfrom
 * that a count known only at run time compiles into; then two of up to 0.3 s that the
 * application's SIGUSR1, sent every 0.3 s from another thread, ends), with some 0.1 s of work
 * in work() before the last two. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <aio.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/sem.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include "work.h"

static void onUsr1(int sig) { (void)sig; }

__attribute__((noinline)) uint64_t work(void) { return spin(100000000, 3); }

static void report(const char* what, long r) {
  printf("%s: %ld%s\n", what, r, r < 0 ? (errno == EINTR ? " EINTR" : errno == EAGAIN ? " EAGAIN" : errno == ETIMEDOUT ? " ETIMEDOUT" : " other") : "");
}

static volatile int finished;  /* the main thread's last wait has ended */
static volatile size_t one = 1;    /* counts the compiler cannot check: __recv_chk, ... */
static volatile nfds_t nothing = 0;

/* Reads a pipe 64 KiB at a time, slowly, to its end. */
static void* slow_reader(void* fd) {
  static char chunk[65536];
  struct timespec ms = {0, 2000000};
  while (read(*(int*)fd, chunk, sizeof chunk) > 0) nanosleep(&ms, NULL);
  close(*(int*)fd);
  return NULL;
}

/* A listener that waits the whole run and is never joined: the process ends around it. */
static void* listen_forever(void* arg) {
  (void)arg;
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &usr1, NULL);  /* the main thread's signal is not for it */
  poll(NULL, 0, -1);
  return NULL;
}

/* SIGUSR1 to the main thread every 0.3 s until its last wait has ended (whatever time its
 * work before the waits took on a busy machine). */
static void* poke(void* main_thread) {
  while (!finished) {
    struct timespec t = {0, 300000000};
    nanosleep(&t, NULL);
    if (!finished) pthread_kill(*(pthread_t*)main_thread, SIGUSR1);
  }
  return NULL;
}

int main(void) {
  pthread_t listener;
  pthread_create(&listener, NULL, listen_forever, NULL);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = onUsr1;  /* no SA_RESTART: the application's signal ends its waits */
  sigaction(SIGUSR1, &sa, NULL);
  struct timespec tenth = {0, 100000000};
  report("nanosleep", nanosleep(&tenth, NULL));
  report("clock_nanosleep", -clock_nanosleep(CLOCK_MONOTONIC, 0, &tenth, NULL));
  report("usleep", usleep(100000));
  report("poll", poll(NULL, 0, 100));
  report("ppoll", ppoll(NULL, 0, &tenth, NULL));
  struct timeval tv = {0, 100000};
  report("select", select(0, NULL, NULL, NULL, &tv));
  sigset_t none;
  sigemptyset(&none);
  report("pselect", pselect(0, NULL, NULL, NULL, &tenth, &none));
  int ep = epoll_create1(0);
  struct epoll_event ev;
  report("epoll_wait", epoll_wait(ep, &ev, 1, 100));
  sigset_t usr2;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  sigprocmask(SIG_BLOCK, &usr2, NULL);
  report("sigtimedwait", sigtimedwait(&usr2, NULL, &tenth));
  report("epoll_pwait2", epoll_pwait2(ep, &ev, 1, &tenth, NULL));
  /* Sockets given a receive or send timeout, and a System V semaphore's timed wait. */
  struct timeval tenth_tv = {0, 100000};  /* select() left tv at what remained: 0 */
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 1;
  setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tenth_tv, sizeof tenth_tv);
  char b[4096] = {0};
  report("recv", recv(sv[0], b, 1, 0));
  report("recvfrom", recvfrom(sv[0], b, 1, 0, NULL, NULL));
  struct iovec io = {b, 1};
  struct msghdr mh = {.msg_iov = &io, .msg_iovlen = 1};
  report("recvmsg", recvmsg(sv[0], &mh, 0));
  report("read", read(sv[0], b, 1));  /* a timed socket's read ends with EINTR too */
  int again = dup(sv[0]);
  report("recv dup", recv(again, b, 1, 0));
  close(again);
  report("recv checked", recv(sv[0], b, one, 0));
  report("recvfrom checked", recvfrom(sv[0], b, one, 0, NULL, NULL));
  struct pollfd pf[1];
  report("poll checked", poll(pf, nothing, 100));
  report("ppoll checked", ppoll(pf, nothing, &tenth, NULL));
  setsockopt(sv[1], SOL_SOCKET, SO_SNDTIMEO, &tenth_tv, sizeof tenth_tv);
  while (send(sv[1], b, sizeof b, MSG_DONTWAIT) > 0) {}  /* the peer's buffer full */
  report("send", send(sv[1], b, sizeof b, 0));
  report("write", write(sv[1], b, sizeof b));
  int ls = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  snprintf(addr.sun_path + 1, sizeof addr.sun_path - 1, "hpcrun-waits-%d", (int)getpid());  /* abstract */
  if (bind(ls, (struct sockaddr*)&addr, sizeof addr) != 0 || listen(ls, 1) != 0) return 1;
  setsockopt(ls, SOL_SOCKET, SO_RCVTIMEO, &tenth_tv, sizeof tenth_tv);
  report("accept", accept(ls, NULL, NULL));
  sem_t psem;
  sem_init(&psem, 0, 0);
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_nsec += 100000000;
  if (deadline.tv_nsec >= 1000000000) deadline.tv_sec++, deadline.tv_nsec -= 1000000000;
  report("sem_timedwait", sem_timedwait(&psem, &deadline));
  clock_gettime(CLOCK_MONOTONIC, &deadline);
  deadline.tv_nsec += 100000000;
  if (deadline.tv_nsec >= 1000000000) deadline.tv_sec++, deadline.tv_nsec -= 1000000000;
  report("sem_clockwait", sem_clockwait(&psem, CLOCK_MONOTONIC, &deadline));
  int ap[2];
  if (pipe(ap) != 0) return 1;
  struct aiocb cb;
  memset(&cb, 0, sizeof cb);
  cb.aio_fildes = ap[0];
  cb.aio_buf = b;
  cb.aio_nbytes = 1;
  aio_read(&cb);
  const struct aiocb* pending[1] = {&cb};
  report("aio_suspend", aio_suspend(pending, 1, &tenth));
  if (write(ap[1], "x", 1) != 1) return 1;
  while (aio_error(&cb) == EINPROGRESS) aio_suspend(pending, 1, NULL);
  aio_return(&cb);
  int sem = semget(IPC_PRIVATE, 1, 0600);
  struct sembuf down = {0, -1, 0};
  report("semtimedop", semtimedop(sem, &down, 1, &tenth));
  semctl(sem, 0, IPC_RMID);
  /* Transfers a signal could cut short once part is copied: reads of 4 MiB from
   * /dev/urandom (1.5 MB of 20 came through dd's under REALTIME), one of 1 MiB into a pipe
   * whose reader is slower. Each read or write must move all its bytes. */
  static char big[4 << 20];
  int ur = open("/dev/urandom", O_RDONLY);
  long got = 0;
  for (int i = 0; i < 5; ++i) got += read(ur, big, sizeof big) == (ssize_t)sizeof big;
  close(ur);
  report("urandom reads whole", got);
  int pp[2];
  if (pipe(pp) != 0) return 1;
  pthread_t drain;
  pthread_create(&drain, NULL, slow_reader, &pp[0]);
  report("pipe write whole", write(pp[1], big, 1 << 20) == (1 << 20));
  close(pp[1]);
  pthread_join(drain, NULL);
  /* The application's own signal, from another thread, still ends a wait. */
  pthread_t self = pthread_self(), t;
  pthread_create(&t, NULL, poke, &self);
  if (work() == 1) return 1; /* never: keeps the work */
  report("pause", pause());
  report("poll forever", poll(NULL, 0, -1));
  finished = 1;
  pthread_join(t, NULL);
  return 0;
}
