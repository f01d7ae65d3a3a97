// The runtime's own threads (GPU monitor and tracing threads): created with the real
// pthread_create, so they are never measured, and deaf to every signal the application
// could direct at the process.
#pragma once

#include <atomic>
#include <cstdint>

namespace hpc::rt::gpu {

bool startWorker(void* (*fn)(void*), void* arg);
void blockAllSignals();             // on the worker itself
void idlePause();                   // a short sleep when a worker's queue is empty
// Waits until flag is set or timeoutNs passes; async-signal-safe. False on timeout.
bool waitFlag(const std::atomic<bool>& flag, uint64_t timeoutNs);
bool monitorRunning();

}  // namespace hpc::rt::gpu
