#include "measurement/runtime/gpu/streams.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <new>

#include "measurement/runtime/encode_glue.hpp"
#include "measurement/runtime/gpu/worker.hpp"
#include "measurement/runtime/output.hpp"
#include "measurement/runtime/sys.hpp"

namespace hpc::rt::gpu {

namespace {

constexpr uint32_t kMaxStreams = 4096;
constexpr uint32_t kMapSize = 8192;      // open addressing, handle -> stream
constexpr uint32_t kMaxTracers = 1024;
constexpr uint32_t kMaxHandles = 256;    // contexts, devices
constexpr size_t kMaxChain = 8192;       // launch path depth copied into a stream's CCT

struct Tracer;

}  // namespace

struct Stream {
  void* handle;
  uint32_t id;
  uint32_t context, device;
  bool appProfiling;
  Tracer* tracer;
  // Owned by the tracing thread from here on.
  Stream* nextTraced;
  bool ready, failed, disorder, haveOffset;
  int64_t clockOffset;      // CLOCK_REALTIME minus the GPU runtime's clock, from the first record
  Cct cct;
  CctNode* idle;
  CctNode* lastLaunch;      // one-entry cache: launch context -> this stream's GPUTrace node
  CctNode* lastTraceNode;
  KeptFile trace;
  TraceRecord* buf;
  uint32_t len;
  uint64_t tmin, tmax, last;
};

namespace {

struct Tracer {
  MpscQueue queue;
  std::atomic<bool> stop{false}, done{false};
  // Records are queued from the moment the tracer is published, before its thread runs;
  // only a thread that failed to start makes the monitor deliver them untraced.
  std::atomic<bool> failed{false};
  Arena arena;              // the tracer's streams' CCTs and buffers
  Stream* streams = nullptr;
  CctNode** chain = nullptr;
};

struct MapEntry {
  std::atomic<void*> key;
  std::atomic<Stream*> value;
};

std::atomic<uint32_t> gNextStream{0};
std::atomic<Tracer*> gTracers[kMaxTracers];
uint32_t gStreamsPerTracer = 256;
std::atomic<void*> gContexts[kMaxHandles], gDevices[kMaxHandles];

uint32_t handleIndex(std::atomic<void*>* table, void* h) {
  if (!h) return 0;
  for (uint32_t i = 0; i < kMaxHandles; ++i) {
    void* cur = table[i].load(std::memory_order_acquire);
    if (cur == h) return i;
    if (!cur) {
      void* expect = nullptr;
      if (table[i].compare_exchange_strong(expect, h) || expect == h) return i;
    }
  }
  return kMaxHandles;
}

MapEntry* map() {
  static std::atomic<MapEntry*> m{nullptr};
  MapEntry* cur = m.load(std::memory_order_acquire);
  if (cur) return cur;
  auto* fresh = static_cast<MapEntry*>(pageAlloc(kMapSize * sizeof(MapEntry)));
  if (!fresh) return nullptr;
  MapEntry* expect = nullptr;
  if (m.compare_exchange_strong(expect, fresh)) return fresh;
  pageFree(fresh, kMapSize * sizeof(MapEntry));
  return expect;
}

uint32_t slotOf(void* h) { return uint32_t((reinterpret_cast<uintptr_t>(h) >> 4) * 0x9E3779B1u) & (kMapSize - 1); }

void* tracerMain(void* p);

Tracer* tracerFor(uint32_t streamId) {
  if (!gConfig.trace) return nullptr;
  uint32_t k = streamId / gStreamsPerTracer;
  if (k >= kMaxTracers) k = kMaxTracers - 1;
  if (Tracer* t = gTracers[k].load(std::memory_order_acquire)) return t;
  void* mem = pageAlloc(sizeof(Tracer) + 64);
  if (!mem) return nullptr;
  auto* t = new (reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(mem) + 63) & ~uintptr_t(63))) Tracer();
  Tracer* expect = nullptr;
  if (!gTracers[k].compare_exchange_strong(expect, t)) {
    pageFree(mem, sizeof(Tracer) + 64);
    return expect;
  }
  t->chain = static_cast<CctNode**>(t->arena.alloc(kMaxChain * sizeof(CctNode*)));
  if (!t->chain || !startWorker(tracerMain, t)) {
    t->failed.store(true, std::memory_order_release);
    complain("cannot start a GPU tracing thread: its streams are not traced");
    // Whatever the monitor queued meanwhile goes straight back (a record queued between the
    // flag and this drain would stay: thread creation failing is rare enough).
    while (MpscLink* l = t->queue.dequeue()) deliver(fromLink(l));
  }
  return t;
}

