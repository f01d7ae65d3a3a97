// Process and thread life cycle of the runtime: start-up in two steps (the constructor sets
// up the core; sampling starts when main is called), thread begin/end, fork children, and
// one idempotent finalization reached from every exit path.
#pragma once

#include <pthread.h>

#include "state.hpp"

namespace hpc::rt {

void processInit();                       // library constructor
void processStartMain(uintptr_t appMain);  // from the main trampoline, before main runs
ThreadState* threadBegin(uintptr_t startRoutine);  // on a new thread, before its start routine
void threadEnd(ThreadState* ts);          // on the thread, after its start routine / at pthread_exit
void processFinalize(const char* reason); // MT: thread-safe, idempotent, async-signal-safe
void processChildAfterFork();             // in a fork child: fresh measurement, new files
void processResumeAfterFailedExec(int err);  // exec returned: this thread measured again, new files
void processMainReturned();               // main returned: its GPU operations are collected
// pthread_create itself (not the interposed one): the runtime's own threads are not measured.
int realPthreadCreate(pthread_t* t, const pthread_attr_t* attr, void* (*start)(void*), void* arg);

// RAII: blocks samples on this thread while runtime or loader code runs.
class SuspendSampling {
public:
  SuspendSampling() : ts_(currentThread()) { if (ts_) ++ts_->suspend; }
  ~SuspendSampling() { if (ts_) --ts_->suspend; }
  SuspendSampling(const SuspendSampling&) = delete;
  SuspendSampling& operator=(const SuspendSampling&) = delete;

private:
  ThreadState* ts_;
};

}  // namespace hpc::rt
