/* A statically linked program without libc (x86-64 Linux): writes one line and exits 7.
   hpcrun cannot preload its library into it, and says so (Launcher.WarnsOfStaticPrograms). */
void _start(void) {
  static const char msg[] = "static program ran\n";
  long r;
  __asm__ volatile("syscall" : "=a"(r) : "a"(1L), "D"(1L), "S"(msg), "d"(sizeof msg - 1) : "rcx", "r11", "memory");
  __asm__ volatile("syscall" : : "a"(60L), "D"(7L) : "rcx", "r11", "memory");
  for (;;) {
  }
}
