/* The IO source's workload: known byte counts through each interposed call, each in a
 * function of its own (all in one directory given as argv[1], its files removed at the end).
 * Written: writer 3 MiB (write), pwriter 512 KiB (pwrite), writevr 512 KiB (writev),
 * fwriter 2 MiB (fwrite). Read: reader 4 MiB (read), preader 1 MiB (pread), readvr 512 KiB
 * (readv), freader 2 MiB (fread). Prints a checksum of what was read. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define KiB 1024
static char buf[1024 * KiB];
static char a[4096], b[4096];

__attribute__((noinline)) void writer(int fd) {
  for (int i = 0; i < 3; ++i)
    if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) exit(1);
}
__attribute__((noinline)) void pwriter(int fd) {
  if (pwrite(fd, buf, 512 * KiB, 3 * 1024 * KiB) != 512 * KiB) exit(1);
}
__attribute__((noinline)) void writevr(int fd) {
  struct iovec v[2] = {{buf, 256 * KiB}, {buf, 256 * KiB}};
  lseek(fd, 0, SEEK_END);
  if (writev(fd, v, 2) != 512 * KiB) exit(1);
}
__attribute__((noinline)) void fwriter(FILE* f) {
  for (int i = 0; i < 2; ++i)
    if (fwrite(buf, 1, sizeof buf, f) != sizeof buf) exit(1);
}
__attribute__((noinline)) long reader(int fd) {
  long t = 0, r;
  while ((r = read(fd, buf, 64 * KiB)) > 0) t += buf[r - 1] + r;
  return t;
}
__attribute__((noinline)) long preader(int fd) {
  long t = 0;
  for (int i = 0; i < 4; ++i) t += pread(fd, buf, 256 * KiB, i * 256 * KiB);
  return t;
}
__attribute__((noinline)) long readvr(int fd) {
  struct iovec v[2] = {{buf, 256 * KiB}, {buf + 256 * KiB, 256 * KiB}};
  lseek(fd, 0, SEEK_SET);
  return readv(fd, v, 2);
}
__attribute__((noinline)) long freader(FILE* f) {
  long t = 0;
  size_t r;
  while ((r = fread(buf, 1, 100 * KiB, f)) > 0) t += (long)r;
  return t;
}

int main(int argc, char** argv) {
  const char* dir = argc > 1 ? argv[1] : "/tmp";
  snprintf(a, sizeof a, "%s/io-a-%d", dir, (int)getpid());
  snprintf(b, sizeof b, "%s/io-b-%d", dir, (int)getpid());
  memset(buf, 7, sizeof buf);
  int fd = open(a, O_RDWR | O_CREAT | O_TRUNC, 0644);
  FILE* f = fopen(b, "w");
  if (fd < 0 || !f) return 1;
  writer(fd);
  pwriter(fd);
  writevr(fd);
  fwriter(f);
  fclose(f);
  lseek(fd, 0, SEEK_SET);
  long t = reader(fd) + preader(fd) + readvr(fd);
  f = fopen(b, "r");
  if (!f) return 1;
  t += freader(f);
  fclose(f);
  close(fd);
  unlink(a);
  unlink(b);
  printf("io checksum %ld\n", t);
  return 0;
}
