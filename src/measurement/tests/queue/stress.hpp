// The queue stress run shared by the unit test and the ThreadSanitizer executable:
// P producers hand numbered records to one consumer through its MpscQueue; the consumer
// returns each record to its producer through that producer's own MpscQueue (the n + m
// queue pattern of seed 000 §4.2), so a small pool per producer carries any number of
// records. The consumer checks that every record arrives exactly once and in its
// producer's order; at the end every producer has all of its pool back.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "measurement/runtime/gpu/mpsc_queue.hpp"

namespace hpc::rt::gpu::test {

struct Record {
  MpscLink link;  // first member: a Record* is its MpscLink*
  uint32_t producer = 0;
  uint64_t seq = 0;
};

struct StressResult {
  uint64_t received = 0;
  uint64_t outOfOrder = 0;   // a producer's records overtaking each other, or duplicates
  uint64_t missing = 0;      // records sent but never received
  uint64_t poolsIncomplete = 0;
  uint64_t emptyWhileBusy = 0;  // dequeue returned nothing while records were in flight
};

inline StressResult runStress(unsigned producers, uint64_t total, unsigned poolSize = 256) {
  MpscQueue toConsumer;
  std::vector<MpscQueue> back(producers);
  std::vector<std::unique_ptr<Record[]>> pools;
  for (unsigned p = 0; p < producers; ++p) pools.emplace_back(new Record[poolSize]);
  const uint64_t perProducer = total / producers;
  std::vector<std::thread> threads;
  for (unsigned p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      std::vector<Record*> free;
      for (unsigned k = 0; k < poolSize; ++k) free.push_back(&pools[p][k]);
      for (uint64_t i = 0; i < perProducer; ++i) {
        while (free.empty()) {
          if (MpscLink* l = back[p].dequeue())
            free.push_back(reinterpret_cast<Record*>(l));
          else
            std::this_thread::yield();
        }
        Record* r = free.back();
        free.pop_back();
        r->producer = p;
        r->seq = i;
        toConsumer.enqueue(&r->link);
      }
      // Collect the whole pool back: every record must be returned.
      while (free.size() < poolSize || !back[p].idle()) {
        if (MpscLink* l = back[p].dequeue())
          free.push_back(reinterpret_cast<Record*>(l));
        else
          std::this_thread::yield();
      }
    });
  }
  StressResult res;
  std::vector<uint64_t> next(producers, 0);
  const uint64_t expected = perProducer * producers;
  while (res.received < expected) {
    MpscLink* l = toConsumer.dequeue();
    if (!l) {
      ++res.emptyWhileBusy;
      std::this_thread::yield();
      continue;
    }
    auto* r = reinterpret_cast<Record*>(l);
    if (r->producer >= producers || r->seq != next[r->producer]) ++res.outOfOrder;
    if (r->producer < producers) next[r->producer] = r->seq + 1;
    ++res.received;
    back[r->producer < producers ? r->producer : 0].enqueue(&r->link);
  }
  for (auto& t : threads) t.join();
  for (unsigned p = 0; p < producers; ++p) res.missing += perProducer - next[p];
  if (toConsumer.dequeue() != nullptr || !toConsumer.idle()) ++res.outOfOrder;  // extra record
  return res;
}

}  // namespace hpc::rt::gpu::test
