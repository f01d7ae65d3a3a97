/* The bundled example for scripts/demo.sh: three kernels with loop nests, called from
 * main and from a second thread, costing roughly 50/30/20% of the CPU time. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static double sink;

__attribute__((noinline)) static double stencil(int n, int reps) {
  double *a = calloc((size_t)n, sizeof *a), s = 0;
  for (int r = 0; r < reps; ++r)
    for (int i = 1; i < n - 1; ++i) {
      a[i] = 0.25 * (a[i - 1] + 2 * a[i] + a[i + 1]) + 1e-9 * i;
      s += a[i];
    }
  free(a);
  return s;
}

__attribute__((noinline)) static double matmul(int n) {
  double *a = malloc(sizeof(double) * n * n), *b = malloc(sizeof(double) * n * n),
         *c = calloc((size_t)n * n, sizeof(double));
  for (int i = 0; i < n * n; ++i) a[i] = b[i] = 1.0 / (1 + i % 7);
  for (int i = 0; i < n; ++i)
    for (int k = 0; k < n; ++k)
      for (int j = 0; j < n; ++j) c[i * n + j] += a[i * n + k] * b[k * n + j];
  double s = c[n + 1];
  free(a), free(b), free(c);
  return s;
}

__attribute__((noinline)) static double series(long n) {
  double s = 0;
  for (long i = 1; i < n; ++i) s += (i & 1 ? 1.0 : -1.0) / (double)i;
  return s;
}

static void *worker(void *arg) {
  sink += series(*(long *)arg);
  return NULL;
}

int main(int argc, char **argv) {
  int scale = argc > 1 ? atoi(argv[1]) : 1;
  long terms = 400000000L * scale;
  pthread_t t;
  pthread_create(&t, NULL, worker, &terms);
  sink += stencil(20000, 20000 * scale);
  sink += matmul(560 + 40 * scale);
  pthread_join(t, NULL);
  printf("demo result %.6f\n", sink);
  return 0;
}
