// Cost of the GPU measurement's MPSC queue per record, at 1, 2, 4 and 8 producers and one
// consumer, against a mutex-protected std::deque measured in the same run. Prints a table:
// wall ns per record (all producers' records through the one consumer) and each side's
// CPU ns per operation. Usage: mpsc_queue_bench [records-per-run]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <time.h>

#include "measurement/runtime/gpu/mpsc_queue.hpp"

namespace {

using hpc::rt::gpu::MpscLink;
using hpc::rt::gpu::MpscQueue;

struct Rec {
  MpscLink link;
  uint64_t payload[3];  // about the size of an activity record's header
};

double threadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

struct Figures {
  double wallNsPerRecord, producerCpuNsPerEnqueue, consumerCpuNsPerDequeue;
};

// Producers take records from a private pre-built array (no allocation measured).
Figures runMpsc(unsigned producers, uint64_t total) {
  MpscQueue q;
  uint64_t per = total / producers;
  std::vector<std::unique_ptr<Rec[]>> recs;
  for (unsigned p = 0; p < producers; ++p) recs.emplace_back(new Rec[per]());
  std::vector<double> cpu(producers);
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> ts;
  for (unsigned p = 0; p < producers; ++p)
    ts.emplace_back([&, p] {
      double c0 = threadCpuNs();
      for (uint64_t k = 0; k < per; ++k) q.enqueue(&recs[p][k].link);
      cpu[p] = threadCpuNs() - c0;
    });
  double c0 = threadCpuNs();
  uint64_t got = 0, sum = 0;
  while (got < per * producers)
    if (MpscLink* l = q.dequeue()) {
      ++got;
      sum += reinterpret_cast<Rec*>(l)->payload[0];
    }
  double consumerCpu = threadCpuNs() - c0;
  for (auto& t : ts) t.join();
  double wall = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  double pc = 0;
  for (double c : cpu) pc += c;
  if (sum == 1) std::puts("");  // keep the reads
  return {wall / got, pc / got, consumerCpu / got};
}

Figures runMutex(unsigned producers, uint64_t total) {
  std::mutex m;
  std::deque<Rec*> q;
  uint64_t per = total / producers;
  std::vector<std::unique_ptr<Rec[]>> recs;
  for (unsigned p = 0; p < producers; ++p) recs.emplace_back(new Rec[per]());
  std::vector<double> cpu(producers);
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> ts;
  for (unsigned p = 0; p < producers; ++p)
    ts.emplace_back([&, p] {
      double c0 = threadCpuNs();
      for (uint64_t k = 0; k < per; ++k) {
        std::lock_guard<std::mutex> g(m);
        q.push_back(&recs[p][k]);
      }
      cpu[p] = threadCpuNs() - c0;
    });
  double c0 = threadCpuNs();
  uint64_t got = 0, sum = 0;
  while (got < per * producers) {
    Rec* r = nullptr;
    {
      std::lock_guard<std::mutex> g(m);
      if (!q.empty()) {
        r = q.front();
        q.pop_front();
      }
    }
    if (r) {
      ++got;
      sum += r->payload[0];
    }
  }
  double consumerCpu = threadCpuNs() - c0;
  for (auto& t : ts) t.join();
  double wall = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  double pc = 0;
  for (double c : cpu) pc += c;
  if (sum == 1) std::puts("");
  return {wall / got, pc / got, consumerCpu / got};
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t total = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 4000000;
  std::printf("MPSC queue vs mutex+deque, %llu records per run, %u hardware threads\n",
              (unsigned long long)total, std::thread::hardware_concurrency());
  std::printf("%-9s | %-36s | %-36s | %s\n", "producers", "mpsc: wall ns/rec, enq cpu, deq cpu",
              "mutex: wall ns/rec, enq cpu, deq cpu", "wall ratio mutex/mpsc");
  for (unsigned p : {1u, 2u, 4u, 8u}) {
    Figures a = runMpsc(p, total), b = runMutex(p, total);
    std::printf("%-9u | %10.1f %10.1f %10.1f       | %10.1f %10.1f %10.1f       | %.2f\n", p,
                a.wallNsPerRecord, a.producerCpuNsPerEnqueue, a.consumerCpuNsPerDequeue,
                b.wallNsPerRecord, b.producerCpuNsPerEnqueue, b.consumerCpuNsPerDequeue,
                b.wallNsPerRecord / a.wallNsPerRecord);
  }
}
