// A switch compiled to a jump table, inside a loop.
volatile int n = 100;
volatile long sink;

__attribute__((noinline)) void dispatch(void) {
  for (int i = 0; i < n; i++) {  // LOOP
    switch (i % 8) {
      case 0: sink += 3; break;
      case 1: sink ^= 5; break;
      case 2: sink -= 7; break;
      case 3: sink *= 11; break;
      case 4: sink += 13; break;
      case 5: sink |= 17; break;
      case 6: sink &= 19; break;
      default: sink = 23; break;
    }
  }
}
