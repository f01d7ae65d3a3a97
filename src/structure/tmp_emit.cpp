// TEMPORARY: a minimal XML emitter used until src/formats/structfile provides its
// streaming writer; then emit.cpp converts to that writer and this file goes away.
#include <cinttypes>
#include <cstdio>
#include <map>

#include "common/file.hpp"
#include "structure/emit.hpp"

namespace hpc::structure {
namespace {

std::string esc(const std::string& s) {
  std::string r;
  for (char c : s) {
    switch (c) {
      case '&': r += "&amp;"; break;
      case '<': r += "&lt;"; break;
      case '>': r += "&gt;"; break;
      case '"': r += "&quot;"; break;
      case '\'': r += "&apos;"; break;
      default: r += c;
    }
  }
  return r;
}

std::string vset(const std::vector<Range>& rs) {
  std::string r = "{";
  char buf[64];
  for (size_t i = 0; i < rs.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%s[0x%" PRIx64 "-0x%" PRIx64 ")", i ? " " : "", rs[i].first, rs[i].second);
    r += buf;
  }
  return r + "}";
}

class Emitter {
public:
  explicit Emitter(const Structure& s) : s_(s) {}
  std::string run() {
    out_ = "<?xml version=\"1.0\"?>\n<HPCToolkitStructure i=\"0\" version=\"4.9\" n=\"\">\n";
    out_ += "<LM i=\"" + id() + "\" n=\"" + esc(s_.binary_path) + "\" has-calls=\"0\" v=\"{}\">\n";
    std::map<uint32_t, std::vector<const Procedure*>> byFile;
    std::vector<uint32_t> order;
    for (const auto& p : s_.procedures) {
      auto& v = byFile[p.file];
      if (v.empty()) order.push_back(p.file);
      v.push_back(&p);
    }
    for (uint32_t f : order) {
      out_ += "<F i=\"" + id() + "\" n=\"" + esc(s_.file_name(f)) + "\">\n";
      for (const Procedure* p : byFile[f]) proc(*p);
      out_ += "</F>\n";
    }
    out_ += "</LM>\n</HPCToolkitStructure>\n";
    return std::move(out_);
  }

private:
  std::string id() { return std::to_string(next_++); }
  void proc(const Procedure& p) {
    // CPU procedure names carry the binary's name; GPU ones give a link name only when it differs.
    std::string ln = s_.gpu && p.link_name == p.name ? "" : "\" ln=\"" + esc(p.link_name);
    out_ += "<P i=\"" + id() + "\" n=\"" + esc(s_.gpu ? p.name : p.name + " " + s_.unknown_file()) + ln +
            "\" l=\"" + std::to_string(p.line) + "\" v=\"" + vset({{p.entry, p.entry + 1}}) + "\">\n";
    body(p.root);
    out_ += "</P>\n";
  }
  void body(const Scope& s) {
    for (const auto& [line, rs] : s.stmts)
      out_ += "<S i=\"" + id() + "\" l=\"" + std::to_string(line) + "\" v=\"" + vset(rs.ranges()) + "\"/>\n";
    for (const auto& c : s.children) child(*c);
  }
  void alien(uint32_t line, uint32_t file, const std::string& name) {
    out_ += "<A i=\"" + id() + "\" l=\"" + std::to_string(line) + "\" f=\"" + esc(s_.file_name(file)) + "\" n=\"" +
            esc(name) + "\" v=\"{}\">\n";
  }
  void child(const Scope& c) {
    switch (c.kind) {
      case Scope::Kind::Inline:
        alien(c.line, c.file, "");
        alien(c.callee_line, c.callee_file, c.callee);
        body(c);
        out_ += "</A>\n</A>\n";
        break;
      case Scope::Kind::Guard:
        alien(c.line, c.file, "<inline>");
        body(c);
        out_ += "</A>\n";
        break;
      case Scope::Kind::Loop:
        out_ += "<L i=\"" + id() + "\" l=\"" + std::to_string(c.line) + "\" f=\"" + esc(s_.file_name(c.file)) +
                "\" v=\"" + vset({{c.loop_header, c.loop_header + 1}}) + "\">\n";
        body(c);
        out_ += "</L>\n";
        break;
      case Scope::Kind::Procedure:
        body(c);
        break;
    }
  }
  const Structure& s_;
  std::string out_;
  uint64_t next_ = 2;
};

}  // namespace

Status write_structure_file(const Structure& s, const std::string& path) {
  return write_file_atomically(path, Emitter(s).run());
}

}  // namespace hpc::structure
