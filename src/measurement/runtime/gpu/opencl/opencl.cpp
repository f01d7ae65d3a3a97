// The OpenCL backend (hpcrun -e gpu=opencl): libhpcrun.so exports the OpenCL entry points
// that launch, copy, fill, synchronize or create queues and buffers; each forwards to the
// next definition (the ICD loader) found with dlsym(RTLD_NEXT). Queues are created with
// CL_QUEUE_PROFILING_ENABLE forced on (hidden from clGetCommandQueueInfo); every command
// gets a completion callback on an event (the application's, retained, or our own) that
// reads CL_PROFILING_COMMAND_START/END and hands the record to the monitor thread.
// What the application passes and gets back is never changed.
//
// Declared here with the C ABI of <CL/cl.h> (handles are pointers, cl_int 32-bit,
// bitfields and properties 64-bit) so the runtime builds without the OpenCL headers.
#include <dlfcn.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "measurement/runtime/gpu/activity.hpp"
#include "measurement/runtime/gpu/gpu.hpp"
#include "measurement/runtime/gpu/metrics.hpp"
#include "measurement/runtime/gpu/streams.hpp"
#include "measurement/runtime/process.hpp"
#include "measurement/runtime/sys.hpp"

#define HPC_EXPORT extern "C" __attribute__((visibility("default")))

using namespace hpc::rt;
using namespace hpc::rt::gpu;

