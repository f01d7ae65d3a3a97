// Readable printout of profiles and traces, for hpcdump.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ostream>
#include <unordered_map>

#include "common/file.hpp"
#include "formats/hpcrun/hpcrun.hpp"

namespace hpc::hpcrun {
namespace {

const char* kind_name(uint16_t k) {
  static const char* const names[] = {"SUMMARY",   "NODE",       "RANK",      "THREAD",
                                      "GPUDEVICE", "GPUCONTEXT", "GPUSTREAM", "CORE"};
  return k < 8 ? names[k] : "?";
}

// Placeholder nodes (load module 0) carry an 8-character ASCII tag as their "ip".
std::string ip_text(const CctNode& n) {
  if (n.lm_id == 0) {
    std::string tag;
    for (int i = 7; i >= 0; --i) {
      char c = static_cast<char>(n.lm_ip >> (8 * i));
      if (!std::isprint(static_cast<unsigned char>(c))) return hex(n.lm_ip);
      tag += c;
    }
    return "\"" + tag + "\"";
  }
  return "+" + hex(n.lm_ip);
}

std::string value_text(const Profile& p, const MetricValue& v) {
  std::string name = v.metric_id < p.metrics.size() ? p.metrics[v.metric_id].name
                                                     : "metric#" + std::to_string(v.metric_id);
  bool is_int = v.metric_id < p.metrics.size() && p.metrics[v.metric_id].flags.val_fmt == kValFmtInt;
  char b[40];
  if (is_int)
    std::snprintf(b, sizeof b, "%llu", static_cast<unsigned long long>(v.bits));
  else
    std::snprintf(b, sizeof b, "%.9g", v.as_real());
  return name + "=" + b;
}

void dump_cct(const Profile& p, std::ostream& out) {
  std::unordered_map<uint32_t, size_t> pos;
  for (size_t i = 0; i < p.nodes.size(); ++i) pos.emplace(p.nodes[i].id, i);
  std::vector<std::vector<size_t>> kids(p.nodes.size());
  std::vector<size_t> roots;
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    auto it = pos.find(p.nodes[i].parent_id);
    if (p.nodes[i].parent_id == 0 || it == pos.end() || it->second == i)
      roots.push_back(i);
    else
      kids[it->second].push_back(i);
  }
  std::unordered_map<uint16_t, const std::string*> lms;
  for (auto& lm : p.load_modules) lms.emplace(lm.id, &lm.name);
  std::vector<bool> printed(p.nodes.size());
  auto walk = [&](size_t root) {
    std::vector<std::pair<size_t, size_t>> stack{{root, 0}};  // iterative: trees can be deep
    while (!stack.empty()) {
      auto [i, depth] = stack.back();
      stack.pop_back();
      if (printed[i]) continue;
      printed[i] = true;
      const CctNode& n = p.nodes[i];
      out << std::string(2 + 2 * std::min<size_t>(depth, 60), ' ') << "[" << n.id << "] lm "
          << n.lm_id;
      if (auto it = lms.find(n.lm_id); it != lms.end()) {
        const std::string& nm = *it->second;
        out << " (" << nm.substr(nm.find_last_of('/') + 1) << ")";
      }
      out << " " << ip_text(n);
      if (!n.unwound) out << " not-unwound";
      for (auto& v : n.values) out << "  " << value_text(p, v);
      out << "\n";
      for (auto k = kids[i].rbegin(); k != kids[i].rend(); ++k) stack.push_back({*k, depth + 1});
    }
  };
  for (size_t r : roots) walk(r);
  for (size_t i = 0; i < p.nodes.size(); ++i)
    if (!printed[i]) {
      out << "  (not reachable from a root:)\n";
      walk(i);
    }
}

}  // namespace

