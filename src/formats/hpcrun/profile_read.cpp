// Reads a sparse .hpcrun profile: the footer at the end gives each section's
// [start, end); each section is parsed within its bounds and must be consumed exactly.
#include <atomic>
#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "common/bytes.hpp"
#include "common/file.hpp"
#include "formats/hpcrun/encode.hpp"
#include "formats/hpcrun/hpcrun.hpp"

namespace hpc::hpcrun {
namespace {

// A cursor confined to one section: reads past `end` fail with the file offset.
class SectionCursor {
public:
  SectionCursor(const ByteView& v, uint64_t start, uint64_t end, const char* section)
      : v_(&v), off_(start), end_(end), section_(section) {}

  uint64_t offset() const { return off_; }
  uint64_t remaining() const { return end_ - off_; }

  Status need(uint64_t n, std::string_view what) const {
    if (n > remaining())
      return v_->error(off_, std::string("expected ") + std::string(what) + " (" + std::to_string(n) +
                                " bytes) but the " + section_ + " section ends at " + hex(end_));
    return Status();
  }
  template <typename T> Expected<T> be(std::string_view what) {
    HPC_RETURN_IF_ERROR(need(sizeof(T), what));
    T v = v_->load<T, std::endian::big>(off_);
    off_ += sizeof(T);
    return v;
  }
  template <typename T> Expected<T> le(std::string_view what) {
    HPC_RETURN_IF_ERROR(need(sizeof(T), what));
    T v = v_->load<T, std::endian::little>(off_);
    off_ += sizeof(T);
    return v;
  }
  Expected<std::string> str(std::string_view what) {
    HPC_ASSIGN_OR_RETURN(uint32_t len, be<uint32_t>(std::string(what) + " length"));
    HPC_RETURN_IF_ERROR(need(len, what));
    std::string s(reinterpret_cast<const char*>(v_->bytes().data() + off_), len);
    off_ += len;
    return s;
  }
  // A count of items each at least `min_size` bytes must fit in what is left.
  Status check_count(uint64_t count, uint64_t min_size, std::string_view what) const {
    if (count > remaining() / min_size)
      return v_->error(off_, std::string(what) + " count " + std::to_string(count) +
                                " does not fit in the " + std::to_string(remaining()) +
                                " bytes left of the " + section_ + " section");
    return Status();
  }
  Status expect_end() const {
    if (off_ != end_)
      return v_->error(off_, std::string("expected the end of the ") + section_ + " section (at " +
                                hex(end_) + "), found " + std::to_string(end_ - off_) +
                                " more bytes");
    return Status();
  }
  Status error(std::string_view what) const { return v_->error(off_, what); }

private:
  const ByteView* v_;
  uint64_t off_, end_;
  const char* section_;
};

struct Footer {
  uint64_t start[6], end[6];
  uint64_t footer_start;
};
enum { kHdr, kLoadMap, kCct, kMetrics, kIdDict, kSparse };
const char* const kSectionNames[6] = {"header", "load map", "cct", "metric table",
                                      "id-tuple dictionary", "sparse values"};

Expected<Footer> read_footer(const ByteView& v) {
  constexpr uint64_t kMin = 24 + enc::kFooterSize;
  if (v.size() < kMin)
    return v.error(0, "expected a profile of at least " + std::to_string(kMin) +
                          " bytes (header and footer), file has " + std::to_string(v.size()));
  const uint64_t fo = v.size() - enc::kFooterSize;
  Footer f;
  for (int i = 0; i < 6; ++i) {
    f.start[i] = v.load<uint64_t, std::endian::big>(fo + 16 * i);
    f.end[i] = v.load<uint64_t, std::endian::big>(fo + 16 * i + 8);
  }
  f.footer_start = v.load<uint64_t, std::endian::big>(fo + 96);
  uint64_t magic = v.load<uint64_t, std::endian::big>(fo + 104);
  if (magic != enc::kFooterMagic)
    return v.error(fo + 104, "expected the footer magic \"HPCRUNsm\" (truncated or not a "
                             "sparse profile), found " + hex(magic));
  if (f.footer_start != fo)
    return v.error(fo + 96, "footer start " + hex(f.footer_start) + " does not match the footer's "
                            "position " + hex(fo));
  for (int i = 0; i < 6; ++i)
    if (f.start[i] > f.end[i] || f.end[i] > fo)
      return v.error(fo + 16 * i, std::string("bad ") + kSectionNames[i] + " section bounds [" +
                                      hex(f.start[i]) + ", " + hex(f.end[i]) +
                                      ") for a footer at " + hex(fo));
  if (f.start[kHdr] != 0) return v.error(fo, "expected the header section to start at 0");
  return f;
}

Status read_header(const ByteView& v, const Footer& f, Profile& p) {
  SectionCursor c(v, f.start[kHdr], f.end[kHdr], kSectionNames[kHdr]);
  HPC_RETURN_IF_ERROR(c.need(24, "the 24-byte magic/version/endian"));
  const uint8_t* b = v.bytes().data();
  if (std::memcmp(b, enc::kProfileMagic, 18) != 0)
    return v.error(0, "expected magic \"HPCRUN-profile____\"");
  p.version.assign(reinterpret_cast<const char*>(b) + 18, 5);
  if (p.version.substr(0, 2) != "04")
    return v.error(18, "unsupported profile version \"" + p.version +
                           "\" (only the sparse format 04.xx is read)");
  if (b[23] != 'b') return v.error(23, "expected endian marker 'b'");
  SectionCursor h(v, 24, f.end[kHdr], kSectionNames[kHdr]);
  HPC_ASSIGN_OR_RETURN(uint32_t n, h.be<uint32_t>("name/value pair count"));
  HPC_RETURN_IF_ERROR(h.check_count(n, 8, "name/value pair"));
  p.header.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    NvPair nv;
    HPC_ASSIGN_OR_RETURN(nv.name, h.str("header name"));
    HPC_ASSIGN_OR_RETURN(nv.value, h.str("header value"));
    p.header.push_back(std::move(nv));
  }
  return h.expect_end();
}

Status read_loadmap(const ByteView& v, const Footer& f, Profile& p) {
  SectionCursor c(v, f.start[kLoadMap], f.end[kLoadMap], kSectionNames[kLoadMap]);
  HPC_ASSIGN_OR_RETURN(uint32_t n, c.be<uint32_t>("load module count"));
  HPC_RETURN_IF_ERROR(c.check_count(n, 14, "load module"));
  p.load_modules.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    LoadModule lm;
    HPC_ASSIGN_OR_RETURN(lm.id, c.be<uint16_t>("load module id"));
    HPC_ASSIGN_OR_RETURN(lm.name, c.str("load module name"));
    HPC_ASSIGN_OR_RETURN(lm.flags, c.be<uint64_t>("load module flags"));
    p.load_modules.push_back(std::move(lm));
  }
  return c.expect_end();
}

