// Offline writer: feeds the model through the runtime's encoder (encode.hpp), so the
// two produce the same bytes.
#include <limits>
#include <unordered_map>

#include "common/file.hpp"
#include "formats/hpcrun/encode.hpp"
#include "formats/hpcrun/hpcrun.hpp"

namespace hpc::hpcrun {
namespace {

bool append(void* ctx, const void* p, size_t n) {
  auto* out = static_cast<std::vector<uint8_t>*>(ctx);
  auto* c = static_cast<const uint8_t*>(p);
  out->insert(out->end(), c, c + n);
  return true;
}

enc::Str s(const std::string& x) { return {x.data(), static_cast<uint32_t>(x.size())}; }

Status too_long(const std::string& what) {
  return Status::error("cannot encode profile: " + what + " is too long for the format");
}

const char* describe(enc::ProfileEncoder::Error e) {
  switch (e) {
    case enc::ProfileEncoder::Error::None: return "no error";
    case enc::ProfileEncoder::Error::SinkFailed: return "the output failed";
    case enc::ProfileEncoder::Error::OutOfOrder: return "sections out of order";
    case enc::ProfileEncoder::Error::CountMismatch: return "an item count does not match";
    case enc::ProfileEncoder::Error::BadValueIndex: return "a value index is out of order";
    case enc::ProfileEncoder::Error::BadArgument: return "a malformed argument";
  }
  return "unknown error";
}

// The node order of the sparse value table; every node with values exactly once.
Expected<std::vector<size_t>> value_order(const Profile& p) {
  std::vector<size_t> order;
  if (p.value_order.empty()) {
    for (size_t i = 0; i < p.nodes.size(); ++i)
      if (!p.nodes[i].values.empty()) order.push_back(i);
    return order;
  }
  std::unordered_map<uint32_t, size_t> pos;
  for (size_t i = 0; i < p.nodes.size(); ++i)
    if (!pos.emplace(p.nodes[i].id, i).second)
      return Status::error("cannot encode profile: duplicate cct node id " +
                           std::to_string(p.nodes[i].id));
  std::vector<bool> listed(p.nodes.size());
  for (uint32_t id : p.value_order) {
    auto it = pos.find(id);
    if (it == pos.end() || listed[it->second])
      return Status::error("cannot encode profile: value_order names node " + std::to_string(id) +
                           " which is unknown or listed twice");
    listed[it->second] = true;
    order.push_back(it->second);
  }
  for (size_t i = 0; i < p.nodes.size(); ++i)
    if (!listed[i] && !p.nodes[i].values.empty())
      return Status::error("cannot encode profile: node " + std::to_string(p.nodes[i].id) +
                           " has values but is missing from value_order");
  return order;
}

}  // namespace

Expected<std::vector<uint8_t>> encode_profile(const Profile& p) {
  constexpr uint64_t kMax32 = std::numeric_limits<uint32_t>::max();
  if (p.version.size() != 5) return Status::error("cannot encode profile: version must be 5 characters");
  if (p.header.size() > kMax32) return too_long("the header");
  if (p.load_modules.size() > kMax32) return too_long("the load map");
  if (p.metrics.size() > kMax32) return too_long("the metric table");
  if (p.id_kinds.size() > 0xffff) return too_long("the id-tuple dictionary");
  if (p.id_tuple.size() > 0xffff) return too_long("the id tuple");
  auto fits = [&](const std::string& x) { return x.size() <= kMax32; };
  for (auto& nv : p.header)
    if (!fits(nv.name) || !fits(nv.value)) return too_long("a header string");
  for (auto& lm : p.load_modules)
    if (!fits(lm.name)) return too_long("a load module name");
  for (auto& m : p.metrics)
    if (!fits(m.name) || !fits(m.description) || !fits(m.formula) || !fits(m.format))
      return too_long("a metric string");
  for (auto& k : p.id_kinds)
    if (!fits(k.name)) return too_long("an id kind name");
  HPC_ASSIGN_OR_RETURN(std::vector<size_t> order, value_order(p));
  if (order.size() > kMax32) return too_long("the sparse node table");

  std::vector<uint8_t> out;
  enc::ProfileEncoder e(enc::Sink{&out, &append});

  std::vector<enc::NvPair> nvs;
  nvs.reserve(p.header.size());
  for (auto& nv : p.header) nvs.push_back({s(nv.name), s(nv.value)});
  e.header(nvs.data(), static_cast<uint32_t>(nvs.size()), s(p.version));

  e.loadmap_begin(static_cast<uint32_t>(p.load_modules.size()));
  for (auto& lm : p.load_modules) e.loadmap_entry({lm.id, s(lm.name), lm.flags});

  e.cct_begin(p.nodes.size());
  for (auto& n : p.nodes) e.cct_node({n.id, n.parent_id, n.lm_id, n.lm_ip, n.unwound});

  e.metrics_begin(static_cast<uint32_t>(p.metrics.size()));
  for (auto& m : p.metrics) {
    enc::MetricDescRec r;
    r.name = s(m.name);
    r.description = s(m.description);
    r.flags = {m.flags.type, m.flags.val_type, m.flags.val_fmt, m.flags.move2proc,
               m.flags.partner, m.flags.show, m.flags.show_percent, m.flags.unused};
    r.period = m.period;
    r.formula = s(m.formula);
    r.format = s(m.format);
    r.is_frequency_metric = m.is_frequency_metric;
    r.is_multiplexed = m.is_multiplexed;
    r.threshold_mean = m.threshold_mean;
    r.num_samples = m.num_samples;
    e.metric(r);
  }

  std::vector<enc::IdKindRec> kinds;
  for (auto& k : p.id_kinds) kinds.push_back({k.kind, s(k.name)});
  e.idtuple_dictionary(kinds.data(), static_cast<uint16_t>(kinds.size()));

  std::vector<enc::IdRec> ids;
  for (auto& id : p.id_tuple) ids.push_back({id.raw_kind, id.physical, id.logical});
  uint64_t nvals = 0;
  for (size_t i : order) nvals += p.nodes[i].values.size();
  e.sparse_begin(ids.data(), static_cast<uint16_t>(ids.size()), nvals,
                 static_cast<uint32_t>(order.size()));
  for (size_t i : order)
    for (auto& v : p.nodes[i].values) e.sparse_value(v.bits, v.metric_id);
  for (size_t i : order) e.sparse_node_counted(p.nodes[i].id, p.nodes[i].values.size());
  e.finish();
  if (!e.ok()) return Status::error(std::string("cannot encode profile: ") + describe(e.error()));
  return out;
}

Status write_profile(const Profile& p, const std::filesystem::path& path) {
  HPC_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, encode_profile(p));
  return write_file_atomically(path, bytes);
}

}  // namespace hpc::hpcrun
