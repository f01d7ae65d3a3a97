// Built -g -O2 and then stripped: only .dynsym and .eh_frame are left.
volatile int n = 4;
volatile long sink;

__attribute__((noinline)) static void hidden(void) {
  for (int i = 0; i < n; i++) {  // HIDDEN_LOOP
    for (int j = 0; j < n; j++) sink += i * j;
  }
}

void visible(void) {
  hidden();
  for (int i = 0; i < n; i++) sink -= i;
}
