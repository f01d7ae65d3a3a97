// Async-signal-safe building blocks: raw syscalls, clocks, text formatting into fixed
// buffers. Nothing here allocates, locks or touches stdio.
#pragma once

#include <cstddef>
#include <cstdint>
#include <sys/types.h>

namespace hpc::rt {

pid_t sysGettid();
uint64_t nowNs();            // CLOCK_REALTIME in nanoseconds (trace timestamps)
uint64_t monotonicNs();
uint64_t threadCpuNs(int tid);  // a thread of this process's CPU clock, in ns
bool writeAll(int fd, const void* data, size_t n);
size_t strLen(const char* s);
void memCopy(void* dst, const void* src, size_t n);
void memZero(void* dst, size_t n);
bool strEq(const char* a, const char* b);
bool strStartsWith(const char* s, const char* prefix);

// A fixed-capacity text builder; silently truncates.
class Text {
public:
  Text(char* buf, size_t cap) : buf_(buf), cap_(cap) { buf_[0] = 0; }
  Text& str(const char* s);
  Text& str(const char* s, size_t n);
  Text& dec(uint64_t v, int width = 0);  // zero-padded to width
  Text& sdec(int64_t v);
  Text& hex(uint64_t v, int width = 0);
  Text& ch(char c);
  const char* c_str() const { return buf_; }
  size_t size() const { return len_; }
  void clear() { len_ = 0; buf_[0] = 0; }

private:
  char* buf_;
  size_t cap_;
  size_t len_ = 0;
};

// A file the runtime keeps open across the application's code: the log, a thread's or a GPU
// stream's trace. The application may close any descriptor (a daemon closes every one past
// stderr, some then open or dup their own onto the same numbers): the descriptor is checked
// against the file's device and inode before each use, the file opened again by its path
// (appending) where the number no longer names it, and the number closed only while it does.
// Descriptors are moved above the numbers an application uses (`keptMoveHigh`), so that its
// own opens get the numbers they would get unmeasured.
struct KeptFile {
  int fd = -1;
  uint64_t dev = 0, ino = 0;
  const char* path = nullptr;  // while the file is in use (and must outlive that); else null
};
bool keptOpen(KeptFile& f, const char* path, int flags);  // open(path, flags | O_CLOEXEC, 0644)
int keptFd(KeptFile& f);      // checked, reopened if need be; -1: not in use, or cannot reopen
void keptClose(KeptFile& f);  // closes the descriptor only while it is still the file's; ends use
int keptMoveHigh(int fd);  // the same file on a high number (the old one closed), or fd itself
int keptHighBase();        // the lowest such number
// open(path, flags | O_CLOEXEC, 0644); where the application has taken every number it may
// have (EMFILE), the spare's descriptor (the log's) is given up and the open tried again, so
// that profiles and traces are still written: the spare is opened again at its next use.
int openOutput(const char* path, int flags);
void keptSetSpare(KeptFile* f);

// Writes one line to stderr, prefixed "hpcrun: ".
void complain(const char* msg);

}  // namespace hpc::rt