bool initStream(Tracer& tr, Stream& s) {
  s.ready = true;
  if (!s.cct.init(tr.arena, 0, false)) return !(s.failed = true);
  s.idle = s.cct.child(s.cct.root(), kPlaceholderModule, kTagNoActivity);
  s.buf = static_cast<TraceRecord*>(tr.arena.alloc(kTraceBufRecords * sizeof(TraceRecord)));
  if (!s.idle || !s.buf) return !(s.failed = true);
  if (!gConfig.selected) return true;  // traced into memory only: hpcrun -f did not draw it
  char path[kPathMax];
  outputPath(path, sizeof path, kFirstStreamThreadIndex + s.id, ".hpctrace");
  // The path kept to open the file again by, should the application close its descriptor.
  size_t len = strLen(path) + 1;
  if (char* kept = static_cast<char*>(tr.arena.alloc(len))) {
    memCopy(kept, path, len);
    // Flags as the reference's GPU stream traces (call-trace bit).
    if (keptOpen(s.trace, kept, O_WRONLY | O_CREAT | O_TRUNC) && !encodeTraceHeader(s.trace.fd, 4))
      keptClose(s.trace);
  }
  s.nextTraced = tr.streams;
  tr.streams = &s;
  return true;
}

// The stream CCT's copy of a launch context (nodes of the launching thread's CCT, which
// outlives the thread: see threadEnd), with the GPUTrace placeholder below it.
CctNode* traceNode(Tracer& tr, Stream& s, CctNode* launch) {
  if (launch == s.lastLaunch && s.lastTraceNode) return s.lastTraceNode;
  size_t n = 0;
  for (CctNode* c = launch; c && c->parent && n < kMaxChain; c = c->parent) tr.chain[n++] = c;
  CctNode* node = s.cct.root();
  while (n-- > 0 && node) node = s.cct.child(node, tr.chain[n]->module, tr.chain[n]->offset);
  node = node ? s.cct.child(node, kPlaceholderModule, kTagTrace) : nullptr;
  s.lastLaunch = launch;
  s.lastTraceNode = node;
  return node;
}

void append(Stream& s, uint64_t t, uint32_t node) {
  if (t < s.last) s.disorder = true;
  else s.last = t;
  if (!s.tmin || t < s.tmin) s.tmin = t;
  if (t > s.tmax) s.tmax = t;
  s.buf[s.len++] = TraceRecord{t, node};
  if (s.len == kTraceBufRecords) {
    if (int fd = keptFd(s.trace); fd >= 0) encodeTraceRecords(fd, s.buf, s.len);
    s.len = 0;
  }
}

void trace(Tracer& tr, Activity* a) {
  Stream& s = *a->stream;
  if ((s.ready || initStream(tr, s)) && !s.failed && a->timed) {
    if (!s.haveOffset) {
      s.clockOffset = int64_t(a->hostEnqueueNs) - int64_t(a->queued);
      s.haveOffset = true;
    }
    CctNode* n = traceNode(tr, s, a->placeholder->parent);
    if (n) {
      append(s, uint64_t(int64_t(a->start) + s.clockOffset), n->id);
      append(s, uint64_t(int64_t(a->end) + s.clockOffset), s.idle->id);
    }
  }
  deliver(a);
}

