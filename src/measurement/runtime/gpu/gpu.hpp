// GPU measurement, vendor-neutral part (seed 000 §4.2): what the rest of the runtime calls.
//
// An application thread that launches a GPU operation unwinds at the launch, inserts a
// placeholder ("GPUKernl", "GPUCopy ", ...) under that calling context and hands an
// Activity record to the backend, which passes it to the GPU runtime's completion
// callback. The callback (any thread) enqueues it on the monitor thread's MPSC queue; the
// monitor routes it to the tracing thread of its stream (with -t), which appends the
// operation to the stream's trace and forwards it to the launching thread's own queue. That
// thread attributes the metrics to the placeholder when it next samples, calls the GPU API
// or exits, and recycles the record: every record returns to the thread that made it.
#pragma once

#include <cstdint>

#include "measurement/runtime/state.hpp"

namespace hpc::rt::gpu {

enum class Backend : uint8_t { None, OpenCL };

// Reads HPCRUN_GPU and HPCRUN_GPU_STREAMS_PER_TRACER; from the constructor's parseConfig.
void configure();
Backend backend();
inline bool enabled() { return backend() != Backend::None; }
// The profile's metric table: the CPU sources' gConfig.nEvents metrics, then these.
unsigned metricCount();

// Life-cycle hooks.
void onSample(ThreadState& ts);          // in the sample handler (not suspended): attribute
void threadFinish(ThreadState& ts);      // on the thread, before its profile is written
void processFinalize(ThreadState* self); // stop monitor and tracers, write stream files
void childAfterFork();                   // GPU measurement off in a fork child
// True when a thread's start routine lies in a GPU runtime (the ICD loader, PoCL, ...):
// such threads are not measured.
bool ignoreThreadStart(const void* startRoutine);
// The log's GPU line: operations launched and attributed over all threads, streams and
// tracing threads. Empty when GPU measurement is off.
void summary(char* buf, unsigned long cap);

}  // namespace hpc::rt::gpu