Status read_cct(const ByteView& v, const Footer& f, Profile& p) {
  SectionCursor c(v, f.start[kCct], f.end[kCct], kSectionNames[kCct]);
  HPC_ASSIGN_OR_RETURN(uint64_t n, c.be<uint64_t>("cct node count"));
  HPC_RETURN_IF_ERROR(c.check_count(n, 19, "cct node"));
  // check_count bounds the whole array, so the fixed-size nodes are loaded unchecked.
  p.nodes.resize(n);
  uint64_t at = c.offset();
  for (CctNode& node : p.nodes) {
    node.id = v.load<uint32_t, std::endian::big>(at);
    node.parent_id = v.load<uint32_t, std::endian::big>(at + 4);
    node.lm_id = v.load<uint16_t, std::endian::big>(at + 8);
    node.lm_ip = v.load<uint64_t, std::endian::big>(at + 10);
    node.unwound = v.load<uint8_t, std::endian::big>(at + 18);
    at += 19;
  }
  if (at != f.end[kCct])
    return v.error(at, std::string("expected the end of the cct section (at ") + hex(f.end[kCct]) +
                           "), found " + std::to_string(f.end[kCct] - at) + " more bytes");
  return Status();
}

Status read_metrics(const ByteView& v, const Footer& f, Profile& p) {
  SectionCursor c(v, f.start[kMetrics], f.end[kMetrics], kSectionNames[kMetrics]);
  HPC_ASSIGN_OR_RETURN(uint32_t n, c.be<uint32_t>("metric count"));
  HPC_RETURN_IF_ERROR(c.check_count(n, 60, "metric description"));
  p.metrics.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    MetricDesc m;
    HPC_ASSIGN_OR_RETURN(m.name, c.str("metric name"));
    HPC_ASSIGN_OR_RETURN(m.description, c.str("metric description"));
    HPC_ASSIGN_OR_RETURN(m.flags.type, c.be<uint8_t>("metric type"));
    HPC_ASSIGN_OR_RETURN(m.flags.val_type, c.be<uint8_t>("metric value type"));
    HPC_ASSIGN_OR_RETURN(m.flags.val_fmt, c.be<uint8_t>("metric value format"));
    HPC_ASSIGN_OR_RETURN(m.flags.move2proc, c.be<uint8_t>("metric move2proc"));
    HPC_ASSIGN_OR_RETURN(m.flags.partner, c.le<uint16_t>("metric partner"));
    HPC_ASSIGN_OR_RETURN(m.flags.show, c.be<uint8_t>("metric show"));
    HPC_ASSIGN_OR_RETURN(m.flags.show_percent, c.be<uint8_t>("metric show-percent"));
    HPC_ASSIGN_OR_RETURN(m.flags.unused, c.le<uint64_t>("metric flags padding"));
    HPC_ASSIGN_OR_RETURN(m.period, c.be<uint64_t>("metric period"));
    HPC_ASSIGN_OR_RETURN(m.formula, c.str("metric formula"));
    HPC_ASSIGN_OR_RETURN(m.format, c.str("metric format"));
    HPC_ASSIGN_OR_RETURN(m.is_frequency_metric, c.be<uint16_t>("metric is-frequency"));
    HPC_ASSIGN_OR_RETURN(m.is_multiplexed, c.be<uint16_t>("metric is-multiplexed"));
    HPC_ASSIGN_OR_RETURN(m.threshold_mean, c.be<double>("metric threshold mean"));
    HPC_ASSIGN_OR_RETURN(m.num_samples, c.be<uint64_t>("metric sample count"));
    p.metrics.push_back(std::move(m));
  }
  return c.expect_end();
}

