// The monitor thread: GPU runtimes complete operations on threads of their own choosing
// (OpenCL names none); their callbacks only enqueue the record here. The monitor routes
// each record to its stream's tracing thread or straight back to the launching thread.
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>

#include "measurement/runtime/gpu/activity.hpp"
#include "measurement/runtime/gpu/streams.hpp"
#include "measurement/runtime/gpu/thread_gpu.hpp"
#include "measurement/runtime/gpu/worker.hpp"
#include "measurement/runtime/sys.hpp"

namespace hpc::rt::gpu {

namespace {

MpscQueue gMonitorQueue;
std::atomic<int> gState{0};  // 0 not started, 1 starting/running, 2 stop requested, 3 stopped
std::atomic<bool> gStopped{false};

void* monitorMain(void*) {
  blockAllSignals();
  for (unsigned idle = 0;;) {
    bool stopping = gState.load(std::memory_order_acquire) == 2;
    bool any = false;
    while (MpscLink* l = gMonitorQueue.dequeue()) {
      traceOrDeliver(fromLink(l));
      any = true;
    }
    if (stopping && gMonitorQueue.idle()) break;
    idle = any ? 0 : idle + 1;
    if (!any) idlePause(idle);
  }
  gStopped.store(true, std::memory_order_release);
  return nullptr;
}

}  // namespace

void completed(Activity* a) { gMonitorQueue.enqueue(&a->link); }

void deliver(Activity* a) { a->owner->gpu->inbox.enqueue(&a->link); }

bool startMonitor() {
  int expect = 0;
  if (!gState.compare_exchange_strong(expect, 1)) return expect == 1;
  if (!startWorker(monitorMain, nullptr)) {
    gState.store(3);
    complain("cannot start the GPU monitor thread: GPU measurement disabled");
    return false;
  }
  return true;
}

void stopMonitor() {
  int expect = 1;
  if (!gState.compare_exchange_strong(expect, 2)) return;
  waitFlag(gStopped, 2000000000ull);
  // Whatever a late callback enqueued after the monitor left is routed here.
  while (MpscLink* l = gMonitorQueue.dequeue()) traceOrDeliver(fromLink(l));
}

bool monitorRunning() { return gState.load(std::memory_order_acquire) == 1; }

}  // namespace hpc::rt::gpu
