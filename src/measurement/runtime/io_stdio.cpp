// The IO source's stdio level (`-e IO`), in libhpcrun_io.so, which the launcher preloads
// beside libhpcrun.so only with -e IO: interposing these in every measurement cost each call
// of the program's an extra indirect call and a check (about 2 ns: a loop of short fputs ran
// 25 % slower under plain CPUTIME). fread, fwrite, their _unlocked and _FORTIFY_SOURCE forms,
// the printf family (the characters written), fputs, puts, fgets (the line read) and
// getline/getdelim (glibc's inline getline calls __getdelim) count through libhpcrun.so's
// hpcrun_io_count. glibc's stdio moves its buffers by internal calls no wrapper sees: these
// count what the application asked for, and the system calls under them are not counted
// again. fputc, putc, putchar, fgetc, getc and getchar count a byte each. A byte ungetc
// pushes back is read again: the thread's pushed-back bytes on its last stream are taken off
// the next reads of that stream, so each byte counts once (fseek, fsetpos, rewind, fflush and
// fclose drop them, as glibc drops the pushback). The scanf family returns no byte count: a call
// counts what it consumed of the stream, for a stream on a file where the file offset moved
// plus what the buffer held before less what it holds after (exact, however often the call
// refilled the buffer), else (a pipe, a terminal) from the buffer's pointers, taking a call
// to have refilled the buffer at most once (tokens shorter than a buffer).
// POSIX AIO's transfers run on glibc's own threads, past every wrapper: aio_read, aio_write
// and lio_listio (and their 64 forms) count the bytes each request asks for (aio_nbytes)
// where the program queued it, once queued.
#include <aio.h>
#include <errno.h>
#include <stdarg.h>
#include <unistd.h>
#include <stdio.h>
#include <sys/types.h>

#include "interpose.hpp"
#include "io.hpp"

using namespace hpc::rt;

