// hpcdump's view of a structure file: one line per element, indented by depth, streamed.
#include <ostream>

#include "formats/structfile/schema.hpp"
#include "formats/structfile/structfile.hpp"

namespace hpc::structfile {
namespace {

class Printer : public Visitor {
public:
  explicit Printer(std::ostream& out) : out_(out) {}
  Status enter(const Scope& s, int depth) override {
    using A = schema::Attr;
    std::string line(size_t(depth) * 2, ' ');
    line += tag_name(s.kind);
    for (const auto& spec : schema::attributes(s.kind)) {
      std::string v;
      switch (spec.attr) {
        case A::Id: v = std::to_string(s.id); break;
        case A::Version: v = s.version; break;
        case A::HasCalls: v.assign(1, s.has_calls ? '1' : '0'); break;
        case A::Name: if (s.name) v = quote(*s.name); break;
        case A::LinkName: if (s.link_name) v = quote(*s.link_name); break;
        case A::File: if (s.file) v = quote(*s.file); break;
        case A::Device: if (s.device) v = quote(*s.device); break;
        case A::Line: if (s.line) v = std::to_string(*s.line); break;
        case A::StaticId: if (s.static_id) v = std::to_string(*s.static_id); break;
        case A::VRanges: if (s.vranges) v = format_vranges(*s.vranges); break;
        case A::Target: if (s.target) schema::append_addr(v, *s.target); break;
      }
      if (v.empty()) continue;
      line += ' ';
      line += spec.xml;
      line += '=';
      line += v;
    }
    out_ << line << '\n';
    return Status();
  }

private:
  static std::string quote(const std::string& s) { return '"' + s + '"'; }
  std::ostream& out_;
};

}  // namespace

Status dump(const std::filesystem::path& path, std::ostream& out) {
  Printer p(out);
  return read(path, p);
}

}  // namespace hpc::structfile
