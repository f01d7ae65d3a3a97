// Per-thread bump allocator over mmap'd chunks. Safe in a signal handler (mmap is a plain
// syscall); never frees piecemeal, the whole arena goes at thread end.
// MT: externally synchronized (each thread owns its arena).
#pragma once

#include <cstddef>

namespace hpc::rt {

class Arena {
public:
  Arena() = default;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // Zero-filled, 16-byte aligned; nullptr when the kernel refuses memory.
  void* alloc(size_t n);
  void release();                    // unmaps every chunk
  size_t bytesMapped() const { return mapped_; }

private:
  struct Chunk {
    Chunk* next;
    size_t size;
  };
  Chunk* chunks_ = nullptr;
  char* cur_ = nullptr;
  char* end_ = nullptr;
  size_t mapped_ = 0;
};

// Whole pages straight from the kernel, for objects that outlive a thread's arena.
void* pageAlloc(size_t n);
void pageFree(void* p, size_t n);

}  // namespace hpc::rt
