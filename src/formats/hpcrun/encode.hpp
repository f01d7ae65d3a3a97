// Allocation-free streaming encoder for .hpcrun (sparse profile, version 04.00) and
// .hpctrace (01.01) files. Header-only, freestanding: no malloc, exceptions, iostreams
// or std:: library types, so the measurement runtime can call it from inside the
// measured process (compile with -fno-exceptions); the offline writer uses it too, so
// both produce the same bytes.
//
// Usage (profile). Sections must come in this order, each with the count it declared:
//
//   hpc::hpcrun::enc::Sink sink{&my_buffer, &my_write};  // write() returns false on failure
//   hpc::hpcrun::enc::ProfileEncoder e(sink);
//   e.header(pairs, npairs);                      // NvPair{Str name, Str value}[]
//   e.loadmap_begin(nlm);    e.loadmap_entry({id, name, flags}) x nlm
//   e.cct_begin(nnodes);     e.cct_node({id, parent, lm_id, lm_ip, unwound}) x nnodes
//   e.metrics_begin(nmet);   e.metric(desc) x nmet     (metric id = position, from 0)
//   e.idtuple_dictionary();                       // the standard kind names
//   e.sparse_begin(ids, nids, nvalues, nnz_nodes);
//   e.sparse_value(bits, metric_id) x nvalues     // grouped by node, nodes in any order
//   e.sparse_node(cct_id, first_value_index) x nnz_nodes   // same node order, indices
//                                                 // nondecreasing, into the values above
//     (or e.sparse_node_counted(cct_id, values_of_this_node): the encoder sums the indices)
//   e.finish();                                   // end marker, padding, footer
//   if (!e.ok()) ... e.error() says why (the sink failed, or a call out of order/count).
//
// A node's values are those from its first_value_index up to the next node's (or to
// nvalues for the last). Typical runtime use walks its CCT twice in the same order:
// once writing each node's non-zero values, once writing the (id, index) pairs.
// Every call returns ok(); after the first failure, calls do nothing.
//
// Usage (trace): write_trace_header(sink, flags), then write_trace_record(sink, flags,
// {time_ns, cct_id, metric_id}) per sample; or encode_trace_record() into a caller's
// buffer (at most kTraceRecordMax bytes) for batched writes.
//
// Format quirks reproduced on purpose: all integers big-endian except the 16-byte
// metric flags, which the reference writes as raw x86 memory (partner little-endian);
// strings are a 4-byte length and the bytes, no NUL; every section and the footer start
// at a multiple of kSectionAlign, the gaps zero-filled.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hpc::hpcrun::enc {

struct Sink {
  void* ctx;
  bool (*write)(void* ctx, const void* data, size_t n);
};

// A byte string that need not be NUL-terminated.
struct Str {
  const char* data = nullptr;
  uint32_t size = 0;
  constexpr Str() = default;
  constexpr Str(const char* d, uint32_t n) : data(d), size(n) {}
  constexpr Str(const char* cstr) : data(cstr), size(0) {  // NOLINT: implicit on purpose
    if (cstr)
      while (cstr[size]) ++size;
  }
};

struct NvPair {
  Str name, value;
};
struct LoadModuleRec {
  uint16_t id;
  Str name;
  uint64_t flags;  // 1 = LOADMAP_ENTRY_ANALYZE
};
struct MetricFlagsRec {
  uint8_t type = 1;      // 1 raw, 2 final, 3 derived
  uint8_t val_type = 0;  // 0 unspecified, 1 inclusive, 2 exclusive
  uint8_t val_fmt = 2;   // 1 int, 2 real
  uint8_t move2proc = 0;
  uint16_t partner = 0;
  uint8_t show = 1;  // 0 hide, 1 show, 2 incl, 3 excl, 4 invisible
  uint8_t show_percent = 1;
  uint64_t unused = 0;  // written as raw bytes too (little-endian)
};
struct MetricDescRec {
  Str name, description;
  MetricFlagsRec flags;
  uint64_t period = 0;
  Str formula, format;
  uint16_t is_frequency_metric = 0;
  uint16_t is_multiplexed = 0;
  double threshold_mean = 0;
  uint64_t num_samples = 0;
};
struct CctNodeRec {
  uint32_t id;
  uint32_t parent_id;  // 0 for a root
  uint16_t lm_id;
  uint64_t lm_ip;
  uint8_t unwound;  // 1 when the path came from a stack unwind
};
// kind: low 14 bits the kind (0 SUMMARY .. 7 CORE), high 2 bits the interpretation.
struct IdRec {
  uint16_t kind;
  uint64_t physical;
  uint64_t logical;
};
struct IdKindRec {
  uint16_t kind;
  Str name;
};
struct TraceRecordRec {
  uint64_t time;    // nanoseconds
  uint32_t cct_id;
  uint32_t metric_id;  // written only with kTraceDataCentric
};

