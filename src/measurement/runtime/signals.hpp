// Signal virtualization. The sampling signal always stays ours: the application may install
// a handler for it or block it, and neither reaches the kernel. For the signals whose default
// action ends the process (but SIGPROF) we keep our own handler installed and run the
// application's (as it believes it installed it, with its SA_RESTART and SA_ONSTACK) or,
// when it has none, write the measurement and die the default way. A perf event's overflow
// signal that finds the real-time queue full comes as a plain SIGIO, which would end the
// process by default (counted, and dropped). Every other signal, SIGPROF included, passes
// straight through.
#pragma once

#include <signal.h>

#include <cstdint>

namespace hpc::rt {

struct ThreadState;

void signalsInit();
int realSigaction(int sig, const struct sigaction* act, struct sigaction* old);
int virtualSigaction(int sig, const struct sigaction* act, struct sigaction* old);
// Removes the sampling signal from a mask the application wants to apply.
const sigset_t* filterMask(int how, const sigset_t* set, sigset_t* scratch);
// The set without the sampling signal (scratch, where it had it): for the sets of signals an
// application waits for or reads from a signalfd, which sigfillset fills with ours too.
const sigset_t* withoutSampleSignal(const sigset_t* set, sigset_t* scratch);
// Inside our sample handler every maskable signal is already blocked and libunwind's
// block-then-restore pairs around each step would cost two syscalls a frame: they become
// no-ops. Returns true when the call was handled that way.
bool maskCallInHandler(sigset_t* old);
// The sampling signal, when the application or another process sent it (kill, sigqueue,
// raise) rather than a source of ours: delivered as the application installed it (its
// handler, ignored, or the default action, which ends the process); so too, with appTimer,
// a signal of one of the application's POSIX timers. False: not sent so, and nothing done.
// Called from the sample handler, with its own guard released.
bool signalsForward(int sig, siginfo_t* si, void* uc, bool appTimer = false);
// Overflow signals that came as SIGIO (queue full) and were dropped.
uint64_t signalsOverflowSigio();

// The handlers' own stack. Our handlers run on the alternate signal stack (SA_ONSTACK): a
// thread without one gets one of its own from the runtime (64 KiB and a guard page), so
// that a sample taken where the thread's stack is nearly used up (a deep recursion, a
// small thread or fiber stack) does not overflow it: the handler needs some 6-12 KiB (a
// 64 KiB thread that left 9 KiB free was killed by the first sample). The application
// never sees that stack: sigaltstack reports none while it is ours, and a stack the
// application sets replaces it (ours is set again where it disables its own).
// Where the application sets a stack of its own, ours stays mapped: the runtime's work in a
// handler (a sample, the measurement written at a fatal signal or an exit from a handler)
// moves onto it when the application's has less than 48 KiB left. Rust's is 8 KiB and a
// page: at a stack overflow its handler calls abort() on it, and writing the measurement
// there overflowed it (SIGSEGV, exit status 139 for 134, no profile at all). While our code
// runs on ours, the kernel's alternate stack is disabled (a nested signal, the fault guard's,
// lands on ours, not over the frames left on the application's), and set again after.
void signalsOnRoomyStack(ThreadState* ts, void (*fn)(void*), void* arg);
void signalsStartThreadStack(ThreadState& ts);  // on the thread, before its sources start
void signalsEndThreadStack(ThreadState& ts);    // on the thread, after they stopped
int appSigaltstack(const stack_t* ss, stack_t* old);  // the application's sigaltstack()

}  // namespace hpc::rt
