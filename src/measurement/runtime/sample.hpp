// The sampling signal handler: unwind, insert into the thread's CCT, add the metric,
// append to the trace. Drops (counts as blocked) rather than waits.
#pragma once

#include <signal.h>

#include "state.hpp"

namespace hpc::rt {

// The calling context of the wrapped call the runtime is in (a GPU launch, an I/O call):
// unwound from here, the runtime's own frames dropped, a Python thread's Python frames in
// place of the interpreter's, inserted under the thread's fence (or the partial root). The
// caller has sampling suspended (SuspendSampling).
CctNode* contextHere(ThreadState& ts);

void onSampleSignal(int sig, siginfo_t* si, void* uc);
// Called by the fault handler: if a fault hit this thread's unwinder, resume the sample as
// a failed unwind (does not return in that case).
void recoverFromUnwindFault(void* faultContext);

}  // namespace hpc::rt
