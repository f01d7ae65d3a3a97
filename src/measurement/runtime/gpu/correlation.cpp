// The launching thread's side of GPU measurement: the calling context of a launch, the
// placeholder under it, and the attribution of the records that come back.
#include <time.h>

#include <new>

#include "measurement/runtime/gpu/activity.hpp"
#include "measurement/runtime/gpu/gpu.hpp"
#include "measurement/runtime/gpu/metrics.hpp"
#include "measurement/runtime/gpu/thread_gpu.hpp"
#include "measurement/runtime/loadmap.hpp"
#include "measurement/runtime/output.hpp"
#include "measurement/runtime/sample.hpp"
#include "measurement/runtime/sys.hpp"

namespace hpc::rt::gpu {

std::atomic<ReleaseFn> gReleaseEvent{nullptr};

namespace {

ThreadGpu* threadGpu(ThreadState& ts) {
  if (ts.gpu) return ts.gpu;
  // The queue's members are 64-byte aligned; the arena gives 16.
  auto raw = reinterpret_cast<uintptr_t>(ts.arena.alloc(sizeof(ThreadGpu) + 64));
  if (!raw) return nullptr;
  auto* g = new (reinterpret_cast<void*>((raw + 63) & ~uintptr_t(63))) ThreadGpu();
  ts.gpu = g;
  return g;
}

double* slots(ThreadState& ts, CctNode* n) {
  if (!n->extra) n->extra = static_cast<double*>(ts.arena.alloc(kMetricCount * sizeof(double)));
  return n->extra;
}

void attribute(ThreadState& ts, const Activity& a) {
  double* m = slots(ts, a.placeholder);
  if (!m) return;
  double sec = a.timed && a.end > a.start ? double(a.end - a.start) * 1e-9 : 0;
  m[kGpuOp] += sec;
  switch (a.kind) {
    case OpKind::Kernel:
      m[kKernelTime] += sec;
      m[kKernelCount] += 1;
      if (a.hasLaunch) {
        m[kBlocksAcc] += double(a.blocks);
        m[kBlockThreadsAcc] += double(a.blockThreads);
        m[kStaticMemAcc] += double(a.staticMem);
        m[kDynamicMemAcc] += double(a.dynamicMem);
        m[kBlockSharedAcc] += double(a.staticMem + a.dynamicMem);
        m[kLocalMemAcc] += double(a.localMem);
      }
      break;
    case OpKind::Copy:
      m[kCopyTime] += sec;
      m[a.bytesMetric] += double(a.bytes);
      m[kCopyCount] += 1;
      break;
    case OpKind::Memset:
      m[kMemsetTime] += sec;
      m[a.bytesMetric] += double(a.bytes);
      m[kMemsetCount] += 1;
      break;
  }
  a.placeholder->hasValue = 1;
}

void recycle(ThreadGpu& g, Activity* a) {
  a->nextFree = g.free;
  g.free = a;
}

}  // namespace

Activity* beginOperation(ThreadState& ts, OpKind kind, uint64_t tag, Stream* stream) {
  ThreadGpu* g = threadGpu(ts);
  if (!g) return nullptr;
  drain(ts, false);
  CctNode* ctx = contextHere(ts);  // the wrapped GPU API call's
  CctNode* ph = ctx ? ts.cct.child(ctx, kPlaceholderModule, tag) : nullptr;
  if (!ph) return nullptr;
  // As the reference: with tracing, the launch context also holds a GPUTrace placeholder,
  // the node the stream traces' copies of this context end in.
  if (gConfig.trace) ts.cct.child(ctx, kPlaceholderModule, kTagTrace);
  // hpcrun -tt: the launch in the launching thread's own trace, at the operation's context
  // (samples are suspended here: the handler never appends meanwhile).
  if (gConfig.launchTrace && ts.traceBuf) traceAppend(ts, nowNs(), ph->id);
  Activity* a = g->free;
  if (a) g->free = a->nextFree;
  else if ((a = static_cast<Activity*>(ts.arena.alloc(sizeof(Activity))))) ++g->allocated;
  else return nullptr;
  a->nextFree = nullptr;
  a->timed = a->releaseEvent = a->hasLaunch = false;
  a->blocks = a->blockThreads = a->staticMem = a->dynamicMem = a->localMem = 0;
  a->bytes = a->queued = a->start = a->end = 0;
  a->bytesMetric = 0;
  a->event = nullptr;
  a->owner = &ts;
  a->placeholder = ph;
  a->stream = stream;
  a->correlation = uint64_t(ts.index) << 32 | ++g->seq;
  a->kind = kind;
  a->hostEnqueueNs = nowNs();
  return a;
}

void abandonOperation(ThreadState& ts, Activity* a) {
  if (a && ts.gpu) recycle(*ts.gpu, a);
}

void launched(ThreadState& ts, Activity*) { ++ts.gpu->launched; }

void attributeHere(ThreadState& ts, uint64_t tag, const uint8_t* metrics, const double* values, unsigned n) {
  if (!threadGpu(ts)) return;
  CctNode* ctx = contextHere(ts);  // the wrapped GPU API call's
  CctNode* ph = ctx ? ts.cct.child(ctx, kPlaceholderModule, tag) : nullptr;
  double* m = ph ? slots(ts, ph) : nullptr;
  if (!m) return;
  for (unsigned i = 0; i < n; ++i) m[metrics[i]] += values[i];
  ph->hasValue = 1;
}

void drain(ThreadState& ts, bool inSignal) {
  ThreadGpu* g = ts.gpu;
  if (!g) return;
  if (!inSignal) {
    // Records attributed in a signal handler still hold their event: release them now.
    while (Activity* a = g->pendingRelease) {
      g->pendingRelease = a->nextFree;
      if (ReleaseFn rel = gReleaseEvent.load(std::memory_order_acquire); rel && a->event) rel(a->event);
      recycle(*g, a);
    }
  }
  while (MpscLink* l = g->inbox.dequeue()) {
    Activity* a = fromLink(l);
    attribute(ts, *a);
    ++g->returned;
    if (a->releaseEvent && a->event && g->mayRelease) {
      if (inSignal) {
        a->nextFree = g->pendingRelease;
        g->pendingRelease = a;
        continue;
      }
      if (ReleaseFn rel = gReleaseEvent.load(std::memory_order_acquire)) rel(a->event);
    }
    recycle(*g, a);
  }
}

void threadFinishWith(ThreadState& ts, uint64_t waitNs, bool mayRelease) {
  ThreadGpu* g = ts.gpu;
  if (!g) return;
  g->mayRelease = mayRelease;
  // Wait for the operations still in flight (seed 000 §4.3: dequeue until no enqueue is
  // in flight), bounded: an operation the application never let complete must not hang it.
  uint64_t deadline = monotonicNs() + waitNs;
  for (;;) {
    drain(ts, false);
    if (g->returned >= g->launched && g->inbox.idle()) break;
    if (monotonicNs() > deadline) break;
    timespec ts1{0, 200000};
    nanosleep(&ts1, nullptr);
  }
  drain(ts, false);
}

void threadFinish(ThreadState& ts) { threadFinishWith(ts, 5000000000ull, true); }

}  // namespace hpc::rt::gpu
