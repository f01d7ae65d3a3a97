#include "encode_glue.hpp"

#include <stdlib.h>

#include "formats/hpcrun/encode.hpp"
#include "gpu/gpu.hpp"
#include "gpu/metrics.hpp"
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

bool isRealMetric(const EventSpec& ev) { return ev.kind != SourceKind::Perf && !isCounted(ev.kind); }

}  // namespace

bool encodeTraceHeader(int fd, uint64_t flags) {
  FdSink s{fd, nullptr, 0, 0, false};
  return enc::write_trace_header(enc::Sink{&s, &FdSink::write}, flags);
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
  IdEntry ids[4];
  uint16_t nids = 0;
  ids[nids++] = {uint16_t(1 | 1u << 14), gConfig.hostId, 0};           // NODE, l-local
  if (gConfig.ranked)
    ids[nids++] = {uint16_t(2 | 3u << 14), gConfig.rank, gConfig.rank};  // RANK
  ids[nids++] = {uint16_t(7 | 3u << 14), uint64_t(ts.core), uint64_t(ts.core)};  // CORE
  ids[nids++] = {uint16_t(3 | 3u << 14), ts.index, ts.index};          // THREAD
  ProfileSpec spec{&ts.cct, &ts.arena, ts.index, ts.traceMin, ts.traceMax, gConfig.trace, false, ids, nids};
  return encodeCctProfile(fd, spec);
}

namespace {

// A node's value of metric i: the CPU sources' slots, then the GPU slots (when allocated).
double valueOf(CctNode* n, unsigned i, unsigned nCpu) {
  if (i < nCpu) return n->metrics()[i];
  return n->extra ? n->extra[i - nCpu] : 0;
}

bool isRealValue(unsigned i, unsigned nCpu) {
  return i < nCpu ? isRealMetric(gConfig.events[i]) : gpu::kMetrics[i - nCpu].valFmt == 2;
}

}  // namespace