namespace {

int (*real_aio_read)(struct aiocb*);
int (*real_aio_write)(struct aiocb*);
int (*real_aio_read64)(struct aiocb64*);
int (*real_aio_write64)(struct aiocb64*);
int (*real_lio_listio)(int, struct aiocb* const[], int, struct sigevent*);
int (*real_lio_listio64)(int, struct aiocb64* const[], int, struct sigevent*);

// A request's bytes, in direction dir, where it was queued (rc 0).
template <class Cb> int queued(int dir, int rc, const Cb* cb) {
  if (rc == 0) hpcrun_io_count(dir, long(cb->aio_nbytes));
  return rc;
}

// Each queued request's bytes, by its direction (a list's requests as lio_listio queued them:
// all of them where it returned 0).
template <class Cb> int listed(int rc, Cb* const list[], int n) {
  if (rc != 0) return rc;
  long bytes[2] = {0, 0};
  for (int i = 0; i < n; ++i)
    if (list[i] && (list[i]->aio_lio_opcode == LIO_READ || list[i]->aio_lio_opcode == LIO_WRITE))
      bytes[list[i]->aio_lio_opcode == LIO_WRITE] += long(list[i]->aio_nbytes);
  for (int dir = 0; dir < 2; ++dir)
    if (bytes[dir]) hpcrun_io_count(dir, bytes[dir]);
  return rc;
}

size_t (*real_fread)(void*, size_t, size_t, FILE*);
size_t (*real_fwrite)(const void*, size_t, size_t, FILE*);
size_t (*real___fread_chk)(void*, size_t, size_t, size_t, FILE*);
size_t (*real___fread_unlocked_chk)(void*, size_t, size_t, size_t, FILE*);
size_t (*real_fread_unlocked)(void*, size_t, size_t, FILE*);
size_t (*real_fwrite_unlocked)(const void*, size_t, size_t, FILE*);
// Formatted and line-wise stdio: the characters each call wrote or the line it read.
int (*real_vfprintf)(FILE*, const char*, va_list);
int (*real_vprintf)(const char*, va_list);
int (*real___vfprintf_chk)(FILE*, int, const char*, va_list);
int (*real___vprintf_chk)(int, const char*, va_list);
int (*real_vdprintf)(int, const char*, va_list);
int (*real___vdprintf_chk)(int, int, const char*, va_list);
int (*real_fputs)(const char*, FILE*);
int (*real_fputs_unlocked)(const char*, FILE*);
int (*real_puts)(const char*);
char* (*real_fgets)(char*, int, FILE*);
char* (*real_fgets_unlocked)(char*, int, FILE*);
char* (*real___fgets_chk)(char*, size_t, int, FILE*);
char* (*real___fgets_unlocked_chk)(char*, size_t, int, FILE*);
ssize_t (*real_getline)(char**, size_t*, FILE*);
ssize_t (*real_getdelim)(char**, size_t*, int, FILE*);
ssize_t (*real___getdelim)(char**, size_t*, int, FILE*);
// A character a call.
int (*real_fgetc)(FILE*);
int (*real_getc)(FILE*);
int (*real__IO_getc)(FILE*);
int (*real_getchar)();
int (*real_fputc)(int, FILE*);
int (*real_putc)(int, FILE*);
int (*real__IO_putc)(int, FILE*);
int (*real_putchar)(int);

// ungetc's bytes pushed back on the thread's last stream, not yet read again.
thread_local FILE* tlsPushedOn __attribute__((tls_model("initial-exec"))) = nullptr;
thread_local long tlsPushed __attribute__((tls_model("initial-exec"))) = 0;

// `bytes` read from f counted, less those read again after an ungetc.
void countRead(FILE* f, long bytes) {
  if (bytes > 0 && f && f == tlsPushedOn && tlsPushed > 0) {
    const long again = bytes < tlsPushed ? bytes : tlsPushed;
    tlsPushed -= again, bytes -= again;
  }
  if (bytes > 0) hpcrun_io_count(0, bytes);
}
void dropPushed(FILE* f) {
  if (!f || f == tlsPushedOn) tlsPushedOn = nullptr, tlsPushed = 0;
}

// Where a scanf call starts or ends in its stream: the file offset (-1 where there is none)
// and the read buffer, taken without changing errno.
struct ScanMark {
  off_t pos;
  const char *base, *ptr, *end;
};
ScanMark scanMark(FILE* f) {
  const int saved = errno;
  const int fd = f ? fileno_unlocked(f) : -1;
  ScanMark m{fd >= 0 ? lseek(fd, 0, SEEK_CUR) : off_t(-1), f ? f->_IO_read_base : nullptr,
             f ? f->_IO_read_ptr : nullptr, f ? f->_IO_read_end : nullptr};
  errno = saved;
  return m;
}
// What a scanf call consumed between two marks.
long scanned(const ScanMark& a, const ScanMark& b) {
  long n;
  if (a.pos >= 0 && b.pos >= 0) {
    n = long(b.pos - a.pos) + long(a.end - a.ptr) - long(b.end - b.ptr);
  } else if (a.base == b.base && a.end == b.end && b.ptr >= a.ptr) {
    n = long(b.ptr - a.ptr);  // the same buffer
  } else {
    n = long(a.end - a.ptr) + long(b.ptr - b.base);  // the rest of the last buffer, then the new one's
  }
  return n > 0 ? n : 0;
}
template <class Call> int scanCounted(FILE* f, Call&& call) {
  const ScanMark before = scanMark(f);
  const int r = call();
  const long n = scanned(before, scanMark(f));
  if (n > 0) {
    const int saved = errno;
    countRead(f, n);
    errno = saved;
  }
  return r;
}

int (*real_vfscanf)(FILE*, const char*, va_list);
int (*real_vscanf)(const char*, va_list);
int (*real___isoc99_vfscanf)(FILE*, const char*, va_list);
int (*real___isoc99_vscanf)(const char*, va_list);
int (*real___isoc23_vfscanf)(FILE*, const char*, va_list);
int (*real___isoc23_vscanf)(const char*, va_list);

int (*real_ungetc)(int, FILE*);
int (*real_fseek)(FILE*, long, int);
int (*real_fseeko)(FILE*, off_t, int);
int (*real_fseeko64)(FILE*, off64_t, int);
int (*real_fsetpos)(FILE*, const fpos_t*);
int (*real_fsetpos64)(FILE*, const fpos64_t*);
void (*real_rewind)(FILE*);
int (*real_fflush)(FILE*);
int (*real_fclose)(FILE*);

// A character call's result: one byte where it is not EOF.
int countedChar(int dir, int r) {
  if (r != EOF) hpcrun_io_count(dir, 1);
  return r;
}
int readChar(FILE* f, int r) {
  if (r != EOF) countRead(f, 1);
  return r;
}

}  // namespace

HPC_EXPORT int aio_read(struct aiocb* cb) { return queued(0, REAL(aio_read)(cb), cb); }