Status read_id_dictionary(const ByteView& v, const Footer& f, Profile& p) {
  SectionCursor c(v, f.start[kIdDict], f.end[kIdDict], kSectionNames[kIdDict]);
  HPC_ASSIGN_OR_RETURN(uint16_t n, c.be<uint16_t>("id-tuple dictionary count"));
  HPC_RETURN_IF_ERROR(c.check_count(n, 6, "id-tuple dictionary entry"));
  p.id_kinds.reserve(n);
  for (uint16_t i = 0; i < n; ++i) {
    IdKindName k;
    HPC_ASSIGN_OR_RETURN(k.kind, c.be<uint16_t>("id kind"));
    HPC_ASSIGN_OR_RETURN(k.name, c.str("id kind name"));
    p.id_kinds.push_back(std::move(k));
  }
  return c.expect_end();
}

// The values in file order, with their node ids, for a reader that holds the tree already.
Status read_flat_values(const ByteView& v, SectionCursor& c, uint64_t values_at, uint64_t nvals,
                        uint32_t nnodes, Profile& p) {
  p.flat_values.reserve(nvals);
  uint64_t last = 0;
  uint32_t id = 0;
  for (uint32_t i = 0; i <= nnodes; ++i) {
    // (nnodes + 1) 12-byte entries fill the rest of the section (checked by the caller).
    const uint64_t at = c.offset() + uint64_t(i) * 12;
    uint32_t next = v.load<uint32_t, std::endian::big>(at);
    uint64_t first = v.load<uint64_t, std::endian::big>(at + 4);
    if (first < last || first > nvals)
      return v.error(at + 4, "value index " + std::to_string(first) + " out of order or beyond " +
                                 std::to_string(nvals) + " values");
    if (i == nnodes && (next != enc::kLastNodeEnd || first != nvals))
      return v.error(at, "expected the end marker \"end!\" with index " + std::to_string(nvals));
    // Values before the first group belong to no node, as in the full reader.
    for (uint64_t k = i ? last : first; k < first; ++k) {
      NodeValue& nv = p.flat_values.emplace_back();
      const uint64_t va = values_at + k * 10;
      nv.node_id = id;
      nv.value = {v.load<uint16_t, std::endian::big>(va + 8), v.load<uint64_t, std::endian::big>(va)};
      if (nv.value.metric_id >= p.metrics.size())
        return v.error(va + 8, "metric id " + std::to_string(nv.value.metric_id) + " but only " +
                                   std::to_string(p.metrics.size()) + " metrics");
    }
    last = first;
    id = next;
  }
  return Status();
}

