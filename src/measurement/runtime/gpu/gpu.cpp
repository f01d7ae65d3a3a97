// GPU measurement configuration and its hooks into the runtime's life cycle.
#include "measurement/runtime/gpu/gpu.hpp"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "measurement/runtime/gpu/metrics.hpp"
#include "measurement/runtime/gpu/streams.hpp"
#include "measurement/runtime/gpu/thread_gpu.hpp"
#include "measurement/runtime/gpu/worker.hpp"
#include "measurement/runtime/process.hpp"
#include "measurement/runtime/sys.hpp"

namespace hpc::rt::gpu {

namespace {
Backend gBackend = Backend::None;
}  // namespace

void configure() {
  const char* g = getenv("HPCRUN_GPU");
  if (g && strEq(g, "opencl")) gBackend = Backend::OpenCL;
  else if (g && *g) complain("unknown GPU backend in HPCRUN_GPU: GPU measurement off");
  const char* n = getenv("HPCRUN_GPU_STREAMS_PER_TRACER");
  uint32_t v = 0;
  for (const char* p = n; p && *p >= '0' && *p <= '9'; ++p) v = v * 10 + uint32_t(*p - '0');
  setStreamsPerTracer(v ? v : 256);
}

Backend backend() { return gBackend; }

unsigned metricCount() { return gConfig.nEvents + (enabled() ? kMetricCount : 0); }

void onSample(ThreadState& ts) {
  if (ts.gpu && !ts.gpu->inbox.idle()) drain(ts, true);
}

void processFinalize(ThreadState* self) {
  if (!enabled()) return;
  // The finalizing thread's own operations first (the GPU runtime may already have shut
  // down at exit(): a short bound, and no runtime calls), then the monitor and tracers.
  if (self) threadFinishWith(*self, 500000000ull, false);
  stopMonitor();
  stopTracers();
  if (self) threadFinishWith(*self, 0, false);
}

void childAfterFork() { gBackend = Backend::None; }

void summary(char* buf, unsigned long cap) {
  Text t(buf, cap);
  if (!enabled()) return;
  uint64_t launched = 0, returned = 0, allocated = 0;
  for (ThreadState* ts = registryHead(); ts; ts = ts->next)
    if (ts->gpu) launched += ts->gpu->launched, returned += ts->gpu->returned, allocated += ts->gpu->allocated;
  t.str("GPU: operations: ").dec(launched).str(" (attributed: ").dec(returned).str("), streams: ").dec(streamCount());
  t.str(", tracing threads: ").dec(tracerCount()).str(", records allocated: ").dec(allocated).ch('\n');
}

bool ignoreThreadStart(const void* fn) {
  if (!enabled() || !fn) return false;
  Dl_info info;
  if (!dladdr(fn, &info) || !info.dli_fname) return false;
  static const char* const kIgnored[] = {"libOpenCL.so", "libpocl", "/pocl/", "libcuda.so", "libcupti",
                                         "libamdhip64", "libhsa-runtime", "libze_", "libigdrcl"};
  for (const char* m : kIgnored)
    for (const char* p = info.dli_fname; *p; ++p)
      if (strStartsWith(p, m)) return true;
  return false;
}

bool startWorker(void* (*fn)(void*), void* arg) {
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int rc = realPthreadCreate(&t, &attr, fn, arg);
  pthread_attr_destroy(&attr);
  return rc == 0;
}

void blockAllSignals() {
  sigset_t all;
  sigfillset(&all);
  // The raw call: the interposed masks are filtered to keep the sampling signal.
  syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, nullptr, _NSIG / 8);
}

void idlePause(unsigned idleRounds) {
  long ns = 500000l << (idleRounds < 4 ? idleRounds : 4);
  timespec t{0, ns < 5000000 ? ns : 5000000};
  nanosleep(&t, nullptr);
}

bool waitFlag(const std::atomic<bool>& flag, uint64_t timeoutNs) {
  uint64_t deadline = monotonicNs() + timeoutNs;
  while (!flag.load(std::memory_order_acquire)) {
    if (monotonicNs() > deadline) return false;
    timespec t{0, 200000};
    nanosleep(&t, nullptr);
  }
  return true;
}

}  // namespace hpc::rt::gpu
