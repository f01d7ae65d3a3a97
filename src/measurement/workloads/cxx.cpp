// Virtual calls through a class hierarchy, and exceptions thrown across several frames.
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <vector>

#include "work.h"

struct Shape {
  virtual ~Shape() = default;
  virtual uint64_t area(uint64_t s) const = 0;
};
struct Square : Shape {
  __attribute__((noinline)) uint64_t area(uint64_t s) const override { return spin(3000, s); }
};
struct Circle : Shape {
  __attribute__((noinline)) uint64_t area(uint64_t s) const override { return spin(5000, s + 1); }
};

__attribute__((noinline)) uint64_t thrower(int depth, uint64_t v) {
  if (depth == 0) {
    if (spin(500, v) & 1) throw std::runtime_error("odd");
    return v;
  }
  return thrower(depth - 1, v + 1) + 1;
}

int main(int argc, char** argv) {
  double s = scale_arg(argc, argv);
  std::vector<std::unique_ptr<Shape>> shapes;
  for (int i = 0; i < 64; ++i) {
    if (i % 3) shapes.push_back(std::make_unique<Square>());
    else shapes.push_back(std::make_unique<Circle>());
  }
  uint64_t sum = 0;
  long caught = 0;
  for (long r = 0; r < long(1500 * s); ++r) {
    for (auto& sh : shapes) sum += sh->area(uint64_t(r));
    try {
      sum += thrower(20, uint64_t(r));
    } catch (const std::exception&) {
      ++caught;
    }
  }
  std::printf("cxx checksum %llu caught %ld\n", (unsigned long long)(sum & 0xffff), caught);
  return 0;
}
