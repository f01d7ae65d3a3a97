// A program built -O2 and stripped of every symbol: its main is found from the entry point.
volatile int n = 4;
volatile long sink;

int main(void) {
  for (int i = 0; i < n; i++) sink += i;  // MAIN_LOOP
  return 0;
}