Status read_sparse_values(const ByteView& v, const Footer& f, SectionCursor& c, Profile& p, ReadParts parts);

// values_error: where an error after the id tuple goes (the values alone unreadable), or null.
Status read_sparse(const ByteView& v, const Footer& f, Profile& p, ReadParts parts, Status* values_error = nullptr) {
  SectionCursor c(v, f.start[kSparse], f.end[kSparse], kSectionNames[kSparse]);
  HPC_ASSIGN_OR_RETURN(uint16_t nids, c.be<uint16_t>("id tuple length"));
  HPC_RETURN_IF_ERROR(c.check_count(nids, 18, "id tuple entry"));
  p.id_tuple.reserve(nids);
  for (uint16_t i = 0; i < nids; ++i) {
    IdEntry e;
    HPC_ASSIGN_OR_RETURN(e.raw_kind, c.be<uint16_t>("id tuple kind"));
    HPC_ASSIGN_OR_RETURN(e.physical, c.be<uint64_t>("id tuple physical index"));
    HPC_ASSIGN_OR_RETURN(e.logical, c.be<uint64_t>("id tuple logical index"));
    p.id_tuple.push_back(e);
  }
  if (!parts.values) return Status();
  if (values_error) {
    p.flat_values.clear();
    *values_error = read_sparse_values(v, f, c, p, parts);
    if (!values_error->ok()) p.flat_values.clear();
    return Status();
  }
  return read_sparse_values(v, f, c, p, parts);
}

