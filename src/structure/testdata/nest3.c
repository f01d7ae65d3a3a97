// A loop nest of depth 3.
volatile int n = 4;
volatile long sink;

__attribute__((noinline)) void nest3(void) {
  for (int i = 0; i < n; i++) {      // LOOP_I
    for (int j = 0; j < n; j++) {    // LOOP_J
      for (int k = 0; k < n; k++) {  // LOOP_K
        sink += i * j + k;
      }
    }
  }
}
