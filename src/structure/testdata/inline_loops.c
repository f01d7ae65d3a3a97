// An inlined function whose body is a loop inside a loop, called from a loop.
volatile int n = 4;
volatile long sink;

static inline __attribute__((always_inline)) void body(int i) {
  for (int j = 0; j < n; j++) {    // INNER_J
    for (int k = 0; k < n; k++) {  // INNER_K
      sink += i + j * k;
    }
  }
}

__attribute__((noinline)) void outer(void) {
  for (int i = 0; i < n; i++) {  // OUTER_I
    body(i);                     // CALL_BODY
  }
}
