// The record of one GPU operation, from its launch to its attribution. Allocated and
// recycled by the launching thread; in between owned by exactly one thread at a time
// (GPU runtime callback -> monitor -> tracer -> launching thread), passed through MPSC queues.
#pragma once

#include <atomic>
#include <cstdint>

#include "measurement/runtime/cct.hpp"
#include "measurement/runtime/gpu/mpsc_queue.hpp"
#include "measurement/runtime/state.hpp"

namespace hpc::rt::gpu {

struct Stream;

enum class OpKind : uint8_t { Kernel, Copy, Memset };

// Placeholder tags of the reference (load module 0, the 8 ASCII bytes as the ip).
inline constexpr uint64_t kTagKernel = placeholder("GPUKernl");
inline constexpr uint64_t kTagCopy = placeholder("GPUCopy ");
inline constexpr uint64_t kTagMemset = placeholder("GPUMset ");
inline constexpr uint64_t kTagSync = placeholder("GPUSync ");
inline constexpr uint64_t kTagAlloc = placeholder("GPUAlloc");
inline constexpr uint64_t kTagTrace = placeholder("GPUTrace");
inline constexpr uint64_t kTagNoActivity = placeholder("NoActvty");

struct Activity {
  MpscLink link;            // first member: the queues link records through it
  Activity* nextFree;       // the owner's free list / pending-release list
  ThreadState* owner;       // the launching thread
  CctNode* placeholder;     // in the owner's CCT; its parent is the launch context
  Stream* stream;
  uint64_t correlation;     // owner's thread index << 32 | per-thread sequence number
  OpKind kind;
  uint8_t bytesMetric;      // GPU metric index for bytes (copies, memsets)
  bool timed;               // start/end valid
  bool releaseEvent;        // the record holds a reference on event
  uint64_t bytes;
  void* event;              // the backend's completion handle
  uint64_t hostEnqueueNs;   // CLOCK_REALTIME just before the launch
  uint64_t queued, start, end;  // GPU runtime's clock, ns
  // Kernels: launch parameters, summed into the GKER:*_ACUMU accumulators (the viewer divides
  // them by GKER:COUNT). Valid when hasLaunch.
  bool hasLaunch;
  uint64_t blocks, blockThreads;            // work-groups; work-items per work-group
  uint64_t staticMem, dynamicMem, localMem; // bytes: per work-group static / dynamic local; per work-item private
};

inline Activity* fromLink(MpscLink* l) { return reinterpret_cast<Activity*>(l); }

// The launching thread's side (correlation.cpp). The caller holds SuspendSampling.
// Unwinds the caller of the GPU API and returns a new record whose placeholder (tag) sits
// under that context; nullptr when out of memory.
Activity* beginOperation(ThreadState& ts, OpKind kind, uint64_t tag, Stream* stream);
void abandonOperation(ThreadState& ts, Activity* a);   // the launch failed: recycle
void launched(ThreadState& ts, Activity* a);           // counted as in flight
// Attributes a host-side measurement (sync time, allocation bytes) at the caller's context.
void attributeHere(ThreadState& ts, uint64_t tag, const uint8_t* metrics, const double* values, unsigned n);
// Attributes and recycles the records that came back. inSignal: no GPU runtime calls.
void drain(ThreadState& ts, bool inSignal);

// The monitor thread (monitor.cpp). completed() is called by the GPU runtime's callback.
void completed(Activity* a);
bool startMonitor();
void stopMonitor();              // drains: every record already completed is routed
void deliver(Activity* a);       // to the owner's queue

// Set by the backend: releases the reference a record holds on its event.
using ReleaseFn = void (*)(void* event);
extern std::atomic<ReleaseFn> gReleaseEvent;

}  // namespace hpc::rt::gpu
