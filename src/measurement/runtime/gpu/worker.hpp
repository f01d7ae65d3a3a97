// The runtime's own threads (GPU monitor and tracing threads): created with the real
// pthread_create, so they are never measured, and deaf to every signal the application
// could direct at the process.
#pragma once

#include <atomic>
#include <cstdint>

namespace hpc::rt::gpu {

bool startWorker(void* (*fn)(void*), void* arg);
void blockAllSignals();             // on the worker itself
// A sleep when a worker's queue is empty, longer the longer it stays empty (idleRounds
// consecutive empty rounds): 0.5 ms doubling up to 5 ms, so an idle process pays ~200
// wake-ups a second per worker. Shorter sleeps cost the application more than they save on
// a small machine (PoCL's workers, the app and ours share the cores).
void idlePause(unsigned idleRounds);
// Waits until flag is set or timeoutNs passes; async-signal-safe. False on timeout.
bool waitFlag(const std::atomic<bool>& flag, uint64_t timeoutNs);
bool monitorRunning();

}  // namespace hpc::rt::gpu
