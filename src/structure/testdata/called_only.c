// Built -g -O2 without unwind tables, then stripped of .symtab and .eh_frame: `hidden` has
// no symbol, no FDE and no DWARF left; only visible()'s call reaches it.
volatile int n = 4;
volatile long sink;

__attribute__((noinline)) static void hidden(void) {
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < n; j++) sink += i * j;
  }
}

void visible(void) {
  hidden();
  for (int i = 0; i < n; i++) sink -= i;
}
