#include "encode_glue.hpp"

#include <unistd.h>

#include <cstring>

#include "formats/hpcrun/encode.hpp"
#include "loadmap.hpp"

namespace hpc::rt {

namespace enc = hpc::hpcrun::enc;

namespace {

// A small write buffer on the caller's stack in front of write(2): no allocation.
struct FdBuffer {
  int fd;
  size_t len = 0;
  bool failed = false;
  uint8_t buf[8192];

  bool flush() {
    size_t off = 0;
    while (off < len) {
      ssize_t w = ::write(fd, buf + off, len - off);
      if (w < 0) {
        failed = true;
        break;
      }
      off += size_t(w);
    }
    len = 0;
    return !failed;
  }
  static bool put(void* ctx, const void* data, size_t n) {
    auto* b = static_cast<FdBuffer*>(ctx);
    auto* p = static_cast<const uint8_t*>(data);
    while (n) {
      if (b->len == sizeof b->buf && !b->flush()) return false;
      size_t k = sizeof b->buf - b->len < n ? sizeof b->buf - b->len : n;
      std::memcpy(b->buf + b->len, p, k);
      b->len += k, p += k, n -= k;
    }
    return !b->failed;
  }
};

// Decimal or hex text of v into out (at least 24 bytes); returns out.
const char* number(char* out, uint64_t v, bool hexadecimal, int width = 0) {
  char tmp[24];
  int n = 0;
  unsigned base = hexadecimal ? 16 : 10;
  do {
    tmp[n++] = "0123456789abcdef"[v % base];
    v /= base;
  } while (v);
  while (n < width) tmp[n++] = '0';
  for (int i = 0; i < n; ++i) out[i] = tmp[n - 1 - i];
  out[n] = 0;
  return out;
}

const char* metricName(const EventSpec& ev) {
  switch (ev.kind) {
  case SourceKind::CpuTime: return "CPUTIME (sec)";
  case SourceKind::RealTime: return "REALTIME (sec)";
  default: return ev.name;
  }
}

}  // namespace

bool encodeTraceHeader(int fd) {
  FdBuffer b{fd, 0, false, {}};
  return enc::write_trace_header({&b, &FdBuffer::put}, 0) && b.flush();
}

void encodeTraceRecords(int fd, const TraceRecord* recs, uint32_t n) {
  FdBuffer b{fd, 0, false, {}};
  enc::Sink s{&b, &FdBuffer::put};
  for (uint32_t i = 0; i < n; ++i) enc::write_trace_record(s, 0, {recs[i].time, recs[i].node, 0});
  b.flush();
}

bool encodeProfile(int fd, ThreadState& ts) {
  FdBuffer b{fd, 0, false, {}};
  enc::ProfileEncoder e({&b, &FdBuffer::put});
  char pid[24], tid[24], rank[24], host[24], tmin[24], tmax[24];
  enc::NvPair header[] = {
      {"program-name", gConfig.appName},
      {"program-path", gConfig.appPath},
      {"env-path", ""},
      {"job-id", ""},
      {"mpi-rank", number(rank, gConfig.rank, false)},
      {"thread-id", number(tid, ts.index, false)},
      {"host-id", number(host, gConfig.hostId, true, 8)},
      {"process-id", number(pid, uint64_t(gConfig.pid), false)},
      {"trace-min-time", number(tmin, ts.traceMin, false)},
      {"trace-max-time", number(tmax, ts.traceMax, false)},
      {"trace-disorder", "0"},
  };
  e.header(header, sizeof header / sizeof header[0]);

  uint16_t nModules = loadmapModuleCount();
  e.loadmap_begin(nModules);
  for (uint16_t id = 1; id <= nModules; ++id) {
    const char* path = loadmapModulePath(id);
    e.loadmap_entry({id, path ? path : "", 1});
  }

  e.cct_begin(ts.cct.size());
  for (CctNode* n = ts.cct.first(); n; n = n->next)
    e.cct_node({n->id, n->parent ? n->parent->id : 0, n->module, n->offset, 1});

  unsigned nMetrics = ts.cct.metricCount();
  e.metrics_begin(nMetrics);
  for (unsigned i = 0; i < nMetrics; ++i) {
    enc::MetricDescRec m;
    m.name = m.description = metricName(gConfig.events[i]);
    m.period = 1;  // values are already in the metric's unit (seconds, or events)
    m.formula = m.format = "";
    e.metric(m);
  }
  e.idtuple_dictionary();

  enc::IdRec ids[3];
  uint16_t nIds = 0;
  ids[nIds++] = {uint16_t(1 | (1u << 14)), gConfig.hostId, 0};  // NODE: physical host id
  if (ts.core >= 0) ids[nIds++] = {uint16_t(7 | (3u << 14)), uint64_t(ts.core), uint64_t(ts.core)};
  ids[nIds++] = {uint16_t(3 | (3u << 14)), ts.index, ts.index};  // THREAD

  uint64_t nValues = 0;
  uint32_t nNodes = 0;
  for (CctNode* n = ts.cct.first(); n; n = n->next) {
    if (!n->hasValue) continue;
    uint64_t k = 0;
    for (unsigned i = 0; i < nMetrics; ++i) k += n->metrics()[i] != 0;
    nValues += k;
    nNodes += k != 0;
  }
  e.sparse_begin(ids, nIds, nValues, nNodes);
  for (CctNode* n = ts.cct.first(); n; n = n->next)
    if (n->hasValue)
      for (unsigned i = 0; i < nMetrics; ++i)
        if (n->metrics()[i] != 0) e.sparse_value_real(n->metrics()[i], uint16_t(i));
  for (CctNode* n = ts.cct.first(); n; n = n->next) {
    if (!n->hasValue) continue;
    uint64_t k = 0;
    for (unsigned i = 0; i < nMetrics; ++i) k += n->metrics()[i] != 0;
    if (k) e.sparse_node_counted(n->id, k);
  }
  e.finish();
  return e.ok() && b.flush();
}

}  // namespace hpc::rt
