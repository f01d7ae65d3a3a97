/* The IO source's workload: known byte counts through each interposed call, each in a
 * function of its own (all in one directory given as argv[1], its files removed at the end).
 * Written: writer 3 MiB (write), pwriter 512 KiB (pwrite), writevr 512 KiB (writev),
 * fwriter 2 MiB (fwrite), pwritevr 256 KiB (pwritev), unlocked_writer 256 KiB
 * (fwrite_unlocked), printer 80,000 (fprintf), putser 100,000 (fputs), emit 8,000 (fprintf), main its output line
 * (printf). Read: reader 4 MiB (read), preader 1 MiB (pread), readvr 512 KiB (readv),
 * freader 2 MiB (fread), chk_reader 1 MiB, chk_preader 256 KiB, chk_freader 1 MiB (built with
 * _FORTIFY_SOURCE and sizes known only at run time: __read_chk, __pread_chk, __fread_chk),
 * preadvr 512 KiB (preadv), unlocked_reader 256 KiB (fread_unlocked), fgetser and getliner
 * 188,000 each (fgets, getline); emit 8,000 (fprintf: 2,672 from site_a, 5,328 from site_b).
 * char_writer 3,000 (fputc, putc), char_reader 3,000 (fgetc), unget_reader 3,000 (each byte
 * read, pushed back by ungetc and read again: counted once); scanner 188,000 (fscanf's tokens
 * and the whitespace between them: the file fgetser read), pipe_scanner 10,000 (fscanf from a
 * pipe: no file offset). POSIX AIO: aio_writer 256 KiB
 * (aio_write), aio_reader 128 KiB (aio_read), lio_reader 128 KiB (lio_listio). Prints a
 * checksum of what was read. */
#define _GNU_SOURCE
#include <aio.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define KiB 1024
static char buf[1024 * KiB];
static char a[4096], b[4096], c[4096];
static volatile size_t want = 64 * KiB;  /* a size the compiler cannot check */
static volatile int lineRoom = 64;
static long returns;  /* the sum of what the stdio calls returned: as unmeasured */

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
  while (t < 2 * 1024 * KiB && (r = fread(buf, 1, 128 * KiB, f)) > 0) t += (long)r;
  return t;
}
__attribute__((noinline)) long chk_reader(int fd) {
  long t = 0;
  for (int i = 0; i < 16; ++i) t += read(fd, buf, want);
  return t;
}
__attribute__((noinline)) long chk_preader(int fd) {
  long t = 0;
  for (int i = 0; i < 4; ++i) t += pread(fd, buf, want, i * 64 * KiB);
  return t;
}
__attribute__((noinline)) long chk_freader(FILE* f) {
  long t = 0;
  for (int i = 0; i < 16; ++i) t += (long)fread(buf, 1, want, f);
  return t;
}
// POSIX AIO: one request's bytes, counted where it is queued; the transfer runs on glibc's
// own thread.
static long aio_wait(struct aiocb* cb) {
  const struct aiocb* list[1] = {cb};
  while (aio_error(cb) == EINPROGRESS) aio_suspend(list, 1, NULL);
  return aio_return(cb);
}

__attribute__((noinline)) long aio_writer(int fd) {
  struct aiocb cb;
  memset(&cb, 0, sizeof cb);
  cb.aio_fildes = fd, cb.aio_buf = buf, cb.aio_nbytes = 256 * KiB, cb.aio_offset = 0;
  return aio_write(&cb) == 0 ? aio_wait(&cb) : -1;
}

__attribute__((noinline)) long aio_reader(int fd) {
  struct aiocb cb;
  memset(&cb, 0, sizeof cb);
  cb.aio_fildes = fd, cb.aio_buf = buf, cb.aio_nbytes = 128 * KiB, cb.aio_offset = 0;
  return aio_read(&cb) == 0 ? aio_wait(&cb) : -1;
}

__attribute__((noinline)) long lio_reader(int fd) {
  struct aiocb cbs[2];
  struct aiocb* list[2] = {&cbs[0], &cbs[1]};
  memset(cbs, 0, sizeof cbs);
  for (int i = 0; i < 2; ++i) {
    cbs[i].aio_fildes = fd, cbs[i].aio_buf = buf + i * 64 * KiB, cbs[i].aio_nbytes = 64 * KiB;
    cbs[i].aio_offset = i * 64 * KiB, cbs[i].aio_lio_opcode = LIO_READ;
  }
  if (lio_listio(LIO_WAIT, list, 2, NULL) != 0) return -1;
  return aio_return(&cbs[0]) + aio_return(&cbs[1]);
}