inline constexpr uint64_t kSectionAlign = 1024;
inline constexpr uint64_t kFooterSize = 14 * 8;
inline constexpr uint64_t kFooterMagic = 0x48504352554E736DULL;  // "HPCRUNsm"
inline constexpr uint32_t kLastNodeEnd = 0x656E6421;              // "end!"
inline constexpr char kProfileMagic[] = "HPCRUN-profile____";     // 18 bytes
inline constexpr char kProfileVersion[] = "04.00";
inline constexpr char kTraceMagic[] = "HPCRUN-trace______";
inline constexpr char kTraceVersion[] = "01.01";
inline constexpr uint64_t kTraceDataCentric = 1u << 0;
inline constexpr uint64_t kTraceLcaRecorded = 1u << 1;
inline constexpr uint64_t kTraceCallTrace = 1u << 2;
inline constexpr size_t kTraceHeaderSize = 32;
inline constexpr size_t kTraceRecordMax = 16;

inline constexpr IdKindRec kStandardIdKinds[8] = {
    {0, "SUMMARY"},   {1, "NODE"},       {2, "RANK"},      {3, "THREAD"},
    {4, "GPUDEVICE"}, {5, "GPUCONTEXT"}, {6, "GPUSTREAM"}, {7, "CORE"}};

namespace detail {
inline uint8_t* be(uint8_t* p, uint64_t v, int n) {
  for (int i = n - 1; i >= 0; --i) {
    p[i] = static_cast<uint8_t>(v);
    v >>= 8;
  }
  return p + n;
}
inline uint8_t* le(uint8_t* p, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) {
    p[i] = static_cast<uint8_t>(v);
    v >>= 8;
  }
  return p + n;
}
inline uint64_t double_bits(double d) { return __builtin_bit_cast(uint64_t, d); }
}  // namespace detail

// Trace records: 12 bytes, or 16 with kTraceDataCentric. Returns the size written.
inline size_t encode_trace_record(uint8_t* out, uint64_t flags, const TraceRecordRec& r) {
  uint8_t* p = detail::be(out, r.time, 8);
  p = detail::be(p, r.cct_id, 4);
  if (flags & kTraceDataCentric) p = detail::be(p, r.metric_id, 4);
  return static_cast<size_t>(p - out);
}
inline bool write_trace_header(Sink s, uint64_t flags) {
  uint8_t b[kTraceHeaderSize];
  for (int i = 0; i < 18; ++i) b[i] = static_cast<uint8_t>(kTraceMagic[i]);
  for (int i = 0; i < 5; ++i) b[18 + i] = static_cast<uint8_t>(kTraceVersion[i]);
  b[23] = 'b';
  detail::be(b + 24, flags, 8);
  return s.write(s.ctx, b, sizeof b);
}
inline bool write_trace_record(Sink s, uint64_t flags, const TraceRecordRec& r) {
  uint8_t b[kTraceRecordMax];
  return s.write(s.ctx, b, encode_trace_record(b, flags, r));
}

class ProfileEncoder {
public:
  enum class Error : uint8_t { None, SinkFailed, OutOfOrder, CountMismatch, BadValueIndex, BadArgument };

  explicit ProfileEncoder(Sink sink) : sink_(sink) {}
  ProfileEncoder(const ProfileEncoder&) = delete;
  ProfileEncoder& operator=(const ProfileEncoder&) = delete;

  bool ok() const { return err_ == Error::None; }
  Error error() const { return err_; }
  uint64_t position() const { return pos_; }

