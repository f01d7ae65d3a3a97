#include "arena.hpp"

#include <sys/mman.h>

namespace hpc::rt {

namespace {
constexpr size_t kChunk = size_t(1) << 20;
constexpr size_t kPage = 4096;
size_t roundUp(size_t n, size_t a) { return (n + a - 1) & ~(a - 1); }
}  // namespace

void* pageAlloc(size_t n) {
  void* p = mmap(nullptr, roundUp(n, kPage), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

void pageFree(void* p, size_t n) {
  if (p) munmap(p, roundUp(n, kPage));
}

void* Arena::alloc(size_t n) {
  n = roundUp(n, 16);
  if (cur_ + n > end_ || !cur_) {
    size_t want = roundUp(n + sizeof(Chunk) + 16, kChunk);
    auto* c = static_cast<Chunk*>(pageAlloc(want));
    if (!c) return nullptr;
    c->next = chunks_;
    c->size = want;
    chunks_ = c;
    mapped_ += want;
    cur_ = reinterpret_cast<char*>(c) + 16;
    end_ = reinterpret_cast<char*>(c) + want;
  }
  void* p = cur_;
  cur_ += n;
  return p;  // fresh anonymous pages are already zero
}

void Arena::release() {
  while (chunks_) {
    Chunk* next = chunks_->next;
    pageFree(chunks_, chunks_->size);
    chunks_ = next;
  }
  cur_ = end_ = nullptr;
  mapped_ = 0;
}

}  // namespace hpc::rt
