// GPU streams (OpenCL command queues) and the tracing threads that write their traces.
// Each stream gets a trace and a profile with thread index 500 + its id and the id tuple
// NODE / GPUDEVICE / GPUCONTEXT / GPUSTREAM, as the reference writes them: a CCT of
// ^Primary -> NoActvty and | Main (or | Thread) -> launch path -> "GPUTrace", and trace
// records alternating between the GPUTrace node (operation interval) and NoActvty (idle).
// A tracing thread serves up to --streams-per-tracing-thread streams, fed through its own
// MPSC queue; records out of time order set the profile's trace-disorder flag.
#pragma once

#include <cstdint>

#include "measurement/runtime/gpu/activity.hpp"

namespace hpc::rt::gpu {

constexpr uint32_t kFirstStreamThreadIndex = 500;

// MT: thread-safe. Registers (or re-registers: handles are reused after release) the
// stream behind a runtime handle; context and device are handles too, numbered in order.
Stream* streamCreate(void* handle, void* context, void* device, bool appProfiling);
// MT: thread-safe, lock-free. The stream of a handle, registered on first sight if unknown.
Stream* streamOf(void* handle);
bool streamAppProfiling(const Stream* s);

void setStreamsPerTracer(uint32_t n);
// Called by the monitor: to the stream's tracing thread, or straight to the owner without -t.
void traceOrDeliver(Activity* a);
void stopTracers();
uint32_t streamCount();
uint32_t tracerCount();   // drains every tracer, writes the stream profiles and traces

}  // namespace hpc::rt::gpu
