// The GPU measurement's multi-producer, single-consumer queue (seed 000 §4.3): unbounded,
// intrusive, constant-time enqueue (one atomic exchange on the tail) and constant-time
// dequeue that returns "nothing" instead of waiting for an enqueue that has swapped the
// tail but not yet linked its element. Not linearizable; every element is still delivered
// eventually, which is all the measurement needs: a consumer that must see everything (a
// finishing thread) calls dequeue until idle() says no enqueue is queued or in flight.
//
// Records embed an MpscLink as their first member and are owned by whoever dequeued them.
// Header-only and allocation-free: usable inside the measured process, in signal handlers.
#pragma once

#include <atomic>

namespace hpc::rt::gpu {

struct MpscLink {
  std::atomic<MpscLink*> next{nullptr};
};

class MpscQueue {
public:
  MpscQueue() = default;
  MpscQueue(const MpscQueue&) = delete;
  MpscQueue& operator=(const MpscQueue&) = delete;

  // MT: thread-safe, any number of concurrent producers; wait-free.
  void enqueue(MpscLink* e) noexcept { enqueueLink(enqueueSwap(e), e); }

  // The two halves of enqueue, public so tests can stop a producer between them (the
  // "enqueue in flight" state that dequeue must not wait for). Use enqueue() otherwise.
  MpscLink* enqueueSwap(MpscLink* e) noexcept {
    e->next.store(nullptr, std::memory_order_relaxed);
    return tail_.exchange(e, std::memory_order_acq_rel);
  }
  void enqueueLink(MpscLink* prev, MpscLink* e) noexcept {
    if (prev == nullptr)
      head_.store(e, std::memory_order_release);       // the queue was empty: e is the head
    else
      prev->next.store(e, std::memory_order_release);  // link behind the previous tail
  }

  // MT: one consumer at a time. Returns the oldest linked element, or nullptr when the
  // queue is empty or its head's successor is being linked by an unfinished enqueue.
  MpscLink* dequeue() noexcept {
    MpscLink* first = head_.load(std::memory_order_acquire);
    if (first == nullptr) return nullptr;
    MpscLink* succ = first->next.load(std::memory_order_acquire);
    if (succ != nullptr) {
      head_.store(succ, std::memory_order_relaxed);
      return first;
    }
    // first looks like the last element: try to take it off the tail.
    MpscLink* expected = first;
    if (tail_.compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
      // Removed. Empty the head too, unless an enqueue that saw the empty tail has
      // already installed its element there.
      MpscLink* h = first;
      head_.compare_exchange_strong(h, nullptr, std::memory_order_acq_rel,
                                   std::memory_order_relaxed);
      return first;
    }
    // The tail moved on: an enqueue is between its exchange and its link. Don't wait.
    return nullptr;
  }

  // MT: any thread; a hint. True when no element is queued and no enqueue is in flight
  // (tail empty). A consumer draining before it exits loops dequeue() until this holds.
  bool idle() const noexcept { return tail_.load(std::memory_order_acquire) == nullptr; }

private:
  alignas(64) std::atomic<MpscLink*> head_{nullptr};
  alignas(64) std::atomic<MpscLink*> tail_{nullptr};
};

}  // namespace hpc::rt::gpu
