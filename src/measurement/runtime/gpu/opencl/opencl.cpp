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
constexpr cl_uint CL_QUEUE_DEVICE = 0x1091;
constexpr cl_uint CL_KERNEL_WORK_GROUP_SIZE = 0x11B0;
constexpr cl_uint CL_KERNEL_LOCAL_MEM_SIZE = 0x11B2;
constexpr cl_uint CL_KERNEL_PRIVATE_MEM_SIZE = 0x11B4;
constexpr cl_uint CL_KERNEL_ARG_ADDRESS_QUALIFIER = 0x1196;
constexpr cl_uint CL_KERNEL_ARG_ADDRESS_LOCAL = 0x119C;
constexpr cl_uint CL_MEM_FLAGS = 0x1101;
constexpr cl_uint CL_MEM_SIZE = 0x1102;
constexpr cl_uint CL_MEM_REFERENCE_COUNT = 0x1105;
constexpr cl_uint CL_MEM_ASSOCIATED_MEMOBJECT = 0x1107;
constexpr cl_ulong CL_MEM_USE_HOST_PTR = 1u << 3;
constexpr cl_ulong CL_MEM_ALLOC_HOST_PTR = 1u << 4;
constexpr cl_ulong CL_MAP_READ = 1u << 0;
constexpr cl_ulong CL_MAP_WRITE = 1u << 1;
constexpr cl_ulong CL_MAP_WRITE_INVALIDATE_REGION = 1u << 2;

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
SLOT(clReleaseMemObject, cl_int (*)(Handle));
SLOT(clGetMemObjectInfo, cl_int (*)(Handle, cl_uint, size_t, void*, size_t*));
SLOT(clEnqueueUnmapMemObject, cl_int (*)(Handle, Handle, void*, cl_uint, const Handle*, Handle*));
SLOT(clGetKernelWorkGroupInfo, cl_int (*)(Handle, Handle, cl_uint, size_t, void*, size_t*));
SLOT(clGetKernelArgInfo, cl_int (*)(Handle, cl_uint, cl_uint, size_t, void*, size_t*));
SLOT(clSetKernelArg, cl_int (*)(Handle, cl_uint, size_t, const void*));
SLOT(clCreateKernel, Handle (*)(Handle, const char*, cl_int*));
SLOT(clCreateKernelsInProgram, cl_int (*)(Handle, cl_uint, Handle*, cl_uint*));
SLOT(clCloneKernel, Handle (*)(Handle, cl_int*));
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
// prepare(Activity&) fills in what the record needs from the runtime before the call.
template <typename Prepare, typename Call>
cl_int measuredWith(Handle queue, OpKind kind, uint64_t tag, uint8_t bytesMetric, uint64_t bytes, Handle* appEvent,
                    Prepare&& prepare, Call&& call) {
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
  prepare(*a);
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

template <typename Call>
cl_int measured(Handle queue, OpKind kind, uint64_t tag, uint8_t bytesMetric, uint64_t bytes, Handle* appEvent,
                Call&& call) {
  return measuredWith(queue, kind, tag, bytesMetric, bytes, appEvent, [](Activity&) {}, call);
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

// ---- Kernel launch parameters (GKER:*_ACUMU) ----
// The dynamic local memory of a kernel is what the application passed for its __local
// arguments (clSetKernelArg with a size and no value). The table holds, per kernel handle,
// the size set for each of its first kMaxLocalArgs arguments; a kernel enters it with its
// first __local argument. Handles are reused after release: a kernel created at an address
// starts with no local arguments (clCreateKernel*), a clone with its source's.
// MT: lock-free. Entries are claimed with a CAS on the key and never given back; the
// sizes of one kernel are written by the thread setting its arguments (OpenCL does not
// allow concurrent clSetKernelArg on one kernel) and read at its launches.
constexpr uint32_t kKernelSlots = 1024;
constexpr uint32_t kMaxLocalArgs = 32;

struct KernelLocals {
  std::atomic<Handle> kernel{nullptr};
  std::atomic<uint64_t> bytes[kMaxLocalArgs];
};
KernelLocals gKernelLocals[kKernelSlots];

KernelLocals* kernelLocals(Handle k, bool create) {
  if (!k) return nullptr;
  uint32_t h = uint32_t((reinterpret_cast<uintptr_t>(k) >> 4) * 0x9E3779B1u) & (kKernelSlots - 1);
  for (uint32_t i = 0; i < kKernelSlots; ++i) {
    KernelLocals& e = gKernelLocals[(h + i) & (kKernelSlots - 1)];
    Handle cur = e.kernel.load(std::memory_order_acquire);
    if (cur == k) return &e;
    if (cur) continue;
    if (!create) return nullptr;
    Handle expect = nullptr;
    if (e.kernel.compare_exchange_strong(expect, k, std::memory_order_acq_rel) || expect == k) return &e;
  }
  return nullptr;  // full: this kernel's dynamic local memory is not measured
}

void kernelCreated(Handle k, Handle cloneOf) {
  KernelLocals* src = cloneOf ? kernelLocals(cloneOf, false) : nullptr;
  KernelLocals* e = kernelLocals(k, src != nullptr);
  if (!e) return;
  for (uint32_t i = 0; i < kMaxLocalArgs; ++i)
    e->bytes[i].store(src ? src->bytes[i].load(std::memory_order_relaxed) : 0, std::memory_order_relaxed);
}

uint64_t dynamicLocal(Handle k) {
  KernelLocals* e = kernelLocals(k, false);
  uint64_t sum = 0;
  if (e)
    for (auto& b : e->bytes) sum += b.load(std::memory_order_relaxed);
  return sum;
}

template <typename T>
bool kernelInfo(Handle k, Handle dev, cl_uint what, T& out) {
  auto info = REAL(clGetKernelWorkGroupInfo);
  return info && info(k, dev, what, sizeof out, &out, nullptr) == CL_SUCCESS;
}

// The local size the runtime picks when the application passes none is not reported by
// OpenCL (a kernel declaring reqd_work_group_size must be given it). Taken: dimension by
// dimension, the largest divisor of the global size that fits in what is left of
// CL_KERNEL_WORK_GROUP_SIZE. That is the largest work-group the runtime may
// choose: an upper bound on work-items per group and a lower bound on groups (PoCL on 2
// CPUs splits a 4096-item range into 2 groups of 2048 where this records 1 of 4096).
void workGroups(Handle k, Handle dev, cl_uint dim, const size_t* gws, const size_t* lws, Activity& a) {
  size_t local[3] = {1, 1, 1};
  if (lws) {
    for (cl_uint d = 0; d < dim && d < 3; ++d) local[d] = lws[d] ? lws[d] : 1;
  } else {
    size_t budget = 0;
    if (kernelInfo(k, dev, CL_KERNEL_WORK_GROUP_SIZE, budget) && budget) {
      for (cl_uint d = 0; d < dim && d < 3; ++d) {
        size_t l = gws[d] < budget ? gws[d] : budget;
        while (l > 1 && gws[d] % l) --l;
        local[d] = l ? l : 1;
        budget /= local[d];
      }
    }
  }
  uint64_t blocks = 1, threads = 1;
  for (cl_uint d = 0; d < dim && d < 3; ++d) {
    blocks *= (gws[d] + local[d] - 1) / local[d];
    threads *= local[d];
  }
  a.blocks = blocks;
  a.blockThreads = threads;
}

// A kernel launch's parameters, as OpenCL reports them: work-groups and their size, the
// kernel's local memory (CL_KERNEL_LOCAL_MEM_SIZE counts the __local arguments too: their
// sum is the dynamic part, the rest static) and private memory per work-item.
void kernelLaunch(Handle q, Handle k, cl_uint dim, const size_t* gws, const size_t* lws, Activity& a) {
  Handle dev = nullptr;
  auto qinfo = REAL(clGetCommandQueueInfo);
  if (!qinfo || qinfo(q, CL_QUEUE_DEVICE, sizeof dev, &dev, nullptr) != CL_SUCCESS) return;
  if (dim == 0 || !gws) {  // clEnqueueTask: one work-item
    a.blocks = a.blockThreads = 1;
  } else {
    workGroups(k, dev, dim, gws, lws, a);
  }
  cl_ulong local = 0, priv = 0;
  kernelInfo(k, dev, CL_KERNEL_LOCAL_MEM_SIZE, local);
  kernelInfo(k, dev, CL_KERNEL_PRIVATE_MEM_SIZE, priv);
  uint64_t dyn = dynamicLocal(k);
  a.dynamicMem = dyn;
  a.staticMem = local > dyn ? local - dyn : 0;
  a.localMem = priv;
  a.hasLaunch = true;
}

// Memory objects: their kind of memory for GMEM (device memory unless it lives in host
// memory: the application's, pageable, or allocated by the runtime, pinned).
uint8_t memKind(cl_ulong flags) {
  return flags & CL_MEM_USE_HOST_PTR ? kMemPageableBytes : flags & CL_MEM_ALLOC_HOST_PTR ? kMemPinnedBytes : kMemDevBytes;
}

// Mapped regions, to know at unmap what was mapped for writing (copied back, host to
// device) and its size. MT: lock-free; a slot is claimed by CAS on its pointer and freed at
// unmap. When every slot is taken the unmap counts as a copy of 0 bytes.
constexpr uint32_t kMapSlots = 256;
struct Mapping {
  std::atomic<void*> ptr{nullptr};
  std::atomic<Handle> mem{nullptr};
  std::atomic<uint64_t> bytes{0};
};
Mapping gMappings[kMapSlots];

void mapped(Handle mem, void* ptr, uint64_t bytes) {
  for (auto& m : gMappings) {
    void* expect = nullptr;
    if (m.ptr.load(std::memory_order_relaxed) == nullptr &&
        m.ptr.compare_exchange_strong(expect, reinterpret_cast<void*>(1), std::memory_order_acq_rel)) {
      m.mem.store(mem, std::memory_order_relaxed);
      m.bytes.store(bytes, std::memory_order_relaxed);
      m.ptr.store(ptr, std::memory_order_release);
      return;
    }
  }
}

// The bytes to copy back for an unmap of ptr (0 when not mapped for writing); frees the slot.
uint64_t unmapped(Handle mem, void* ptr) {
  for (auto& m : gMappings) {
    if (m.ptr.load(std::memory_order_acquire) != ptr || m.mem.load(std::memory_order_relaxed) != mem) continue;
    uint64_t b = m.bytes.load(std::memory_order_relaxed);
    void* expect = ptr;
    if (m.ptr.compare_exchange_strong(expect, nullptr, std::memory_order_acq_rel)) return b;
  }
  return 0;
}

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
  return measuredWith(
      q, OpKind::Kernel, kTagKernel, 0, 0, ev, [&](Activity& a) { kernelLaunch(q, k, dim, gws, lws, a); },
      [&](Handle* e) { return real(q, k, dim, off, gws, lws, nw, wl, e); });
}

HPC_EXPORT cl_int clEnqueueTask(Handle q, Handle k, cl_uint nw, const Handle* wl, Handle* ev) {
  auto real = REAL(clEnqueueTask);
  if (!real) return -59;
  return measuredWith(
      q, OpKind::Kernel, kTagKernel, 0, 0, ev, [&](Activity& a) { kernelLaunch(q, k, 0, nullptr, nullptr, a); },
      [&](Handle* e) { return real(q, k, nw, wl, e); });
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

// A map makes the region's device contents visible to the host (device to host, none when
// the region is mapped only to be overwritten); the unmap of a region mapped for writing
// copies it back (host to device).
HPC_EXPORT void* clEnqueueMapBuffer(Handle q, Handle b, cl_bool blk, cl_ulong flags, size_t off, size_t n,
                                    cl_uint nw, const Handle* wl, Handle* ev, cl_int* err) {
  auto real = REAL(clEnqueueMapBuffer);
  if (!real) {
    if (err) *err = -59;
    return nullptr;
  }
  bool outermost = tDepth == 0;
  void* ptr = nullptr;
  uint64_t in = (flags & (CL_MAP_READ | CL_MAP_WRITE)) ? n : 0;
  measured(q, OpKind::Copy, kTagCopy, kCopyD2H, in, ev, [&](Handle* e) {
    cl_int rc = CL_SUCCESS;
    ptr = real(q, b, blk, flags, off, n, nw, wl, e, &rc);
    if (err) *err = rc;
    return rc;
  });
  if (ptr && outermost && enabled() && (flags & (CL_MAP_WRITE | CL_MAP_WRITE_INVALIDATE_REGION))) mapped(b, ptr, n);
  return ptr;
}

HPC_EXPORT cl_int clEnqueueUnmapMemObject(Handle q, Handle mem, void* ptr, cl_uint nw, const Handle* wl, Handle* ev) {
  auto real = REAL(clEnqueueUnmapMemObject);
  if (!real) return -59;
  uint64_t out = tDepth == 0 && enabled() ? unmapped(mem, ptr) : 0;
  return measured(q, OpKind::Copy, kTagCopy, kCopyH2D, out, ev,
                  [&](Handle* e) { return real(q, mem, ptr, nw, wl, e); });
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
    const uint8_t metrics[] = {memKind(flags), kMemCount};
    const double values[] = {double(size), 1};
    attributeHere(*ts, kTagAlloc, metrics, values, 2);
  }
  return b;
}

// The release that frees a buffer (its last reference) counts as a deallocation of its
// bytes, as the reference counts frees in GMEM; sub-buffers (views) are not counted.
HPC_EXPORT cl_int clReleaseMemObject(Handle mem) {
  auto real = REAL(clReleaseMemObject);
  if (!real) return -30;  // CL_INVALID_VALUE
  Entry entry;
  ThreadState* ts = entry.thread();
  cl_uint refs = 0;
  cl_ulong flags = 0;
  size_t size = 0;
  Handle parent = nullptr;
  auto info = REAL(clGetMemObjectInfo);
  bool last = ts && mem && info && info(mem, CL_MEM_REFERENCE_COUNT, sizeof refs, &refs, nullptr) == CL_SUCCESS &&
              refs == 1 && info(mem, CL_MEM_ASSOCIATED_MEMOBJECT, sizeof parent, &parent, nullptr) == CL_SUCCESS &&
              !parent && info(mem, CL_MEM_SIZE, sizeof size, &size, nullptr) == CL_SUCCESS &&
              info(mem, CL_MEM_FLAGS, sizeof flags, &flags, nullptr) == CL_SUCCESS;
  cl_int rc = real(mem);
  if (last && rc == CL_SUCCESS) {
    SuspendSampling guard;
    const uint8_t metrics[] = {memKind(flags), kMemCount};
    const double values[] = {double(size), 1};
    attributeHere(*ts, kTagAlloc, metrics, values, 2);
  }
  return rc;
}

// Kernel arguments: the sizes of __local ones (dynamic local memory). A NULL value is a
// __local argument or a NULL buffer; the argument's address qualifier says which when the
// program keeps argument information, else a size other than a memory object's is local,
// and for one of that size the kernel's local memory is compared before and after.
HPC_EXPORT cl_int clSetKernelArg(Handle k, cl_uint index, size_t size, const void* value) {
  auto real = REAL(clSetKernelArg);
  if (!real) return -59;
  if (tDepth != 0 || !enabled() || index >= kMaxLocalArgs) return real(k, index, size, value);
  ++tDepth;
  int local = value ? 0 : -1;  // -1: unknown yet
  cl_uint qualifier = 0;
  if (local < 0) {
    auto argInfo = REAL(clGetKernelArgInfo);
    if (argInfo && argInfo(k, index, CL_KERNEL_ARG_ADDRESS_QUALIFIER, sizeof qualifier, &qualifier, nullptr) == CL_SUCCESS)
      local = qualifier == CL_KERNEL_ARG_ADDRESS_LOCAL;
    else if (size != sizeof(Handle))
      local = 1;
  }
  KernelLocals* known = kernelLocals(k, false);
  bool wasLocal = known && known->bytes[index].load(std::memory_order_relaxed) > 0;
  cl_ulong before = 0, after = 0;
  bool compare = local < 0 && !wasLocal && kernelInfo(k, nullptr, CL_KERNEL_LOCAL_MEM_SIZE, before);
  cl_int rc = real(k, index, size, value);
  if (rc == CL_SUCCESS) {
    if (local < 0) local = wasLocal || (compare && kernelInfo(k, nullptr, CL_KERNEL_LOCAL_MEM_SIZE, after) && after != before);
    if (local) {
      if (KernelLocals* e = kernelLocals(k, true)) e->bytes[index].store(size, std::memory_order_relaxed);
    } else if (known) {
      known->bytes[index].store(0, std::memory_order_relaxed);
    }
  }
  --tDepth;
  return rc;
}

HPC_EXPORT Handle clCreateKernel(Handle program, const char* name, cl_int* err) {
  auto real = REAL(clCreateKernel);
  if (!real) {
    if (err) *err = -59;
    return nullptr;
  }
  Handle k = real(program, name, err);
  if (k && enabled()) kernelCreated(k, nullptr);
  return k;
}

HPC_EXPORT cl_int clCreateKernelsInProgram(Handle program, cl_uint n, Handle* kernels, cl_uint* nRet) {
  auto real = REAL(clCreateKernelsInProgram);
  if (!real) return -59;
  cl_int rc = real(program, n, kernels, nRet);
  if (rc == CL_SUCCESS && kernels && enabled())
    for (cl_uint i = 0; i < n; ++i)
      if (kernels[i]) kernelCreated(kernels[i], nullptr);
  return rc;
}

HPC_EXPORT Handle clCloneKernel(Handle src, cl_int* err) {
  auto real = REAL(clCloneKernel);
  if (!real) {
    if (err) *err = -59;
    return nullptr;
  }
  Handle k = real(src, err);
  if (k && enabled()) kernelCreated(k, src);
  return k;
}
