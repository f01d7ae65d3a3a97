// The sampling signal handler: unwind, insert into the thread's CCT, add the metric,
// append to the trace. Drops (counts as blocked) rather than waits.
#pragma once

#include <signal.h>

namespace hpc::rt {

void onSampleSignal(int sig, siginfo_t* si, void* uc);
// Called by the fault handler: if a fault hit this thread's unwinder, resume the sample as
// a failed unwind (does not return in that case).
void recoverFromUnwindFault(void* faultContext);

}  // namespace hpc::rt