void dump_profile(const Profile& p, std::ostream& out) {
  out << "hpcrun profile, version " << p.version << "\n[header]\n";
  for (auto& nv : p.header) out << "  " << nv.name << ": " << nv.value << "\n";
  out << "[id tuple]";
  // As the conformance checker prints it: KIND logical/physical:interpretation.
  static const char* const interp[] = {"both", "l-local", "l-global", "logical"};
  for (auto& id : p.id_tuple) {
    char b[48];
    std::snprintf(b, sizeof b, "%llx/%llx", static_cast<unsigned long long>(id.logical),
                  static_cast<unsigned long long>(id.physical));
    out << " " << kind_name(id.kind()) << " " << b << ":" << interp[id.interpret()];
  }
  out << "\n[id kinds] ";
  for (auto& k : p.id_kinds) out << k.kind << "=" << k.name << " ";
  out << "\n[metrics] " << p.metrics.size() << "\n";
  for (size_t i = 0; i < p.metrics.size(); ++i) {
    const MetricDesc& m = p.metrics[i];
    const MetricFlags& f = m.flags;
    out << "  " << i << ": " << m.name << " (" << m.description << ") type " << int(f.type)
        << " val-type " << int(f.val_type) << " fmt " << (f.val_fmt == kValFmtInt ? "int" : "real")
        << " show " << int(f.show) << " show% " << int(f.show_percent) << " partner " << f.partner
        << " move2proc " << int(f.move2proc) << " period " << m.period;
    if (!m.formula.empty()) out << " formula " << m.formula;
    if (!m.format.empty()) out << " format " << m.format;
    if (m.is_frequency_metric || m.is_multiplexed || m.num_samples)
      out << " freq " << m.is_frequency_metric << " multiplexed " << m.is_multiplexed
          << " threshold-mean " << m.threshold_mean << " samples " << m.num_samples;
    out << "\n";
  }
  out << "[load map] " << p.load_modules.size() << "\n";
  for (auto& lm : p.load_modules)
    out << "  " << lm.id << ": " << lm.name << " flags " << hex(lm.flags) << "\n";
  size_t nvals = 0;
  for (auto& n : p.nodes) nvals += n.values.size();
  out << "[cct] " << p.nodes.size() << " nodes, " << nvals << " non-zero values\n";
  dump_cct(p, out);
}

void dump_trace(const Trace& t, std::ostream& out, size_t max_records) {
  out << "hpcrun trace, version " << t.version << ", flags " << hex(t.flags) << "\n";
  out << "[records] " << t.records.size();
  if (!t.records.empty()) {
    auto [lo, hi] = std::minmax_element(t.records.begin(), t.records.end(),
                                        [](auto& a, auto& b) { return a.time < b.time; });
    out << ", time " << lo->time << " .. " << hi->time << " ns (" << (hi->time - lo->time)
        << " ns)";
  }
  out << "\n";
  for (size_t i = 0; i < t.records.size() && i < max_records; ++i) {
    out << "  " << t.records[i].time << " cct " << t.records[i].cct_id;
    if (t.flags & kTraceDataCentric) out << " metric " << t.records[i].metric_id;
    out << "\n";
  }
  if (t.records.size() > max_records) out << "  ... (" << t.records.size() - max_records << " more)\n";
}

Status dump(const std::filesystem::path& path, std::ostream& out) {
  HPC_ASSIGN_OR_RETURN(MappedFile f, MappedFile::open(path));
  switch (sniff(f.bytes())) {
    case FileKind::Profile: {
      HPC_ASSIGN_OR_RETURN(Profile p, parse_profile(f.bytes(), f.path()));
      dump_profile(p, out);
      return Status();
    }
    case FileKind::Trace: {
      HPC_ASSIGN_OR_RETURN(Trace t, parse_trace(f.bytes(), f.path()));
      dump_trace(t, out);
      return Status();
    }
    case FileKind::Unknown: break;
  }
  return Status::error(path.string() + ": not an hpcrun profile or trace (unknown magic)");
}

}  // namespace hpc::hpcrun
