/* Code generated at run time, as a JIT compiler's, in anonymous memory: no module, no CFI.
 * Built with frame pointers, as a JVM is, so that its callers' CFA rules read rbp.
 *   outer:   push rbp; mov rbp, rsp; call rsi; pop rbp; ret      (a JIT frame calling another)
 *   innerA:  push rbp; mov rbp, rsp; loop rdi times; pop rbp; ret (keeps a frame pointer)
 *   innerB:  push rbp; xor ebp, ebp; loop rdi times; pop rbp; ret (rbp as a register, 0)
 * The unwinder's frame-pointer guess from innerA lands in outer (no module), a frame of the
 * path; from innerB it ends at rbp 0, and the callers are found past outer. Either way they
 * must be level3 < level2 < level1 < main exactly. Before
 * level3 runs, stain() leaves return addresses in the stack where level3's frame then lies,
 * so that a caller found by scanning level3's frame for them is a wrong one.
 * With a second argument `map` it names its code in /tmp/perf-<pid>.map, as a JIT does on
 * request: a first name for the whole page, then one per function (the later lines win),
 * in both spellings of the format (hex with and without 0x). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "work.h"

typedef uint64_t (*JitFn)(uint64_t n, void* inner);

static const unsigned char kCode[] = {
    /* 0: outer */ 0x55, 0x48, 0x89, 0xe5, 0xff, 0xd6, 0x5d, 0xc3,
    0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90,
    /* 16: innerA */ 0x55, 0x48, 0x89, 0xe5, 0x48, 0x89, 0xf8, 0x48, 0xff, 0xc8, 0x75, 0xfb, 0x5d, 0xc3,
    0x90, 0x90,
    /* 32: innerB */ 0x55, 0x31, 0xed, 0x48, 0x89, 0xf8, 0x48, 0xff, 0xc8, 0x75, 0xfb, 0x5d, 0xc3,
};

static const int kAt = 64;  /* where the code lies in its page: a call's bytes in the page */
static JitFn outer;
static void* inner[2];

static void (*volatile stainNext)(int);
__attribute__((noinline)) static void stain(int d) {
  volatile char pad[48];
  pad[0] = (char)d;
  if (d) stainNext(d - 1);  /* an indirect call: its return address passes any callee test */
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) uint64_t level3(uint64_t n, int which) {
  volatile char buf[1024];  /* never written: it holds what stain() left */
  uint64_t r = outer(n, inner[which]);
  __asm__ volatile("" ::"r"(buf) : "memory");
  return r + 1;
}

__attribute__((noinline)) uint64_t level2(uint64_t n, int which) {
  stainNext(12);
  uint64_t r = level3(n, which);
  __asm__ volatile("" : "+r"(r));
  return r + 1;
}

__attribute__((noinline)) uint64_t level1(uint64_t n, int which) {
  uint64_t r = level2(n, which);
  __asm__ volatile("" : "+r"(r));
  return r + 1;
}

int main(int argc, char** argv) {
  double s = scale_arg(argc, argv);
  unsigned char* code = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (code == MAP_FAILED) return 1;
  memset(code, 0x90, 4096);
  memcpy(code + kAt, kCode, sizeof kCode);
  if (mprotect(code, 4096, PROT_READ | PROT_EXEC) != 0) return 1;
  outer = (JitFn)(void*)(code + kAt);
  inner[0] = code + kAt + 16;
  inner[1] = code + kAt + 32;
  stainNext = stain;
  if (argc > 2 && strcmp(argv[2], "map") == 0) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
    FILE* f = fopen(path, "w");
    if (!f) return 1;
    fprintf(f, "%lx 1000 jit_page_before_reuse\n", (unsigned long)code);
    fprintf(f, "0x%016lx 0x%016lx jit_outer\n", (unsigned long)(code + kAt), 16ul);
    fprintf(f, "0x%016lx 0x%016lx jit_innerA(long) [compiled]\n", (unsigned long)(code + kAt + 16), 14ul);
    fprintf(f, "%lx d jit_innerB\n", (unsigned long)(code + kAt + 32));
    fclose(f);
  }
  uint64_t acc = 0;
  for (int i = 0; i < (int)(400 * s); ++i) acc += level1(2000000, i & 1);
  printf("jit checksum %llu\n", (unsigned long long)acc);
  return 0;
}