namespace {

using cl_int = int32_t;
using cl_uint = uint32_t;
using cl_bool = uint32_t;
using cl_ulong = uint64_t;
using Handle = void*;
using Callback = void (*)(Handle, cl_int, void*);

constexpr cl_int CL_SUCCESS = 0;
constexpr cl_int CL_COMPLETE = 0;
constexpr cl_uint CL_QUEUE_PROPERTIES = 0x1093;
constexpr cl_ulong CL_QUEUE_PROFILING_ENABLE = 1u << 1;
constexpr cl_uint CL_PROFILING_COMMAND_QUEUED = 0x1280;
constexpr cl_uint CL_PROFILING_COMMAND_START = 0x1282;
constexpr cl_uint CL_PROFILING_COMMAND_END = 0x1283;

template <typename Fn>
Fn next(std::atomic<Fn>& slot, const char* name) {
  Fn f = slot.load(std::memory_order_acquire);
  if (!f) {
    f = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
    slot.store(f, std::memory_order_release);
  }
  return f;
}
#define REAL(fn) next(real_##fn, #fn)
#define SLOT(fn, type) std::atomic<type> real_##fn{nullptr}

SLOT(clCreateCommandQueue, Handle (*)(Handle, Handle, cl_ulong, cl_int*));
SLOT(clCreateCommandQueueWithProperties, Handle (*)(Handle, Handle, const cl_ulong*, cl_int*));
SLOT(clGetCommandQueueInfo, cl_int (*)(Handle, cl_uint, size_t, void*, size_t*));
SLOT(clEnqueueNDRangeKernel,
     cl_int (*)(Handle, Handle, cl_uint, const size_t*, const size_t*, const size_t*, cl_uint, const Handle*, Handle*));
SLOT(clEnqueueTask, cl_int (*)(Handle, Handle, cl_uint, const Handle*, Handle*));
SLOT(clEnqueueReadBuffer, cl_int (*)(Handle, Handle, cl_bool, size_t, size_t, void*, cl_uint, const Handle*, Handle*));
SLOT(clEnqueueWriteBuffer,
     cl_int (*)(Handle, Handle, cl_bool, size_t, size_t, const void*, cl_uint, const Handle*, Handle*));
SLOT(clEnqueueCopyBuffer, cl_int (*)(Handle, Handle, Handle, size_t, size_t, size_t, cl_uint, const Handle*, Handle*));
SLOT(clEnqueueFillBuffer,
     cl_int (*)(Handle, Handle, const void*, size_t, size_t, size_t, cl_uint, const Handle*, Handle*));
SLOT(clEnqueueMapBuffer,
     void* (*)(Handle, Handle, cl_bool, cl_ulong, size_t, size_t, cl_uint, const Handle*, Handle*, cl_int*));
SLOT(clEnqueueReadBufferRect,
     cl_int (*)(Handle, Handle, cl_bool, const size_t*, const size_t*, const size_t*, size_t, size_t, size_t, size_t,
                void*, cl_uint, const Handle*, Handle*));
SLOT(clEnqueueWriteBufferRect,
     cl_int (*)(Handle, Handle, cl_bool, const size_t*, const size_t*, const size_t*, size_t, size_t, size_t, size_t,
                const void*, cl_uint, const Handle*, Handle*));
SLOT(clEnqueueCopyBufferRect,
     cl_int (*)(Handle, Handle, Handle, const size_t*, const size_t*, const size_t*, size_t, size_t, size_t, size_t,
                cl_uint, const Handle*, Handle*));
SLOT(clFinish, cl_int (*)(Handle));
SLOT(clWaitForEvents, cl_int (*)(cl_uint, const Handle*));
SLOT(clCreateBuffer, Handle (*)(Handle, cl_ulong, size_t, void*, cl_int*));
SLOT(clSetEventCallback, cl_int (*)(Handle, cl_int, Callback, void*));
SLOT(clRetainEvent, cl_int (*)(Handle));
SLOT(clReleaseEvent, cl_int (*)(Handle));
SLOT(clGetEventProfilingInfo, cl_int (*)(Handle, cl_uint, size_t, void*, size_t*));

// initial-exec: no __tls_get_addr (which may allocate) on this path.
thread_local int tDepth __attribute__((tls_model("initial-exec"))) = 0;

// The outermost wrapped call on this thread (an OpenCL implementation calling its own
// entry points is not measured twice); measured when GPU measurement is on and the thread
// is one of the application's.
class Entry {
public:
  Entry() : ts_(tDepth++ == 0 && enabled() && !gFinalized.load(std::memory_order_acquire) ? currentThread() : nullptr) {
    if (ts_ && ts_->phase.load(std::memory_order_acquire) != ThreadPhase::Running) ts_ = nullptr;
  }
  ~Entry() { --tDepth; }
  Entry(const Entry&) = delete;
  Entry& operator=(const Entry&) = delete;
  ThreadState* thread() const { return ts_; }

private:
  ThreadState* ts_;
};

void releaseEvent(void* ev) {
  if (auto rel = REAL(clReleaseEvent)) rel(ev);
}

// On whatever thread the OpenCL implementation completes commands.
void onComplete(Handle ev, cl_int status, void* user) {
  auto* a = static_cast<Activity*>(user);
  auto info = REAL(clGetEventProfilingInfo);
  if (status == CL_COMPLETE && info) {
    cl_ulong q = 0, s = 0, e = 0;
    a->timed = info(ev, CL_PROFILING_COMMAND_QUEUED, sizeof q, &q, nullptr) == CL_SUCCESS &&
               info(ev, CL_PROFILING_COMMAND_START, sizeof s, &s, nullptr) == CL_SUCCESS &&
               info(ev, CL_PROFILING_COMMAND_END, sizeof e, &e, nullptr) == CL_SUCCESS && e >= s;
    a->queued = q, a->start = s, a->end = e;
  }
  completed(a);
}

// One enqueue: record the launch, make the call with an event (the application's or
// ours), and ask for the completion callback. call(Handle* event) -> cl_int.
template <typename Call>
cl_int measured(Handle queue, OpKind kind, uint64_t tag, uint8_t bytesMetric, uint64_t bytes, Handle* appEvent,
                Call&& call) {
  Entry entry;
  ThreadState* ts = entry.thread();
  if (!ts) return call(appEvent);
  gReleaseEvent.store(releaseEvent, std::memory_order_release);
  Activity* a;
  {
    SuspendSampling guard;
    a = beginOperation(*ts, kind, tag, streamOf(queue));
  }
  if (!a) return call(appEvent);
  a->bytes = bytes;
  a->bytesMetric = bytesMetric;
  Handle mine = nullptr;
  Handle* ev = appEvent ? appEvent : &mine;
  cl_int rc = call(ev);
  SuspendSampling guard;
  auto setCallback = REAL(clSetEventCallback);
  if (rc != CL_SUCCESS || !*ev || !setCallback || (appEvent && REAL(clRetainEvent)(*ev) != CL_SUCCESS)) {
    if (rc == CL_SUCCESS && !appEvent && mine) releaseEvent(mine);
    abandonOperation(*ts, a);
    return rc;
  }
  a->event = *ev;
  a->releaseEvent = true;  // ours, or the reference retained on the application's
  if (setCallback(*ev, CL_COMPLETE, onComplete, a) != CL_SUCCESS) {
    releaseEvent(*ev);
    abandonOperation(*ts, a);
    return rc;
  }
  launched(*ts, a);
  return rc;
}

// clFinish, clWaitForEvents: host time blocked, at the call's context.
template <typename Call>
cl_int synchronize(uint8_t kindMetric, Call&& call) {
  Entry entry;
  ThreadState* ts = entry.thread();
  if (!ts) return call();
  uint64_t t0 = nowNs();
  cl_int rc = call();
  double sec = double(nowNs() - t0) * 1e-9;
  SuspendSampling guard;
  const uint8_t metrics[] = {kSyncTime, kindMetric, kSyncCount};
  const double values[] = {sec, sec, 1};
  attributeHere(*ts, kTagSync, metrics, values, 3);
  drain(*ts, false);
  return rc;
}

size_t volume(const size_t* region) { return region ? region[0] * region[1] * region[2] : 0; }

}  // namespace