HPC_EXPORT int aio_write(struct aiocb* cb) { return queued(1, REAL(aio_write)(cb), cb); }

HPC_EXPORT int aio_read64(struct aiocb64* cb) { return queued(0, REAL(aio_read64)(cb), cb); }

HPC_EXPORT int aio_write64(struct aiocb64* cb) { return queued(1, REAL(aio_write64)(cb), cb); }

HPC_EXPORT int lio_listio(int mode, struct aiocb* const list[], int n, struct sigevent* sev) {
  return listed(REAL(lio_listio)(mode, list, n, sev), list, n);
}

HPC_EXPORT int lio_listio64(int mode, struct aiocb64* const list[], int n, struct sigevent* sev) {
  return listed(REAL(lio_listio64)(mode, list, n, sev), list, n);
}

HPC_EXPORT size_t fread(void* buf, size_t size, size_t n, FILE* f) {
  const size_t r = REAL(fread)(buf, size, n, f);
  countRead(f, long(r * size));
  return r;
}

HPC_EXPORT size_t fwrite(const void* buf, size_t size, size_t n, FILE* f) {
  return counted(1, REAL(fwrite)(buf, size, n, f), size);
}

HPC_EXPORT size_t fread_unlocked(void* buf, size_t size, size_t n, FILE* f) {
  const size_t r = REAL(fread_unlocked)(buf, size, n, f);
  countRead(f, long(r * size));
  return r;
}

HPC_EXPORT size_t fwrite_unlocked(const void* buf, size_t size, size_t n, FILE* f) {
  return counted(1, REAL(fwrite_unlocked)(buf, size, n, f), size);
}

HPC_EXPORT size_t __fread_chk(void* buf, size_t room, size_t size, size_t n, FILE* f) {
  const size_t r = REAL(__fread_chk)(buf, room, size, n, f);
  countRead(f, long(r * size));
  return r;
}

HPC_EXPORT size_t __fread_unlocked_chk(void* buf, size_t room, size_t size, size_t n, FILE* f) {
  const size_t r = REAL(__fread_unlocked_chk)(buf, room, size, n, f);
  countRead(f, long(r * size));
  return r;
}

// The printf family: the characters written (its result).
HPC_EXPORT int vfprintf(FILE* f, const char* fmt, va_list ap) { return counted(1, REAL(vfprintf)(f, fmt, ap)); }
HPC_EXPORT int vprintf(const char* fmt, va_list ap) { return counted(1, REAL(vprintf)(fmt, ap)); }
HPC_EXPORT int vdprintf(int fd, const char* fmt, va_list ap) { return counted(1, REAL(vdprintf)(fd, fmt, ap)); }

HPC_EXPORT int __vfprintf_chk(FILE* f, int flag, const char* fmt, va_list ap) {
  return counted(1, REAL(__vfprintf_chk)(f, flag, fmt, ap));
}

HPC_EXPORT int __vprintf_chk(int flag, const char* fmt, va_list ap) {
  return counted(1, REAL(__vprintf_chk)(flag, fmt, ap));
}

HPC_EXPORT int __vdprintf_chk(int fd, int flag, const char* fmt, va_list ap) {
  return counted(1, REAL(__vdprintf_chk)(fd, flag, fmt, ap));
}

// The variadic forms, through the v-forms above (each a call of the application's here).
#define HPC_VARIADIC(call)  \
  va_list ap;               \
  va_start(ap, fmt);        \
  const int r = (call);     \
  va_end(ap);               \
  return counted(1, r)

HPC_EXPORT int fprintf(FILE* f, const char* fmt, ...) { HPC_VARIADIC(REAL(vfprintf)(f, fmt, ap)); }
HPC_EXPORT int printf(const char* fmt, ...) { HPC_VARIADIC(REAL(vprintf)(fmt, ap)); }
HPC_EXPORT int dprintf(int fd, const char* fmt, ...) { HPC_VARIADIC(REAL(vdprintf)(fd, fmt, ap)); }
HPC_EXPORT int __fprintf_chk(FILE* f, int flag, const char* fmt, ...) { HPC_VARIADIC(REAL(__vfprintf_chk)(f, flag, fmt, ap)); }
HPC_EXPORT int __printf_chk(int flag, const char* fmt, ...) { HPC_VARIADIC(REAL(__vprintf_chk)(flag, fmt, ap)); }
HPC_EXPORT int __dprintf_chk(int fd, int flag, const char* fmt, ...) { HPC_VARIADIC(REAL(__vdprintf_chk)(fd, flag, fmt, ap)); }
#undef HPC_VARIADIC