void writeStream(Stream& s) {
  if (s.trace.path) {
    if (int fd = keptFd(s.trace); fd >= 0 && s.len) encodeTraceRecords(fd, s.buf, s.len);
    s.len = 0;
    keptClose(s.trace);
  }
  if (s.failed || !gConfig.selected) return;  // hpcrun -f: a process not drawn writes nothing
  char path[kPathMax];
  uint32_t index = kFirstStreamThreadIndex + s.id;
  outputPath(path, sizeof path, index, ".hpcrun");
  int fd = openOutput(path, O_WRONLY | O_CREAT | O_TRUNC);
  if (fd < 0) return;
  IdEntry ids[] = {{uint16_t(1 | 1u << 14), gConfig.hostId, 0},
                   {uint16_t(4 | 3u << 14), s.device, s.device},
                   {uint16_t(5 | 3u << 14), s.context, s.context},
                   {uint16_t(6 | 3u << 14), s.id, s.id}};
  ProfileSpec spec{&s.cct, s.cct.arenaOf(), index, s.tmin, s.tmax, true, s.disorder, ids, 4};
  encodeCctProfile(fd, spec);
  close(fd);
}

void* tracerMain(void* p) {
  auto& tr = *static_cast<Tracer*>(p);
  blockAllSignals();
  for (unsigned idle = 0;;) {
    bool stopping = tr.stop.load(std::memory_order_acquire);
    bool any = false;
    while (MpscLink* l = tr.queue.dequeue()) {
      trace(tr, fromLink(l));
      any = true;
    }
    if (stopping && tr.queue.idle()) break;
    idle = any ? 0 : idle + 1;
    if (!any) idlePause(idle);
  }
  for (Stream* s = tr.streams; s; s = s->nextTraced) writeStream(*s);
  tr.done.store(true, std::memory_order_release);
  return nullptr;
}

}  // namespace

void setStreamsPerTracer(uint32_t n) { gStreamsPerTracer = n ? n : 1; }

uint32_t streamCount() { return gNextStream.load(std::memory_order_relaxed); }

uint32_t tracerCount() {
  uint32_t n = 0;
  for (auto& slot : gTracers) n += slot.load(std::memory_order_acquire) != nullptr;
  return n;
}

Stream* streamCreate(void* handle, void* context, void* device, bool appProfiling) {
  MapEntry* m = map();
  uint32_t id = gNextStream.fetch_add(1, std::memory_order_relaxed);
  if (!m || id >= kMaxStreams) return nullptr;
  auto* s = static_cast<Stream*>(pageAlloc(sizeof(Stream)));
  if (!s) return nullptr;
  new (s) Stream();
  s->handle = handle;
  s->id = id;
  s->context = handleIndex(gContexts, context) + 1;
  s->device = handleIndex(gDevices, device);
  s->appProfiling = appProfiling;
  s->tracer = tracerFor(id);
  startMonitor();
  for (uint32_t i = slotOf(handle), probes = 0; probes < kMapSize; i = (i + 1) & (kMapSize - 1), ++probes) {
    void* k = m[i].key.load(std::memory_order_acquire);
    if (!k) {
      void* expect = nullptr;
      if (!m[i].key.compare_exchange_strong(expect, handle) && expect != handle) continue;
      k = handle;
    }
    if (k == handle) {
      m[i].value.store(s, std::memory_order_release);  // a reused handle: the new stream
      return s;
    }
  }
  return s;  // table full: the stream works, later lookups of its handle register anew
}

Stream* streamOf(void* handle) {
  if (MapEntry* m = map()) {
    for (uint32_t i = slotOf(handle), probes = 0; probes < kMapSize; i = (i + 1) & (kMapSize - 1), ++probes) {
      void* k = m[i].key.load(std::memory_order_acquire);
      if (!k) break;
      if (k == handle)
        if (Stream* s = m[i].value.load(std::memory_order_acquire)) return s;
    }
  }
  return streamCreate(handle, nullptr, nullptr, true);
}

bool streamAppProfiling(const Stream* s) { return !s || s->appProfiling; }

void traceOrDeliver(Activity* a) {
  Tracer* t = a->stream ? a->stream->tracer : nullptr;
  if (t && !t->failed.load(std::memory_order_acquire) && !t->stop.load(std::memory_order_acquire))
    t->queue.enqueue(&a->link);
  else deliver(a);
}

void stopTracers() {
  for (auto& slot : gTracers)
    if (Tracer* t = slot.load(std::memory_order_acquire); t && !t->failed.load()) t->stop.store(true, std::memory_order_release);
  for (auto& slot : gTracers)
    if (Tracer* t = slot.load(std::memory_order_acquire); t && !t->failed.load()) waitFlag(t->done, 3000000000ull);
}

}  // namespace hpc::rt::gpu