HPC_EXPORT Handle clCreateCommandQueue(Handle ctx, Handle dev, cl_ulong props, cl_int* err) {
  auto real = REAL(clCreateCommandQueue);
  if (!real) {
    if (err) *err = -59;  // CL_INVALID_OPERATION
    return nullptr;
  }
  if (!enabled()) return real(ctx, dev, props, err);
  Handle q = real(ctx, dev, props | CL_QUEUE_PROFILING_ENABLE, err);
  bool forced = true;
  if (!q) {  // the device refuses profiling: the application's own request then
    q = real(ctx, dev, props, err);
    forced = false;
  }
  if (q && forced) streamCreate(q, ctx, dev, props & CL_QUEUE_PROFILING_ENABLE);
  return q;
}

HPC_EXPORT Handle clCreateCommandQueueWithProperties(Handle ctx, Handle dev, const cl_ulong* props, cl_int* err) {
  auto real = REAL(clCreateCommandQueueWithProperties);
  if (!real) {
    if (err) *err = -59;
    return nullptr;
  }
  if (!enabled()) return real(ctx, dev, props, err);
  constexpr int kMax = 64;
  cl_ulong mine[kMax + 3];
  int n = 0;
  bool found = false, appProfiling = false, fits = true;
  for (const cl_ulong* p = props; p && p[0]; p += 2) {
    if (n + 2 > kMax) {
      fits = false;
      break;
    }
    mine[n++] = p[0];
    mine[n++] = p[1];
    if (p[0] == CL_QUEUE_PROPERTIES) {
      found = true;
      appProfiling = p[1] & CL_QUEUE_PROFILING_ENABLE;
      mine[n - 1] |= CL_QUEUE_PROFILING_ENABLE;
    }
  }
  if (!fits) return real(ctx, dev, props, err);
  if (!found) {
    mine[n++] = CL_QUEUE_PROPERTIES;
    mine[n++] = CL_QUEUE_PROFILING_ENABLE;
  }
  mine[n] = 0;
  Handle q = real(ctx, dev, mine, err);
  if (!q) return real(ctx, dev, props, err);
  streamCreate(q, ctx, dev, appProfiling);
  return q;
}

HPC_EXPORT cl_int clGetCommandQueueInfo(Handle q, cl_uint param, size_t size, void* value, size_t* sizeRet) {
  auto real = REAL(clGetCommandQueueInfo);
  if (!real) return -59;
  cl_int rc = real(q, param, size, value, sizeRet);
  // The application sees the properties it asked for.
  if (rc == CL_SUCCESS && enabled() && param == CL_QUEUE_PROPERTIES && value && size >= sizeof(cl_ulong) &&
      !streamAppProfiling(streamOf(q)))
    *static_cast<cl_ulong*>(value) &= ~CL_QUEUE_PROFILING_ENABLE;
  return rc;
}

HPC_EXPORT cl_int clEnqueueNDRangeKernel(Handle q, Handle k, cl_uint dim, const size_t* off, const size_t* gws,
                                         const size_t* lws, cl_uint nw, const Handle* wl, Handle* ev) {
  auto real = REAL(clEnqueueNDRangeKernel);
  if (!real) return -59;
  return measured(q, OpKind::Kernel, kTagKernel, 0, 0, ev,
                  [&](Handle* e) { return real(q, k, dim, off, gws, lws, nw, wl, e); });
}

HPC_EXPORT cl_int clEnqueueTask(Handle q, Handle k, cl_uint nw, const Handle* wl, Handle* ev) {
  auto real = REAL(clEnqueueTask);
  if (!real) return -59;
  return measured(q, OpKind::Kernel, kTagKernel, 0, 0, ev, [&](Handle* e) { return real(q, k, nw, wl, e); });
}

HPC_EXPORT cl_int clEnqueueReadBuffer(Handle q, Handle b, cl_bool blk, size_t off, size_t n, void* p, cl_uint nw,
                                      const Handle* wl, Handle* ev) {
  auto real = REAL(clEnqueueReadBuffer);
  if (!real) return -59;
  return measured(q, OpKind::Copy, kTagCopy, kCopyD2H, n, ev,
                  [&](Handle* e) { return real(q, b, blk, off, n, p, nw, wl, e); });
}

HPC_EXPORT cl_int clEnqueueWriteBuffer(Handle q, Handle b, cl_bool blk, size_t off, size_t n, const void* p,
                                       cl_uint nw, const Handle* wl, Handle* ev) {
  auto real = REAL(clEnqueueWriteBuffer);
  if (!real) return -59;
  return measured(q, OpKind::Copy, kTagCopy, kCopyH2D, n, ev,
                  [&](Handle* e) { return real(q, b, blk, off, n, p, nw, wl, e); });
}

