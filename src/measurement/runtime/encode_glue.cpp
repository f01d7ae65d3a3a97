#include "encode_glue.hpp"

#include <stdlib.h>

#include "formats/hpcrun/encode.hpp"
#include "loadmap.hpp"
#include "sys.hpp"

namespace hpc::rt {

namespace enc = hpc::hpcrun::enc;

namespace {

// Buffers the encoder's many small writes into few write(2) calls.
struct FdSink {
  int fd;
  uint8_t* buf;
  size_t cap, len;
  bool failed;
  bool flush() {
    if (len && !writeAll(fd, buf, len)) failed = true;
    len = 0;
    return !failed;
  }
  static bool write(void* ctx, const void* data, size_t n) {
    auto* s = static_cast<FdSink*>(ctx);
    const auto* p = static_cast<const uint8_t*>(data);
    if (!s->buf) return s->failed = !writeAll(s->fd, p, n), !s->failed;
    while (n) {
      if (s->len == s->cap && !s->flush()) return false;
      size_t k = s->cap - s->len < n ? s->cap - s->len : n;
      memCopy(s->buf + s->len, p, k);
      s->len += k, p += k, n -= k;
    }
    return true;
  }
};

bool isRealMetric(const EventSpec& ev) { return ev.kind != SourceKind::Perf; }

}  // namespace

bool encodeTraceHeader(int fd) {
  FdSink s{fd, nullptr, 0, 0, false};
  return enc::write_trace_header(enc::Sink{&s, &FdSink::write}, 0);
}

void encodeTraceRecords(int fd, const TraceRecord* recs, uint32_t n) {
  uint8_t buf[256 * enc::kTraceRecordMax];
  size_t len = 0;
  for (uint32_t i = 0; i < n; ++i) {
    len += enc::encode_trace_record(buf + len, 0, enc::TraceRecordRec{recs[i].time, recs[i].node, 0});
    if (len + enc::kTraceRecordMax > sizeof buf || i + 1 == n) {
      writeAll(fd, buf, len);
      len = 0;
    }
  }
}

bool encodeProfile(int fd, ThreadState& ts) {
  constexpr size_t kBuf = 64 * 1024;
  FdSink s{fd, static_cast<uint8_t*>(ts.arena.alloc(kBuf)), kBuf, 0, false};
  enc::ProfileEncoder e(enc::Sink{&s, &FdSink::write});

  char rank[24], tid[24], host[24], pid[24], tmin[24], tmax[24];
  Text(rank, sizeof rank).dec(gConfig.rank);
  Text(tid, sizeof tid).dec(ts.index);
  Text(host, sizeof host).hex(gConfig.hostId, 8);
  Text(pid, sizeof pid).dec(uint64_t(gConfig.pid));
  Text(tmin, sizeof tmin).dec(ts.traceMin);
  Text(tmax, sizeof tmax).dec(ts.traceMax);
  const char* path = getenv("PATH");
  enc::NvPair pairs[] = {
      {"program-name", gConfig.appName}, {"program-path", gConfig.appPath}, {"env-path", path ? path : ""},
      {"job-id", ""}, {"mpi-rank", rank}, {"thread-id", tid}, {"host-id", host}, {"process-id", pid},
      {"trace-min-time", tmin}, {"trace-max-time", tmax}, {"trace-disorder", "0"}};
  e.header(pairs, gConfig.trace ? 11 : 8);

  uint16_t nlm = loadmapModuleCount();
  e.loadmap_begin(nlm);
  for (uint16_t id = 1; id <= nlm; ++id) e.loadmap_entry({id, loadmapModulePath(id), 1});

  Cct& cct = ts.cct;
  e.cct_begin(cct.size());
  for (CctNode* n = cct.first(); n; n = n->next)
    e.cct_node({n->id, n->parent ? n->parent->id : 0, n->module, n->offset, 1});

  e.metrics_begin(gConfig.nEvents);
  for (unsigned i = 0; i < gConfig.nEvents; ++i) {
    const EventSpec& ev = gConfig.events[i];
    enc::MetricDescRec m;
    char name[EventSpec::kNameMax + 16];
    Text t(name, sizeof name);
    t.str(ev.name);
    if (isRealMetric(ev)) t.str(" (sec)");
    m.name = name;
    m.description = name;
    m.flags.val_fmt = isRealMetric(ev) ? 2 : 1;
    m.period = ev.frequency ? 1 : ev.value;
    m.is_frequency_metric = ev.frequency;
    m.format = "";
    m.formula = "";
    e.metric(m);
  }
  e.idtuple_dictionary();

  uint64_t nvalues = 0;
  uint32_t nnodes = 0;
  for (CctNode* n = cct.first(); n; n = n->next) {
    if (!n->hasValue) continue;
    ++nnodes;
    for (unsigned i = 0; i < gConfig.nEvents; ++i) nvalues += n->metrics()[i] != 0;
  }
  enc::IdRec ids[4];
  uint16_t nids = 0;
  ids[nids++] = {uint16_t(1 | 1u << 14), gConfig.hostId, 0};           // NODE, l-local
  if (getenv("OMPI_COMM_WORLD_RANK") || getenv("PMI_RANK") || getenv("SLURM_PROCID"))
    ids[nids++] = {uint16_t(2 | 3u << 14), gConfig.rank, gConfig.rank};  // RANK
  ids[nids++] = {uint16_t(7 | 3u << 14), uint64_t(ts.core), uint64_t(ts.core)};  // CORE
  ids[nids++] = {uint16_t(3 | 3u << 14), ts.index, ts.index};          // THREAD
  e.sparse_begin(ids, nids, nvalues, nnodes);
  for (CctNode* n = cct.first(); n; n = n->next) {
    if (!n->hasValue) continue;
    for (unsigned i = 0; i < gConfig.nEvents; ++i) {
      double v = n->metrics()[i];
      if (v == 0) continue;
      if (isRealMetric(gConfig.events[i])) e.sparse_value_real(v, uint16_t(i));
      else e.sparse_value(uint64_t(v), uint16_t(i));
    }
  }
  for (CctNode* n = cct.first(); n; n = n->next) {
    if (!n->hasValue) continue;
    uint64_t k = 0;
    for (unsigned i = 0; i < gConfig.nEvents; ++i) k += n->metrics()[i] != 0;
    e.sparse_node_counted(n->id, k);
  }
  e.finish();
  s.flush();
  return e.ok() && !s.failed;
}

}  // namespace hpc::rt
