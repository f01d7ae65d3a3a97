/* A library opened with RTLD_DEEPBIND (libdeep.so, deep_lib.c) that starts a thread and
 * writes: deep binding puts libc's pthread_create and write ahead of the preloaded runtime's.
 * argv: scale, the library, "lazy" for RTLD_LAZY (else RTLD_NOW). Prints a checksum. */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "work.h"

int main(int argc, char** argv) {
  double s = scale_arg(argc, argv);
  const char* lib = argc > 2 ? argv[2] : "./libdeep.so";
  const int mode = argc > 3 && strcmp(argv[3], "lazy") == 0 ? RTLD_LAZY : RTLD_NOW;
  void* h = dlopen(lib, mode | RTLD_LOCAL | RTLD_DEEPBIND);
  if (!h) {
    printf("dlopen failed: %s\n", dlerror());
    return 1;
  }
  uint64_t (*run)(uint64_t, int) = (uint64_t(*)(uint64_t, int))dlsym(h, "deep_run");
  int fd = open("/dev/null", O_WRONLY);
  if (!run || fd < 0) return 1;
  uint64_t sum = run((uint64_t)(4e8 * s), fd);
  close(fd);
  printf("deepbind checksum %llu\n", (unsigned long long)(sum & 0xffff));
  return 0;
}