HPC_EXPORT cl_int clEnqueueCopyBuffer(Handle q, Handle src, Handle dst, size_t so, size_t dof, size_t n, cl_uint nw,
                                      const Handle* wl, Handle* ev) {
  auto real = REAL(clEnqueueCopyBuffer);
  if (!real) return -59;
  return measured(q, OpKind::Copy, kTagCopy, kCopyD2D, n, ev,
                  [&](Handle* e) { return real(q, src, dst, so, dof, n, nw, wl, e); });
}

HPC_EXPORT cl_int clEnqueueFillBuffer(Handle q, Handle b, const void* pat, size_t psize, size_t off, size_t n,
                                      cl_uint nw, const Handle* wl, Handle* ev) {
  auto real = REAL(clEnqueueFillBuffer);
  if (!real) return -59;
  return measured(q, OpKind::Memset, kTagMemset, kMemsetDevBytes, n, ev,
                  [&](Handle* e) { return real(q, b, pat, psize, off, n, nw, wl, e); });
}

HPC_EXPORT void* clEnqueueMapBuffer(Handle q, Handle b, cl_bool blk, cl_ulong flags, size_t off, size_t n,
                                    cl_uint nw, const Handle* wl, Handle* ev, cl_int* err) {
  auto real = REAL(clEnqueueMapBuffer);
  if (!real) {
    if (err) *err = -59;
    return nullptr;
  }
  void* mapped = nullptr;
  measured(q, OpKind::Copy, kTagCopy, kCopyD2H, n, ev, [&](Handle* e) {
    cl_int rc = CL_SUCCESS;
    mapped = real(q, b, blk, flags, off, n, nw, wl, e, &rc);
    if (err) *err = rc;
    return rc;
  });
  return mapped;
}

HPC_EXPORT cl_int clEnqueueReadBufferRect(Handle q, Handle b, cl_bool blk, const size_t* bo, const size_t* ho,
                                          const size_t* r, size_t brp, size_t bsp, size_t hrp, size_t hsp, void* p,
                                          cl_uint nw, const Handle* wl, Handle* ev) {
  auto real = REAL(clEnqueueReadBufferRect);
  if (!real) return -59;
  return measured(q, OpKind::Copy, kTagCopy, kCopyD2H, volume(r), ev,
                  [&](Handle* e) { return real(q, b, blk, bo, ho, r, brp, bsp, hrp, hsp, p, nw, wl, e); });
}

HPC_EXPORT cl_int clEnqueueWriteBufferRect(Handle q, Handle b, cl_bool blk, const size_t* bo, const size_t* ho,
                                           const size_t* r, size_t brp, size_t bsp, size_t hrp, size_t hsp,
                                           const void* p, cl_uint nw, const Handle* wl, Handle* ev) {
  auto real = REAL(clEnqueueWriteBufferRect);
  if (!real) return -59;
  return measured(q, OpKind::Copy, kTagCopy, kCopyH2D, volume(r), ev,
                  [&](Handle* e) { return real(q, b, blk, bo, ho, r, brp, bsp, hrp, hsp, p, nw, wl, e); });
}

HPC_EXPORT cl_int clEnqueueCopyBufferRect(Handle q, Handle src, Handle dst, const size_t* so, const size_t* dof,
                                          const size_t* r, size_t srp, size_t ssp, size_t drp, size_t dsp, cl_uint nw,
                                          const Handle* wl, Handle* ev) {
  auto real = REAL(clEnqueueCopyBufferRect);
  if (!real) return -59;
  return measured(q, OpKind::Copy, kTagCopy, kCopyD2D, volume(r), ev,
                  [&](Handle* e) { return real(q, src, dst, so, dof, r, srp, ssp, drp, dsp, nw, wl, e); });
}

HPC_EXPORT cl_int clFinish(Handle q) {
  auto real = REAL(clFinish);
  if (!real) return -59;
  return synchronize(kSyncStream, [&] { return real(q); });
}

HPC_EXPORT cl_int clWaitForEvents(cl_uint n, const Handle* list) {
  auto real = REAL(clWaitForEvents);
  if (!real) return -59;
  return synchronize(kSyncEvent, [&] { return real(n, list); });
}

HPC_EXPORT Handle clCreateBuffer(Handle ctx, cl_ulong flags, size_t size, void* host, cl_int* err) {
  auto real = REAL(clCreateBuffer);
  if (!real) {
    if (err) *err = -59;
    return nullptr;
  }
  Entry entry;
  Handle b = real(ctx, flags, size, host, err);
  if (ThreadState* ts = entry.thread(); ts && b) {
    SuspendSampling guard;
    const uint8_t metrics[] = {kMemDevBytes, kMemCount};
    const double values[] = {double(size), 1};
    attributeHere(*ts, kTagAlloc, metrics, values, 2);
  }
  return b;
}
