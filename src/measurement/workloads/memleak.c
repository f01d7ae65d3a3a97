/* Heap allocations with known sizes at known contexts (hpcrun -e MEMLEAK): leaker 100 blocks
 * of 1,000 bytes never freed; tidy 100 of 2,000 freed at once; grower one block realloc'd
 * from 100 to 5,000 bytes in steps of 100 (127,500 in all), then freed; producer, on a
 * thread of its own, 100 calloc'd blocks of 500 bytes that main frees after joining it;
 * nested, 30 calls deep in itself, 10 blocks of 700 bytes, freed.
 * Tests Sources.MemleakFindsWhatWasNotFreed, Paths.SimpleRecursionIsFoldedUnlessRetained. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void* keep[1000];
static int nkeep;
volatile char sink;

__attribute__((noinline)) void leaker(int n) {
  for (int i = 0; i < n; i++) {
    char* p = malloc(1000);
    memset(p, 1, 1000);
    keep[nkeep++] = p;
  }
}

__attribute__((noinline)) void tidy(int n) {
  for (int i = 0; i < n; i++) {
    char* volatile p = malloc(2000);  /* volatile: the pair is not optimized away */
    memset(p, 2, 2000);
    sink = p[7];
    free(p);
  }
}

__attribute__((noinline)) void grower(int n) {
  char* p = NULL;
  for (int i = 1; i <= n; i++) {
    p = realloc(p, (size_t)i * 100);
    p[0] = (char)i;
  }
  sink = p[0];
  free(p);
}

__attribute__((noinline)) void nested(int depth) {
  if (depth > 0) {
    nested(depth - 1);
    sink++;  /* not a tail call */
    return;
  }
  char* volatile p[10];
  for (int i = 0; i < 10; i++) p[i] = malloc(700);
  for (int i = 0; i < 10; i++) free(p[i]);
}

static void* producer(void* arg) {
  char** out = arg;
  for (int i = 0; i < 100; i++) out[i] = calloc(10, 50);
  return NULL;
}

int main(void) {
  leaker(100);
  tidy(100);
  grower(50);
  nested(30);
  static char* handed[100];
  pthread_t t;
  pthread_create(&t, NULL, producer, handed);
  pthread_join(t, NULL);
  for (int i = 0; i < 100; i++) free(handed[i]);
  printf("kept %d blocks\n", nkeep);
  return 0;
}
