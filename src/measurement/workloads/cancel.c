/* Threads cancelled while they work (at pthread_testcancel, their cleanup handlers run), then
 * a pause in which the measurement directory argv[2] (if given) is listed on stderr: the
 * cancelled threads' profiles must be there already, not only once the process ends. */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "work.h"

static volatile uint64_t sink;

__attribute__((noinline)) void cancelled_work(void) {
  for (;;) {
    sink += spin(1000000, 3);
    pthread_testcancel();
  }
}

static void cleanup(void* arg) { ++*(int*)arg; }

static void* worker(void* arg) {
  pthread_cleanup_push(cleanup, arg);
  cancelled_work();
  pthread_cleanup_pop(0);
  return NULL;
}

int main(int argc, char** argv) {
  double s = scale_arg(argc, argv);
  int cleaned = 0;
  pthread_t t[3];
  for (int i = 0; i < 3; ++i) pthread_create(&t[i], NULL, worker, &cleaned);
  usleep((useconds_t)(300000 * s));
  int cancelled = 0;
  for (int i = 0; i < 3; ++i) {
    void* r;
    pthread_cancel(t[i]);
    pthread_join(t[i], &r);
    cancelled += r == PTHREAD_CANCELED;
  }
  printf("cancelled %d, cleanup handlers run %d\n", cancelled, cleaned);
  if (argc > 2) {
    int profiles = 0;
    DIR* d = opendir(argv[2]);
    for (struct dirent* e; d && (e = readdir(d));) profiles += strstr(e->d_name, ".hpcrun") != NULL;
    if (d) closedir(d);
    fprintf(stderr, "profiles before the end: %d\n", profiles);
  }
  return 0;
}
