// The heap setUpHeap() makes: huge pages for its first kHugeHeapBytes only (a process of its
// own: the heap is set up once, before anything else allocates much).
#include "analysis/heap.hpp"

#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace hpc::analysis {
namespace {

std::string firstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// AnonHugePages of this process, in KiB.
long anonHugeKiB() {
  std::ifstream in("/proc/self/smaps_rollup");
  std::string key;
  long value = 0;
  while (in >> key) {
    if (key == "AnonHugePages:") {
      in >> value;
      return value;
    }
    in.ignore(1 << 20, '\n');
  }
  return -1;
}

TEST(Heap, HugePagesForTheFirstPartOfTheHeapOnly) {
  setUpHeap();
  const std::string mode = firstLine("/sys/kernel/mm/transparent_hugepage/enabled");
  if (mode.empty() || mode.find("[never]") != std::string::npos || std::getenv("HPCPROF_NO_HUGEPAGES"))
    GTEST_SKIP() << "no transparent huge pages here";
  const long before = anonHugeKiB();
  ASSERT_GE(before, 0) << "no AnonHugePages in /proc/self/smaps_rollup";
  // 192 MiB in pieces under malloc's mmap threshold (32 MiB): all in the heap, all touched.
  std::vector<std::unique_ptr<char[]>> pieces;
  for (int i = 0; i < 12; ++i) {
    pieces.emplace_back(new char[16 << 20]);
    std::memset(pieces.back().get(), i + 1, 16 << 20);
  }
  const long huge = anonHugeKiB() - before;
  EXPECT_GT(huge, 0) << "the heap's first part is on huge pages";
  EXPECT_LE(huge, long(kHugeHeapBytes >> 10) + 4096) << "beyond its first part the heap has 4 KiB pages";
  for (const auto& p : pieces) EXPECT_EQ(p[(16 << 20) - 1], p[0]);
}

// The malloc arenas malloc_info() lists (its <heap nr="..."> elements).
int arenas() {
  char* text = nullptr;
  size_t size = 0;
  std::FILE* f = open_memstream(&text, &size);
  if (!f) return -1;
  malloc_info(0, f);
  std::fclose(f);
  int n = 0;
  for (const char* at = text; (at = std::strstr(at, "<heap nr=")) != nullptr; ++at) ++n;
  std::free(text);
  return n;
}

// With the thread count known, each analysis thread allocates from an arena of its own: one
// arena's lock is held across fresh huge-page faults (setHeapThreads).
TEST(Heap, AnArenaForEachThread) {
  setUpHeap();
  setHeapThreads(3);
  // Two threads besides this one, alive together (a thread's arena is reused by the next
  // one once it ends).
  std::vector<std::thread> threads;
  std::vector<void*> blocks(2, nullptr);
  std::latch allocated(2), counted(1);
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&, t] {
      blocks[size_t(t)] = std::malloc(1000);
      std::memset(blocks[size_t(t)], t, 1000);
      allocated.count_down();
      counted.wait();
    });
  allocated.wait();
  const int n = arenas();
  counted.count_down();
  for (auto& t : threads) t.join();
  for (void* b : blocks) std::free(b);
  EXPECT_GE(n, 3) << "three threads, three arenas";
}

}  // namespace
}  // namespace hpc::analysis