Status read_sparse_values(const ByteView& v, const Footer& f, SectionCursor& c, Profile& p, ReadParts parts) {
  HPC_ASSIGN_OR_RETURN(uint64_t nvals, c.be<uint64_t>("non-zero value count"));
  HPC_ASSIGN_OR_RETURN(uint32_t nnodes, c.be<uint32_t>("non-zero node count"));
  HPC_RETURN_IF_ERROR(c.check_count(nvals, 10, "value"));
  // Values, then (nnodes + 1) index entries, the last being the end marker.
  if (c.remaining() - nvals * 10 != (uint64_t(nnodes) + 1) * 12)
    return c.error("value count " + std::to_string(nvals) + " and node count " +
                   std::to_string(nnodes) + " do not match the section's " +
                   std::to_string(c.remaining()) + " remaining bytes");
  const uint64_t values_at = c.offset();
  c = SectionCursor(v, values_at + nvals * 10, f.end[kSparse], kSectionNames[kSparse]);
  if (!parts.nodes) return read_flat_values(v, c, values_at, nvals, nnodes, p);

  std::unordered_map<uint32_t, size_t> pos;
  pos.reserve(p.nodes.size());
  for (size_t i = 0; i < p.nodes.size(); ++i)
    if (!pos.emplace(p.nodes[i].id, i).second)
      return v.error(f.start[kCct], "duplicate cct node id " + std::to_string(p.nodes[i].id));

  std::vector<std::pair<size_t, uint64_t>> index;  // (node position, first value)
  index.reserve(nnodes);
  std::vector<uint32_t> order;
  order.reserve(nnodes);
  std::vector<bool> seen(p.nodes.size());
  uint64_t last = 0;
  for (uint32_t i = 0; i <= nnodes; ++i) {
    uint64_t at = c.offset();
    HPC_ASSIGN_OR_RETURN(uint32_t id, c.be<uint32_t>("cct node id of a value group"));
    HPC_ASSIGN_OR_RETURN(uint64_t first, c.be<uint64_t>("first value index"));
    if (first < last || first > nvals)
      return v.error(at + 4, "value index " + std::to_string(first) + " out of order or beyond " +
                                 std::to_string(nvals) + " values");
    last = first;
    if (i == nnodes) {
      if (id != enc::kLastNodeEnd || first != nvals)
        return v.error(at, "expected the end marker \"end!\" with index " + std::to_string(nvals));
      break;
    }
    auto it = pos.find(id);
    if (it == pos.end()) return v.error(at, "values for unknown cct node id " + std::to_string(id));
    if (seen[it->second]) return v.error(at, "values for cct node " + std::to_string(id) + " twice");
    seen[it->second] = true;
    index.emplace_back(it->second, first);
    order.push_back(id);
  }
  for (size_t i = 0; i < index.size(); ++i) {
    uint64_t from = index[i].second, to = i + 1 < index.size() ? index[i + 1].second : nvals;
    auto& vals = p.nodes[index[i].first].values;
    vals.reserve(to - from);
    for (uint64_t k = from; k < to; ++k) {
      uint64_t at = values_at + k * 10;
      MetricValue mv{v.load<uint16_t, std::endian::big>(at + 8), v.load<uint64_t, std::endian::big>(at)};
      if (mv.metric_id >= p.metrics.size())
        return v.error(at + 8, "metric id " + std::to_string(mv.metric_id) + " but only " +
                                   std::to_string(p.metrics.size()) + " metrics");
      vals.push_back(mv);
    }
  }
  // Keep the order only where it differs from the default (nodes with values, in order).
  std::vector<uint32_t> dflt;
  for (auto& n : p.nodes)
    if (!n.values.empty()) dflt.push_back(n.id);
  if (dflt != order) p.value_order = std::move(order);
  return c.expect_end();
}

}  // namespace

namespace {
// SectionReuse's generations: one count for every section and thread, so no two contents share one.
std::atomic<uint64_t> sectionGenerations{0};
}  // namespace

Status parse_profile_flat(std::span<const uint8_t> bytes, const std::string& name, Profile& p, CctView& cct,
                          Status& values_status, SectionReuse* reuse) {
  ByteView v(bytes, name);
  HPC_ASSIGN_OR_RETURN(Footer f, read_footer(v));
  // A section kept from the last file where its bytes, lying within this file, are the same
  // (else it is read, and refused, as usual).
  auto sectionOf = [&](int k) {
    return f.start[k] <= f.end[k] && f.end[k] <= bytes.size() ? bytes.subspan(f.start[k], f.end[k] - f.start[k])
                                                               : std::span<const uint8_t>();
  };
  auto same = [&](const SectionReuse::Kept& kept, std::span<const uint8_t> now) {
    return kept.generation != 0 && !now.empty() && kept.section.size() == now.size() &&
           std::memcmp(kept.section.data(), now.data(), now.size()) == 0;
  };
  // Read anew (its vector cleared below, its generation 0 from then on, so that a file that
  // fails before the section is read leaves nothing to keep), then a new generation.
  auto readAnew = [&](SectionReuse::Kept* kept, std::span<const uint8_t> now, auto&& read) -> Status {
    HPC_RETURN_IF_ERROR(read());
    if (kept) {
      kept->section.assign(now.begin(), now.end());
      kept->generation = sectionGenerations.fetch_add(1, std::memory_order_relaxed) + 1;
    }
    return Status();
  };
  const std::span<const uint8_t> lmBytes = sectionOf(kLoadMap), metricBytes = sectionOf(kMetrics);
  const bool keepLoadMap = reuse && same(reuse->loadMap, lmBytes);
  const bool keepMetrics = reuse && same(reuse->metrics, metricBytes);
  p.version.clear();
  p.header.clear();
  if (!keepLoadMap) {
    p.load_modules.clear();
    if (reuse) reuse->loadMap.generation = 0;
  }
  p.nodes.clear();
  if (!keepMetrics) {
    p.metrics.clear();
    if (reuse) reuse->metrics.generation = 0;
  }
  p.id_kinds.clear();
  p.id_tuple.clear();
  p.value_order.clear();
  p.flat_values.clear();
  HPC_RETURN_IF_ERROR(read_header(v, f, p));
  if (!keepLoadMap)
    HPC_RETURN_IF_ERROR(readAnew(reuse ? &reuse->loadMap : nullptr, lmBytes, [&] { return read_loadmap(v, f, p); }));
  // The cct section as read_cct checks it, left undecoded.
  SectionCursor c(v, f.start[kCct], f.end[kCct], kSectionNames[kCct]);
  HPC_ASSIGN_OR_RETURN(uint64_t n, c.be<uint64_t>("cct node count"));
  HPC_RETURN_IF_ERROR(c.check_count(n, 19, "cct node"));
  const uint64_t at = c.offset(), end = at + n * 19;
  if (end != f.end[kCct])
    return v.error(end, std::string("expected the end of the cct section (at ") + hex(f.end[kCct]) +
                            "), found " + std::to_string(f.end[kCct] - end) + " more bytes");
  cct.data = bytes.data() + at;
  cct.count = n;
  if (!keepMetrics)
    HPC_RETURN_IF_ERROR(readAnew(reuse ? &reuse->metrics : nullptr, metricBytes, [&] { return read_metrics(v, f, p); }));
  HPC_RETURN_IF_ERROR(read_id_dictionary(v, f, p));
  return read_sparse(v, f, p, {.nodes = false, .values = true}, &values_status);
}