bool encodeCctProfile(int fd, const ProfileSpec& spec) {
  constexpr size_t kBuf = 64 * 1024;
  FdSink s{fd, static_cast<uint8_t*>(spec.arena->alloc(kBuf)), kBuf, 0, false};
  enc::ProfileEncoder e(enc::Sink{&s, &FdSink::write});

  char rank[24], tid[24], host[24], pid[24], tmin[24], tmax[24];
  Text(rank, sizeof rank).dec(gConfig.rank);
  Text(tid, sizeof tid).dec(spec.threadIndex);
  Text(host, sizeof host).hex(gConfig.hostId, 8);
  Text(pid, sizeof pid).dec(uint64_t(gConfig.pid));
  Text(tmin, sizeof tmin).dec(spec.traceMin);
  Text(tmax, sizeof tmax).dec(spec.traceMax);
  const char* path = getenv("PATH");
  enc::NvPair pairs[] = {
      {"program-name", gConfig.appName}, {"program-path", gConfig.appPath}, {"env-path", path ? path : ""},
      {"job-id", gConfig.jobId}, {"mpi-rank", rank}, {"thread-id", tid}, {"host-id", host}, {"process-id", pid},
      {"trace-min-time", tmin}, {"trace-max-time", tmax}, {"trace-disorder", spec.disorder ? "1" : "0"}};
  e.header(pairs, spec.traced ? 11 : 8);

  // Load-map flag 1 marks a module this profile's contexts use (as the reference's hpcrun
  // does), so hpcstruct over the directory analyses only those.
  Cct& cct = *spec.cct;
  uint16_t nlm = loadmapModuleCount();
  auto* used = static_cast<uint8_t*>(spec.arena->alloc(size_t(nlm) / 8 + 1));
  for (CctNode* n = cct.first(); n; n = n->next)
    if (used && n->module != 0 && n->module <= nlm) used[n->module / 8] |= uint8_t(1u << (n->module % 8));
  e.loadmap_begin(nlm);
  for (uint16_t id = 1; id <= nlm; ++id) {
    uint64_t flags = !used || (used[id / 8] >> (id % 8)) & 1u ? 1 : 0;
    e.loadmap_entry({id, loadmapModulePath(id), flags});
  }

  e.cct_begin(cct.size());
  for (CctNode* n = cct.first(); n; n = n->next)
    e.cct_node({n->id, n->parent ? n->parent->id : 0, n->module, n->offset, 1});

  // The CPU sources' values live in the nodes' slots only for thread CCTs (a stream's CCT
  // has none and no values), but every profile carries the same metric table.
  const unsigned nCpu = gConfig.nEvents;
  const unsigned nMetrics = gpu::metricCount();
  const unsigned nSlots = cct.metricCount();  // nCpu for threads, 0 for streams
  e.metrics_begin(nMetrics);
  for (unsigned i = 0; i < nCpu; ++i) {
    const EventSpec& ev = gConfig.events[i];
    enc::MetricDescRec m;
    char name[EventSpec::kNameMax + 16];
    Text t(name, sizeof name);
    if (ev.kind == SourceKind::IoRead) t.str("IO Bytes Read");
    else if (ev.kind == SourceKind::IoWrite) t.str("IO Bytes Written");
    else if (ev.kind == SourceKind::MemAlloc) t.str("Bytes Allocated");
    else if (ev.kind == SourceKind::MemFree) t.str("Bytes Freed");
    else t.str(ev.name);
    if (isRealMetric(ev)) t.str(" (sec)");
    m.name = name;
    m.description = name;
    m.flags.val_fmt = isRealMetric(ev) ? 2 : 1;
    m.period = ev.frequency || ev.member ? 1 : ev.value;  // a member's values are its counts
    m.is_frequency_metric = ev.frequency;
    m.format = "";
    m.formula = "";
    e.metric(m);
  }
  for (unsigned i = nCpu; i < nMetrics; ++i) {
    const gpu::MetricInfo& g = gpu::kMetrics[i - nCpu];
    enc::MetricDescRec m;
    char formula[64];
    Text f(formula, sizeof formula);
    gpu::formulaText(g, nCpu, f);
    m.name = g.name;
    m.description = g.description;
    m.flags.val_fmt = g.valFmt;
    m.flags.show = g.show;
    m.flags.show_percent = g.showPercent;
    m.flags.move2proc = g.move2proc;
    m.period = 1;
    m.formula = formula;
    m.format = g.format;
    e.metric(m);
  }
  e.idtuple_dictionary();

  auto has = [&](CctNode* n, unsigned i) { return (i < nCpu ? i < nSlots : true) && valueOf(n, i, nCpu) != 0; };
  uint64_t nvalues = 0;
  uint32_t nnodes = 0;
  for (CctNode* n = cct.first(); n; n = n->next) {
    if (!n->hasValue) continue;
    ++nnodes;
    for (unsigned i = 0; i < nMetrics; ++i) nvalues += has(n, i);
  }
  enc::IdRec ids[8];
  uint16_t nids = spec.nids < 8 ? spec.nids : 8;
  for (uint16_t i = 0; i < nids; ++i) ids[i] = {spec.ids[i].kind, spec.ids[i].physical, spec.ids[i].logical};
  e.sparse_begin(ids, nids, nvalues, nnodes);
  for (CctNode* n = cct.first(); n; n = n->next) {
    if (!n->hasValue) continue;
    for (unsigned i = 0; i < nMetrics; ++i) {
      if (!has(n, i)) continue;
      double v = valueOf(n, i, nCpu);
      if (isRealValue(i, nCpu)) e.sparse_value_real(v, uint16_t(i));
      else e.sparse_value(uint64_t(v), uint16_t(i));
    }
  }
  for (CctNode* n = cct.first(); n; n = n->next) {
    if (!n->hasValue) continue;
    uint64_t k = 0;
    for (unsigned i = 0; i < nMetrics; ++i) k += has(n, i);
    e.sparse_node_counted(n->id, k);
  }
  e.finish();
  s.flush();
  return e.ok() && !s.failed;
}

}  // namespace hpc::rt