  // version: 5 characters; the reference writes "04.00".
  bool header(const NvPair* pairs, uint32_t n, Str version = kProfileVersion) {
    if (!enter(Sec::None, Sec::Header, 0)) return false;
    if (version.size != 5) return fail(Error::BadArgument);
    put(kProfileMagic, 18);
    put(version.data, 5);
    put("b", 1);
    u32(n);
    for (uint32_t i = 0; i < n; ++i) {
      str(pairs[i].name);
      str(pairs[i].value);
    }
    return ok();
  }

  bool loadmap_begin(uint32_t n) {
    if (!enter(Sec::Header, Sec::LoadMap, n)) return false;
    return u32(n);
  }
  bool loadmap_entry(const LoadModuleRec& lm) {
    if (!item(Sec::LoadMap)) return false;
    u16(lm.id);
    str(lm.name);
    return u64(lm.flags);
  }

  bool cct_begin(uint64_t n) {
    if (!enter(Sec::LoadMap, Sec::Cct, n)) return false;
    return u64(n);
  }
  bool cct_node(const CctNodeRec& c) {
    if (!item(Sec::Cct)) return false;
    uint8_t b[19];
    uint8_t* p = detail::be(b, c.id, 4);
    p = detail::be(p, c.parent_id, 4);
    p = detail::be(p, c.lm_id, 2);
    p = detail::be(p, c.lm_ip, 8);
    *p = c.unwound;
    return put(b, sizeof b);
  }

  bool metrics_begin(uint32_t n) {
    if (!enter(Sec::Cct, Sec::Metrics, n)) return false;
    return u32(n);
  }
  bool metric(const MetricDescRec& m) {
    if (!item(Sec::Metrics)) return false;
    str(m.name);
    str(m.description);
    uint8_t b[16 + 8];
    const MetricFlagsRec& f = m.flags;
    b[0] = f.type;
    b[1] = f.val_type;
    b[2] = f.val_fmt;
    b[3] = f.move2proc;
    detail::le(b + 4, f.partner, 2);
    b[6] = f.show;
    b[7] = f.show_percent;
    detail::le(b + 8, f.unused, 8);
    detail::be(b + 16, m.period, 8);
    put(b, sizeof b);
    str(m.formula);
    str(m.format);
    uint8_t t[20];
    uint8_t* p = detail::be(t, m.is_frequency_metric, 2);
    p = detail::be(p, m.is_multiplexed, 2);
    p = detail::be(p, detail::double_bits(m.threshold_mean), 8);
    detail::be(p, m.num_samples, 8);
    return put(t, sizeof t);
  }

  bool idtuple_dictionary(const IdKindRec* kinds = kStandardIdKinds, uint16_t n = 8) {
    if (!enter(Sec::Metrics, Sec::IdDict, 0)) return false;
    u16(n);
    for (uint16_t i = 0; i < n; ++i) {
      u16(kinds[i].kind);
      str(kinds[i].name);
    }
    return ok();
  }

  bool sparse_begin(const IdRec* ids, uint16_t nids, uint64_t num_values, uint32_t num_nodes) {
    if (!enter(Sec::IdDict, Sec::Sparse, num_values)) return false;
    u16(nids);
    for (uint16_t i = 0; i < nids; ++i) {
      uint8_t b[18];
      uint8_t* p = detail::be(b, ids[i].kind, 2);
      p = detail::be(p, ids[i].physical, 8);
      detail::be(p, ids[i].logical, 8);
      put(b, sizeof b);
    }
    u64(num_values);
    u32(num_nodes);
    num_values_ = num_values;
    nodes_left_ = num_nodes;
    last_index_ = next_index_ = 0;
    return ok();
  }
  bool sparse_value(uint64_t bits, uint16_t metric_id) {
    if (!item(Sec::Sparse)) return false;
    uint8_t b[10];
    detail::be(detail::be(b, bits, 8), metric_id, 2);
    return put(b, sizeof b);
  }
  bool sparse_value_real(double v, uint16_t metric_id) {
    return sparse_value(detail::double_bits(v), metric_id);
  }
  bool sparse_node(uint32_t cct_id, uint64_t first_value_index) {
    if (!ok()) return false;
    if (sec_ != Sec::Sparse) return fail(Error::OutOfOrder);
    if (left_ != 0 || nodes_left_ == 0) return fail(Error::CountMismatch);
    if (first_value_index < last_index_ || first_value_index > num_values_)
      return fail(Error::BadValueIndex);
    --nodes_left_;
    last_index_ = first_value_index;
    next_index_ = first_value_index;
    uint8_t b[12];
    detail::be(detail::be(b, cct_id, 4), first_value_index, 8);
    return put(b, sizeof b);
  }
  // Same, with the index taken as the running total of earlier nodes' value counts.
  bool sparse_node_counted(uint32_t cct_id, uint64_t num_values_of_node) {
    uint64_t first = next_index_;
    if (!sparse_node(cct_id, first)) return false;
    next_index_ = first + num_values_of_node;
    return true;
  }