Expected<Profile> parse_profile(std::span<const uint8_t> bytes, const std::string& name,
                                ReadParts parts) {
  ByteView v(bytes, name);
  HPC_ASSIGN_OR_RETURN(Footer f, read_footer(v));
  Profile p;
  HPC_RETURN_IF_ERROR(read_header(v, f, p));
  HPC_RETURN_IF_ERROR(read_loadmap(v, f, p));
  if (parts.nodes) HPC_RETURN_IF_ERROR(read_cct(v, f, p));
  HPC_RETURN_IF_ERROR(read_metrics(v, f, p));
  HPC_RETURN_IF_ERROR(read_id_dictionary(v, f, p));
  HPC_RETURN_IF_ERROR(read_sparse(v, f, p, parts));
  return p;
}

Expected<Profile> read_profile(const std::filesystem::path& path, ReadParts parts) {
  if (parts.nodes) {
    // The tree is most of the file: read it whole into a buffer each thread keeps (no page
    // faults, no unmapping); without the tree a mapping touches only the small sections.
    thread_local std::vector<uint8_t> buffer;
    HPC_RETURN_IF_ERROR(read_file_into(path, buffer));
    return parse_profile(buffer, path.string(), parts);
  }
  HPC_ASSIGN_OR_RETURN(MappedFile f, MappedFile::open(path));
  return parse_profile(f.bytes(), f.path(), parts);
}

bool MetricDesc::operator==(const MetricDesc& o) const {
  return name == o.name && description == o.description && flags == o.flags &&
         period == o.period && formula == o.formula && format == o.format &&
         is_frequency_metric == o.is_frequency_metric && is_multiplexed == o.is_multiplexed &&
         std::bit_cast<uint64_t>(threshold_mean) == std::bit_cast<uint64_t>(o.threshold_mean) &&
         num_samples == o.num_samples;
}

double MetricValue::as_real() const { return std::bit_cast<double>(bits); }

const std::string* Profile::header_value(std::string_view name) const {
  for (auto& nv : header)
    if (nv.name == name) return &nv.value;
  return nullptr;
}

FileKind sniff(std::span<const uint8_t> b) {
  if (b.size() >= 18 && std::memcmp(b.data(), enc::kProfileMagic, 18) == 0) return FileKind::Profile;
  if (b.size() >= 18 && std::memcmp(b.data(), enc::kTraceMagic, 18) == 0) return FileKind::Trace;
  return FileKind::Unknown;
}

}  // namespace hpc::hpcrun
