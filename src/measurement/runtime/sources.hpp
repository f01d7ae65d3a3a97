// Sample sources: CPUTIME/REALTIME (per-thread POSIX timers) and perf:: events
// (perf_event_open), alone or as counter groups (a sampled leader whose members are read at
// each of its samples). All deliver gConfig.sampleSignal to the thread they measure; the
// handler tells them apart by si_code (SI_TIMER carries the event index) and si_fd.
#pragma once

#include <signal.h>

#include <cstdint>

#include "state.hpp"

namespace hpc::rt {

bool sourcesStartThread(ThreadState& ts);   // call on the measured thread itself
void sourcesStopThread(ThreadState& ts);    // MT: may be called from another thread
// Which event fired, and the metric value this sample stands for (seconds for timers,
// event counts for perf). Returns -1 when the signal is not ours (kAppTimer: one of the
// application's own POSIX timers). Async-signal-safe.
constexpr int kAppTimer = -2;
int sourcesIdentify(ThreadState& ts, const siginfo_t* si, double& value);
void sourcesRearm(ThreadState& ts, int event);
// Whether a timer id is one of the timers the runtime made lately (the last 256): a signal of
// one deleted since is ours, never the application's.
bool sourcesRecentTimer(int id);
// The members of event `leader`'s counter group (hpcrun -e LEADER,MEMBER...): each one's
// count since its last read into values[member] (the others' left alone); false where the
// leader has none. Async-signal-safe: a read of each member.
bool sourcesReadMembers(ThreadState& ts, int leader, double* values);

}  // namespace hpc::rt