  bool finish() {
    if (!ok()) return false;
    if (sec_ != Sec::Sparse) return fail(Error::OutOfOrder);
    if (left_ != 0 || nodes_left_ != 0) return fail(Error::CountMismatch);
    uint8_t b[12];
    detail::be(detail::be(b, kLastNodeEnd, 4), num_values_, 8);
    put(b, sizeof b);
    close_section();
    sec_ = Sec::Done;
    uint8_t f[kFooterSize];
    uint8_t* p = f;
    for (int i = 0; i < 12; ++i) p = detail::be(p, bounds_[i], 8);
    p = detail::be(p, pos_, 8);  // footer_start
    detail::be(p, kFooterMagic, 8);
    return put(f, sizeof f);
  }

private:
  // Footer order: hdr, loadmap, cct, metric table, id-tuple dictionary, sparse values.
  enum class Sec : uint8_t { None, Header, LoadMap, Cct, Metrics, IdDict, Sparse, Done };

  bool fail(Error e) {
    if (err_ == Error::None) err_ = e;
    return false;
  }
  bool put(const void* p, size_t n) {
    if (!ok()) return false;
    if (n && !sink_.write(sink_.ctx, p, n)) return fail(Error::SinkFailed);
    pos_ += n;
    return true;
  }
  bool u16(uint64_t v) { uint8_t b[2]; detail::be(b, v, 2); return put(b, 2); }
  bool u32(uint64_t v) { uint8_t b[4]; detail::be(b, v, 4); return put(b, 4); }
  bool u64(uint64_t v) { uint8_t b[8]; detail::be(b, v, 8); return put(b, 8); }
  bool str(Str s) { return u32(s.size) && put(s.data, s.size); }

  // Ends the open section, zero-pads to the alignment and opens the next.
  void close_section() {
    if (sec_ >= Sec::Header && sec_ <= Sec::Sparse) {
      bounds_[2 * (static_cast<int>(sec_) - 1) + 1] = pos_;
      static const uint8_t zeros[64] = {};
      while (ok() && pos_ % kSectionAlign) {
        uint64_t n = kSectionAlign - pos_ % kSectionAlign;
        put(zeros, n < sizeof zeros ? n : sizeof zeros);
      }
    }
  }
  bool enter(Sec expected, Sec next, uint64_t count) {
    if (!ok()) return false;
    if (sec_ != expected) return fail(Error::OutOfOrder);
    if (left_ != 0) return fail(Error::CountMismatch);
    close_section();
    sec_ = next;
    bounds_[2 * (static_cast<int>(next) - 1)] = pos_;
    left_ = count;
    return ok();
  }
  bool item(Sec in) {
    if (!ok()) return false;
    if (sec_ != in) return fail(Error::OutOfOrder);
    if (left_ == 0) return fail(Error::CountMismatch);
    --left_;
    return true;
  }

  Sink sink_;
  uint64_t pos_ = 0;
  uint64_t bounds_[12] = {};
  uint64_t left_ = 0;
  uint64_t num_values_ = 0;
  uint64_t last_index_ = 0;
  uint64_t next_index_ = 0;
  uint32_t nodes_left_ = 0;
  Sec sec_ = Sec::None;
  Error err_ = Error::None;
};

}  // namespace hpc::hpcrun::enc
