// Unit tests of the GPU measurement's MPSC queue (src/measurement/runtime/gpu/mpsc_queue.hpp).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "measurement/tests/queue/stress.hpp"

namespace hpc::rt::gpu {
namespace {

struct Item {
  MpscLink link;
  int value;
};
Item* item(MpscLink* l) { return reinterpret_cast<Item*>(l); }

TEST(MpscQueue, EmptyQueueDequeuesNothingAndIsIdle) {
  MpscQueue q;
  EXPECT_EQ(q.dequeue(), nullptr);
  EXPECT_TRUE(q.idle());
}

TEST(MpscQueue, SingleProducerIsFifoAndReturnsToEmpty) {
  MpscQueue q;
  Item items[5];
  for (int i = 0; i < 5; ++i) {
    items[i].value = i;
    q.enqueue(&items[i].link);
  }
  EXPECT_FALSE(q.idle());
  for (int i = 0; i < 5; ++i) {
    MpscLink* l = q.dequeue();
    ASSERT_NE(l, nullptr);
    EXPECT_EQ(item(l)->value, i);
  }
  EXPECT_EQ(q.dequeue(), nullptr);
  EXPECT_TRUE(q.idle());
  // Reusable after draining: a singleton goes in and out again.
  q.enqueue(&items[2].link);
  EXPECT_EQ(q.dequeue(), &items[2].link);
  EXPECT_TRUE(q.idle());
}

// A producer stopped between swapping the tail and linking its element: dequeue must
// return at once with nothing (not wait), idle() must report the enqueue in flight, and
// once the link lands both elements come out in order.
TEST(MpscQueue, DequeueReturnsEmptyWhileAnEnqueueIsHalfDone) {
  MpscQueue q;
  Item a{{}, 1}, b{{}, 2};
  q.enqueue(&a.link);
  MpscLink* prev = q.enqueueSwap(&b.link);  // half of enqueue(b)
  EXPECT_EQ(prev, &a.link);
  EXPECT_EQ(q.dequeue(), nullptr);   // a is the head but its successor is not linked yet
  EXPECT_EQ(q.dequeue(), nullptr);   // still nothing, still no waiting
  EXPECT_FALSE(q.idle());
  q.enqueueLink(prev, &b.link);      // the producer finishes
  EXPECT_EQ(q.dequeue(), &a.link);
  EXPECT_EQ(q.dequeue(), &b.link);
  EXPECT_EQ(q.dequeue(), nullptr);
  EXPECT_TRUE(q.idle());
}

TEST(MpscQueue, HalfDoneEnqueueIntoAnEmptyQueue) {
  MpscQueue q;
  Item a{{}, 1};
  MpscLink* prev = q.enqueueSwap(&a.link);
  EXPECT_EQ(prev, nullptr);
  EXPECT_EQ(q.dequeue(), nullptr);  // the head is not installed yet
  EXPECT_FALSE(q.idle());           // but a drain knows something is coming
  q.enqueueLink(prev, &a.link);
  EXPECT_EQ(q.dequeue(), &a.link);
  EXPECT_TRUE(q.idle());
}

// The consumer removed the last element while a producer was between its swap and its
// head store: the producer's element must not be lost.
TEST(MpscQueue, RemovingTheLastElementRacesWithAnEnqueueIntoEmpty) {
  MpscQueue q;
  Item a{{}, 1}, b{{}, 2};
  q.enqueue(&a.link);
  EXPECT_EQ(q.dequeue(), &a.link);  // takes a off tail and head
  MpscLink* prev = q.enqueueSwap(&b.link);
  EXPECT_EQ(prev, nullptr);
  EXPECT_EQ(q.dequeue(), nullptr);
  q.enqueueLink(prev, &b.link);
  EXPECT_EQ(q.dequeue(), &b.link);
  EXPECT_TRUE(q.idle());
}

// A drain (what a finishing application thread does) collects every record even while
// producers are still running: loop dequeue until the producers are done and idle().
TEST(MpscQueue, DrainUntilIdleDeliversEverything) {
  MpscQueue q;
  constexpr int kPer = 20000;
  std::vector<Item> items(2 * kPer);
  std::atomic<int> done{0};
  std::thread p1([&] {
    for (int i = 0; i < kPer; ++i) q.enqueue(&items[i].link);
    done.fetch_add(1);
  });
  std::thread p2([&] {
    for (int i = kPer; i < 2 * kPer; ++i) q.enqueue(&items[i].link);
    done.fetch_add(1);
  });
  int got = 0;
  while (done.load() < 2 || !q.idle()) {
    if (q.dequeue()) ++got;
  }
  p1.join();
  p2.join();
  EXPECT_EQ(got, 2 * kPer);
}

TEST(MpscQueue, StressFourProducersNoLossNoDuplicate) {
  auto r = test::runStress(4, 400000);
  EXPECT_EQ(r.received, 400000u);
  EXPECT_EQ(r.outOfOrder, 0u);
  EXPECT_EQ(r.missing, 0u);
}

}  // namespace
}  // namespace hpc::rt::gpu
