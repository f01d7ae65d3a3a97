// Two loops written on one line.
volatile int n = 4;
volatile long sink;

__attribute__((noinline)) void two(void) {
  for (int i = 0; i < n; i++) sink += i; for (int j = 0; j < n; j++) sink -= j;  // BOTH
}