HPC_EXPORT int fputs(const char* s, FILE* f) {
  const int r = REAL(fputs)(s, f);
  return countedText(1, r, r >= 0, s);
}

HPC_EXPORT int fputs_unlocked(const char* s, FILE* f) {
  const int r = REAL(fputs_unlocked)(s, f);
  return countedText(1, r, r >= 0, s);
}

HPC_EXPORT int puts(const char* s) {
  const int r = REAL(puts)(s);
  return countedText(1, r, r >= 0, s, 1);
}

// fgets: the line read (a line holding a NUL counts up to it).
HPC_EXPORT char* fgets(char* s, int n, FILE* f) {
  char* r = REAL(fgets)(s, n, f);
  if (r) countRead(f, long(strlen(s)));
  return r;
}

HPC_EXPORT char* fgets_unlocked(char* s, int n, FILE* f) {
  char* r = REAL(fgets_unlocked)(s, n, f);
  if (r) countRead(f, long(strlen(s)));
  return r;
}

HPC_EXPORT char* __fgets_chk(char* s, size_t room, int n, FILE* f) {
  char* r = REAL(__fgets_chk)(s, room, n, f);
  if (r) countRead(f, long(strlen(s)));
  return r;
}

HPC_EXPORT char* __fgets_unlocked_chk(char* s, size_t room, int n, FILE* f) {
  char* r = REAL(__fgets_unlocked_chk)(s, room, n, f);
  if (r) countRead(f, long(strlen(s)));
  return r;
}

HPC_EXPORT ssize_t getline(char** line, size_t* cap, FILE* f) {
  const ssize_t r = REAL(getline)(line, cap, f);
  countRead(f, long(r));
  return r;
}

HPC_EXPORT ssize_t getdelim(char** line, size_t* cap, int delim, FILE* f) {
  const ssize_t r = REAL(getdelim)(line, cap, delim, f);
  countRead(f, long(r));
  return r;
}

HPC_EXPORT ssize_t __getdelim(char** line, size_t* cap, int delim, FILE* f) {
  const ssize_t r = REAL(__getdelim)(line, cap, delim, f);
  countRead(f, long(r));
  return r;
}

// The character calls: a byte each (their _unlocked forms are inline code of glibc's headers,
// which no wrapper sees). A call from where the last one came from costs about 15 ns more
// (a reuse of its context): a loop of them runs a few times slower with -e IO.
HPC_EXPORT int fgetc(FILE* f) { return readChar(f, REAL(fgetc)(f)); }
HPC_EXPORT int getc(FILE* f) { return readChar(f, REAL(getc)(f)); }
HPC_EXPORT int _IO_getc(FILE* f) { return readChar(f, REAL(_IO_getc)(f)); }
HPC_EXPORT int getchar() { return readChar(stdin, REAL(getchar)()); }

// A byte pushed back: the read that takes it again does not count it again.
HPC_EXPORT int ungetc(int c, FILE* f) {
  const int r = REAL(ungetc)(c, f);
  if (r != EOF) {
    if (f != tlsPushedOn) tlsPushedOn = f, tlsPushed = 0;
    ++tlsPushed;
  }
  return r;
}
// What drops a stream's pushed-back bytes drops them from the count too.
HPC_EXPORT int fseek(FILE* f, long off, int whence) {
  dropPushed(f);
  return REAL(fseek)(f, off, whence);
}
HPC_EXPORT int fseeko(FILE* f, off_t off, int whence) {
  dropPushed(f);
  return REAL(fseeko)(f, off, whence);
}
HPC_EXPORT int fseeko64(FILE* f, off64_t off, int whence) {
  dropPushed(f);
  return REAL(fseeko64)(f, off, whence);
}
HPC_EXPORT int fsetpos(FILE* f, const fpos_t* pos) {
  dropPushed(f);
  return REAL(fsetpos)(f, pos);
}
HPC_EXPORT int fsetpos64(FILE* f, const fpos64_t* pos) {
  dropPushed(f);
  return REAL(fsetpos64)(f, pos);
}
HPC_EXPORT void rewind(FILE* f) {
  dropPushed(f);
  REAL(rewind)(f);
}
HPC_EXPORT int fflush(FILE* f) {
  dropPushed(f);
  return REAL(fflush)(f);
}
HPC_EXPORT int fclose(FILE* f) {
  dropPushed(f);
  return REAL(fclose)(f);
}
HPC_EXPORT int fputc(int c, FILE* f) { return countedChar(1, REAL(fputc)(c, f)); }
HPC_EXPORT int putc(int c, FILE* f) { return countedChar(1, REAL(putc)(c, f)); }
HPC_EXPORT int _IO_putc(int c, FILE* f) { return countedChar(1, REAL(_IO_putc)(c, f)); }
HPC_EXPORT int putchar(int c) { return countedChar(1, REAL(putchar)(c)); }

