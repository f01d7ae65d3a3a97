// The second unit of the split-DWARF package tests: its part of the binary's .debug_addr
// follows the first unit's.
volatile long acc;

static inline __attribute__((always_inline)) void add(int i) {
  for (int j = 0; j < i; j++) {  // ADD_J
    acc += j;
  }
}

__attribute__((noinline)) void second(int m) {
  for (int i = 0; i < m; i++) {  // SECOND_I
    add(i);
  }
}
