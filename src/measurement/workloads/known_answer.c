/* Three functions that take 50%, 30% and 20% of the CPU time. The truth is measured here,
 * with the thread CPU clock around each call, and printed to stderr as "truth a b c"; the
 * wall-clock shares (what REALTIME samples: time the thread waited for a CPU counts where it
 * was preempted) follow as "wall a b c". */
#include <stdio.h>
#include "work.h"

__attribute__((noinline)) uint64_t fifty(uint64_t v) { return spin(50000, v); }
__attribute__((noinline)) uint64_t thirty(uint64_t v) { return spin(30000, v); }
__attribute__((noinline)) uint64_t twenty(uint64_t v) { return spin(20000, v); }

int main(int argc, char** argv) {
  double s = scale_arg(argc, argv);
  double t[3] = {0, 0, 0}, w[3] = {0, 0, 0};
  uint64_t v = 1;
  long rounds = (long)(6000 * s);
  for (long i = 0; i < rounds; ++i) {
    double a = thread_cpu_seconds(), wa = wall_seconds();
    v = fifty(v);
    double b = thread_cpu_seconds(), wb = wall_seconds();
    v = thirty(v);
    double c = thread_cpu_seconds(), wc = wall_seconds();
    v = twenty(v);
    double d = thread_cpu_seconds(), wd = wall_seconds();
    t[0] += b - a, t[1] += c - b, t[2] += d - c;
    w[0] += wb - wa, w[1] += wc - wb, w[2] += wd - wc;
  }
  double sum = t[0] + t[1] + t[2], wsum = w[0] + w[1] + w[2];
  fprintf(stderr, "truth %.4f %.4f %.4f\nwall %.4f %.4f %.4f\n", t[0] / sum, t[1] / sum, t[2] / sum, w[0] / wsum,
          w[1] / wsum, w[2] / wsum);
  printf("known_answer done %llu\n", (unsigned long long)(v & 0));
  return 0;
}
