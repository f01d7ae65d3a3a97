// Signal virtualization. The sampling signal always stays ours: the application may install
// a handler for it or block it, and neither reaches the kernel. For fatal signals we keep our
// own handler installed and run the application's (as it believes it installed it) or, when
// it has none, write the measurement and die the default way. SIGIO is kept too: a perf
// event's overflow signal that finds the real-time queue full comes as a plain SIGIO, which
// would end the process by default (counted, and dropped). Every other signal, SIGPROF and
// SIGALRM included, passes straight through.
#pragma once

#include <signal.h>

#include <cstdint>

namespace hpc::rt {

void signalsInit();
int realSigaction(int sig, const struct sigaction* act, struct sigaction* old);
int virtualSigaction(int sig, const struct sigaction* act, struct sigaction* old);
// Removes the sampling signal from a mask the application wants to apply.
const sigset_t* filterMask(int how, const sigset_t* set, sigset_t* scratch);
// Inside our sample handler every maskable signal is already blocked and libunwind's
// block-then-restore pairs around each step would cost two syscalls a frame: they become
// no-ops. Returns true when the call was handled that way.
bool maskCallInHandler(sigset_t* old);
// Overflow signals that came as SIGIO (queue full) and were dropped.
uint64_t signalsOverflowSigio();

}  // namespace hpc::rt