__attribute__((noinline)) void pwritevr(int fd) {
  struct iovec v[2] = {{buf, 128 * KiB}, {buf, 128 * KiB}};
  if (pwritev(fd, v, 2, 0) != 256 * KiB) exit(1);  /* over what is there */
}
__attribute__((noinline)) long preadvr(int fd) {
  struct iovec v[2] = {{buf, 256 * KiB}, {buf + 256 * KiB, 256 * KiB}};
  return preadv(fd, v, 2, 0);
}
__attribute__((noinline)) void unlocked_writer(FILE* f) {
  if (fwrite_unlocked(buf, 1, 256 * KiB, f) != 256 * KiB) exit(1);
}
__attribute__((noinline)) long unlocked_reader(FILE* f) {
  long r = (long)fread_unlocked(buf, 1, 256 * KiB, f);
  __asm__ volatile("" ::: "memory");  /* not a tail call: the context is this function's */
  return r;
}
__attribute__((noinline)) void printer(FILE* f) {
  for (int i = 0; i < 10000; ++i)
    if (fprintf(f, "%07d\n", i) != 8) exit(1);
}
__attribute__((noinline)) void putser(FILE* f) {
  char line[101];
  memset(line, 'x', 99);
  line[99] = '\n';
  line[100] = 0;
  for (int i = 0; i < 1000; ++i) {
    int r = fputs(line, f);
    if (r < 0) exit(1);
    returns += r;
  }
}
__attribute__((noinline)) long fgetser(FILE* f) {
  char line[128];
  long t = 0;
  while (fgets(line, lineRoom, f)) t += line[0];
  return t;
}
__attribute__((noinline)) long getliner(FILE* f) {
  char* line = NULL;
  size_t cap = 0;
  long t = 0;
  ssize_t r;
  while ((r = getline(&line, &cap, f)) > 0) t += r;
  free(line);
  return t;
}
__attribute__((noinline)) long unget_reader(FILE* f) {
  long t = 0;
  for (int c; (c = fgetc(f)) != EOF;) {
    if (ungetc(c, f) == EOF) exit(1);
    t += fgetc(f) == c;
  }
  return t;
}
__attribute__((noinline)) long scanner(FILE* f) {
  char tok[128];
  long t = 0;
  while (fscanf(f, "%127s", tok) == 1) t += tok[0];
  return t;
}
__attribute__((noinline)) long pipe_scanner(FILE* f) {
  long t = 0;
  int v;
  while (fscanf(f, "%d", &v) == 1) t += v;
  return t;
}
/* One line writer called from two callers of one frame size in turn: the same stack pointer
 * in emit each time, the caller's return address the only difference (site_a 334 lines of 8
 * bytes, site_b 666). */
__attribute__((noinline)) void emit(FILE* f, int i, char tag) {
  if (fprintf(f, "%06d%c\n", i, tag) != 8) exit(1);
}
__attribute__((noinline)) void site_a(FILE* f, int i) {
  emit(f, i, 'a');
  __asm__ volatile("");
}
__attribute__((noinline)) void site_b(FILE* f, int i) {
  emit(f, i, 'b');
  __asm__ volatile("");
}

/* A byte a call: 3,000 written (fputc, putc), and the file read back a byte at a time. */
__attribute__((noinline)) void char_writer(FILE* f) {
  for (int i = 0; i < 1500; ++i) {
    if (fputc('x', f) == EOF) exit(1);
    if (putc('\n', f) == EOF) exit(1);
  }
}
__attribute__((noinline)) long char_reader(FILE* f) {
  long t = 0;
  for (int ch; (ch = fgetc(f)) != EOF;) t += ch == 'x';
  return t;
}

int main(int argc, char** argv) {
  const char* dir = argc > 1 ? argv[1] : "/tmp";
  snprintf(a, sizeof a, "%s/io-a-%d", dir, (int)getpid());
  snprintf(b, sizeof b, "%s/io-b-%d", dir, (int)getpid());
  snprintf(c, sizeof c, "%s/io-c-%d", dir, (int)getpid());
  memset(buf, 7, sizeof buf);
  int fd = open(a, O_RDWR | O_CREAT | O_TRUNC, 0644);
  FILE* f = fopen(b, "w");
  if (fd < 0 || !f) return 1;
  writer(fd);
  pwriter(fd);
  writevr(fd);
  fwriter(f);
  unlocked_writer(f);
  fclose(f);
  pwritevr(fd);
  long t = aio_writer(fd) + aio_reader(fd) + lio_reader(fd);
  lseek(fd, 0, SEEK_SET);
  t += reader(fd) + preader(fd) + readvr(fd) + preadvr(fd);
  lseek(fd, 0, SEEK_SET);
  t += chk_reader(fd) + chk_preader(fd);
  f = fopen(b, "r");
  if (!f) return 1;
  t += freader(f);
  rewind(f);
  t += chk_freader(f) + unlocked_reader(f);
  fclose(f);
  f = fopen(c, "w");
  if (!f) return 1;
  printer(f);
  putser(f);
  fclose(f);
  f = fopen(c, "a");
  if (!f) return 1;
  for (int i = 0; i < 1000; ++i) {
    if (i % 3 == 0) site_a(f, i);
    else site_b(f, i);
  }
  fclose(f);
  f = fopen(c, "r");
  if (!f) return 1;
  t += fgetser(f);
  rewind(f);
  t += getliner(f);
  rewind(f);
  t += scanner(f);
  fclose(f);
  int p[2];
  if (pipe(p) != 0) return 1;
  for (int i = 0; i < 2000; ++i)  /* 10,000 bytes: the pipe holds them all */
    if (write(p[1], "1234\n", 5) != 5) return 1;
  close(p[1]);
  f = fdopen(p[0], "r");
  if (!f) return 1;
  t += pipe_scanner(f);
  fclose(f);
  f = fopen(a, "w");
  if (!f) return 1;
  char_writer(f);
  fclose(f);
  f = fopen(a, "r");
  if (!f) return 1;
  t += char_reader(f);
  rewind(f);
  t += unget_reader(f);
  fclose(f);
  close(fd);
  unlink(a);
  unlink(b);
  unlink(c);
  returns += puts("io done");
  printf("io checksum %ld, stdio returned %ld\n", t, returns);
  return 0;
}
