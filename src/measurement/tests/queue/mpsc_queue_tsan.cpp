// The queue's stress run built with ThreadSanitizer: 8 producers, 1 consumer, 10^7 records
// (argv[1] overrides the count). Exit status 0 only when every record arrived exactly once
// in its producer's order and every producer got its whole pool back; TSan itself exits
// non-zero on any data race (TSAN_OPTIONS set by the CTest registration).
#include <cstdio>
#include <cstdlib>

#include "measurement/tests/queue/stress.hpp"

int main(int argc, char** argv) {
  unsigned long long total = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 10000000ULL;
  auto r = hpc::rt::gpu::test::runStress(8, total);
  std::printf("mpsc stress: 8 producers, 1 consumer: received %llu of %llu, out of order %llu, "
              "missing %llu, empty dequeues while busy %llu\n",
              (unsigned long long)r.received, total, (unsigned long long)r.outOfOrder,
              (unsigned long long)r.missing, (unsigned long long)r.emptyWhileBusy);
  return r.received == total && r.outOfOrder == 0 && r.missing == 0 ? 0 : 1;
}