// The scanf family: what each call consumed of its stream (stdin for scanf), the C99 and C23
// names glibc's headers redirect to included. The plain names are defined under their own
// symbols: <stdio.h> renames C++'s fscanf and the like to the C99 ones.
HPC_EXPORT int hpc_vfscanf(FILE*, const char*, va_list) __asm__("vfscanf");
HPC_EXPORT int hpc_vscanf(const char*, va_list) __asm__("vscanf");
HPC_EXPORT int hpc_fscanf(FILE*, const char*, ...) __asm__("fscanf");
HPC_EXPORT int hpc_scanf(const char*, ...) __asm__("scanf");
HPC_EXPORT int hpc_vfscanf(FILE* f, const char* fmt, va_list ap) {
  return scanCounted(f, [&] { return REAL(vfscanf)(f, fmt, ap); });
}
HPC_EXPORT int hpc_vscanf(const char* fmt, va_list ap) {
  return scanCounted(stdin, [&] { return REAL(vscanf)(fmt, ap); });
}
HPC_EXPORT int __isoc99_vfscanf(FILE* f, const char* fmt, va_list ap) {
  return scanCounted(f, [&] { return REAL(__isoc99_vfscanf)(f, fmt, ap); });
}
HPC_EXPORT int __isoc99_vscanf(const char* fmt, va_list ap) {
  return scanCounted(stdin, [&] { return REAL(__isoc99_vscanf)(fmt, ap); });
}
// glibc 2.38's names: where the libc has none, the C99 form (a program built against a newer
// glibc does not run on an older one, so this is never the program's call).
HPC_EXPORT int __isoc23_vfscanf(FILE* f, const char* fmt, va_list ap) {
  return scanCounted(f, [&] {
    return REAL(__isoc23_vfscanf) ? real___isoc23_vfscanf(f, fmt, ap) : REAL(__isoc99_vfscanf)(f, fmt, ap);
  });
}
HPC_EXPORT int __isoc23_vscanf(const char* fmt, va_list ap) {
  return scanCounted(stdin, [&] {
    return REAL(__isoc23_vscanf) ? real___isoc23_vscanf(fmt, ap) : REAL(__isoc99_vscanf)(fmt, ap);
  });
}
#define HPC_SCAN(stream, call) \
  va_list ap;                  \
  va_start(ap, fmt);           \
  const int r = scanCounted(stream, [&] { return (call); }); \
  va_end(ap);                  \
  return r
HPC_EXPORT int hpc_fscanf(FILE* f, const char* fmt, ...) { HPC_SCAN(f, REAL(vfscanf)(f, fmt, ap)); }
HPC_EXPORT int hpc_scanf(const char* fmt, ...) { HPC_SCAN(stdin, REAL(vscanf)(fmt, ap)); }
HPC_EXPORT int __isoc99_fscanf(FILE* f, const char* fmt, ...) { HPC_SCAN(f, REAL(__isoc99_vfscanf)(f, fmt, ap)); }
HPC_EXPORT int __isoc99_scanf(const char* fmt, ...) { HPC_SCAN(stdin, REAL(__isoc99_vscanf)(fmt, ap)); }
HPC_EXPORT int __isoc23_fscanf(FILE* f, const char* fmt, ...) {
  HPC_SCAN(f, REAL(__isoc23_vfscanf) ? real___isoc23_vfscanf(f, fmt, ap) : REAL(__isoc99_vfscanf)(f, fmt, ap));
}
HPC_EXPORT int __isoc23_scanf(const char* fmt, ...) {
  HPC_SCAN(stdin, REAL(__isoc23_vscanf) ? real___isoc23_vscanf(fmt, ap) : REAL(__isoc99_vscanf)(fmt, ap));
}
#undef HPC_SCAN
