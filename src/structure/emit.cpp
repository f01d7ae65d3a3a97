// Structure -> structure file, through the format library's model and writer.
#include <optional>
#include <unordered_map>
#include <utility>

#include "formats/structfile/structfile.hpp"
#include "structure/emit.hpp"

namespace hpc::structure {
namespace {

namespace sf = hpc::structfile;

sf::VRanges vset(const std::vector<Range>& rs) {
  sf::VRanges v;
  for (const auto& r : rs) v.push_back({r.first, r.second});
  return v;
}

sf::Scope element(sf::Kind k) {
  sf::Scope s;
  s.kind = k;
  return s;
}

// Converts one procedure at a time to the format library's model; ids are given in
// document order as sf::assign_ids does: the root 0, then 2, 3, ...
class Builder {
public:
  explicit Builder(const Structure& s, uint64_t first = 2) : s_(s), next_(first) {}
  uint64_t next() const { return next_; }
  void skip(uint64_t n) { next_ += n; }

  sf::Scope root() const {
    sf::Scope r = element(sf::Kind::Root);
    r.version = "4.9";
    r.name = "";
    r.id = 0;
    return r;
  }
  sf::Scope load_module() {
    sf::Scope lm = element(sf::Kind::LoadModule);
    lm.name = s_.binary_path;
    lm.has_calls = s_.gpu_cfg;  // the reference's GPU control-flow parse counts calls
    lm.vranges = sf::VRanges{};
    lm.id = next_++;
    return lm;
  }
  sf::Scope file(uint32_t f) {
    sf::Scope e = element(sf::Kind::File);
    e.name = s_.file_name(f);
    e.id = next_++;
    return e;
  }
  sf::Scope procedure(const Procedure& p) {
    sf::Scope e = proc(p);
    number(e);
    return e;
  }

private:
  void number(sf::Scope& s) {
    s.id = next_++;
    for (auto& c : s.children) number(c);
  }
  sf::Scope proc(const Procedure& p) {
    sf::Scope e = element(sf::Kind::Procedure);
    // CPU procedure names carry the binary's name; GPU ones give a link name only when it differs.
    e.name = s_.gpu ? p.name : p.name + " " + s_.unknown_file();
    if (!(s_.gpu && p.link_name == p.name)) e.link_name = p.link_name;
    e.line = p.line;
    e.vranges = vset({{p.entry, p.entry + 1}});
    device_ = &p.device;
    body(p.root, e);
    return e;
  }
  void body(const Scope& s, sf::Scope& into) {
    for (const auto& [line, rs] : s.stmts) {
      sf::Scope st = element(sf::Kind::Statement);
      st.line = line;
      st.vranges = vset(rs.ranges());
      into.children.push_back(std::move(st));
    }
    for (const auto& c : s.calls) {
      sf::Scope call = element(sf::Kind::Call);
      call.line = c.line;
      call.vranges = vset({{c.begin, c.end}});
      call.target = c.target;
      if (device_ && !device_->empty()) call.device = *device_;
      into.children.push_back(std::move(call));
    }
    for (const auto& c : s.children) child(*c, into);
  }
  sf::Scope alien(uint32_t line, uint32_t file, const std::string& name) {
    sf::Scope a = element(sf::Kind::Alien);
    a.line = line;
    a.file = s_.file_name(file);
    a.name = name;
    a.vranges = sf::VRanges{};
    return a;
  }
  void child(const Scope& c, sf::Scope& into) {
    switch (c.kind) {
      case Scope::Kind::Inline: {
        sf::Scope site = alien(c.line, c.file, "");
        sf::Scope callee = alien(c.callee_line, c.callee_file, c.callee);
        body(c, callee);
        site.children.push_back(std::move(callee));
        into.children.push_back(std::move(site));
        break;
      }
      case Scope::Kind::Guard: {
        sf::Scope a = alien(c.line, c.file, "<inline>");
        body(c, a);
        into.children.push_back(std::move(a));
        break;
      }
      case Scope::Kind::Loop: {
        sf::Scope l = element(sf::Kind::Loop);
        l.line = c.line;
        l.file = s_.file_name(c.file);
        l.vranges = vset({{c.loop_header, c.loop_header + 1}});
        body(c, l);
        into.children.push_back(std::move(l));
        break;
      }
      case Scope::Kind::Procedure:
        body(c, into);
        break;
    }
  }
  const Structure& s_;
  uint64_t next_;
  const std::string* device_ = nullptr;  // the procedure's, while its body is built
};

}  // namespace

struct StructureFileWriter::Impl {
  Structure shell;  // names files; holds no procedures
  Builder builder{shell};
  std::unique_ptr<sf::Writer> out;
  std::optional<uint32_t> file;  // the open <F>

  // Closes the open <F> and opens `f`'s when the next procedure is in another file.
  Status enter_file(uint32_t f) {
    if (file == f) return Status();
    if (file) HPC_RETURN_IF_ERROR(out->close());
    HPC_RETURN_IF_ERROR(out->open(builder.file(f)));
    file = f;
    return Status();
  }
};

Expected<std::unique_ptr<StructureFileWriter>> StructureFileWriter::create(
    const std::string& path, const std::string& binary_path, std::shared_ptr<const DebugInfo> debug, bool gpu,
    bool gpu_cfg) {
  std::unique_ptr<StructureFileWriter> w(new StructureFileWriter());
  w->impl_ = std::make_unique<Impl>();
  w->impl_->shell.binary_path = binary_path;
  w->impl_->shell.debug = std::move(debug);
  w->impl_->shell.gpu = gpu;
  w->impl_->shell.gpu_cfg = gpu_cfg;
  HPC_ASSIGN_OR_RETURN(w->impl_->out, sf::Writer::create(path));
  HPC_RETURN_IF_ERROR(w->impl_->out->open(w->impl_->builder.root()));
  HPC_RETURN_IF_ERROR(w->impl_->out->open(w->impl_->builder.load_module()));
  return w;
}

StructureFileWriter::~StructureFileWriter() = default;

Status StructureFileWriter::add(const Procedure& p) {
  Impl& m = *impl_;
  HPC_RETURN_IF_ERROR(m.enter_file(p.file));
  return m.out->write_tree(m.builder.procedure(p));
}

Status StructureFileWriter::add_formatted(const FormattedProcedure& f) {
  Impl& m = *impl_;
  HPC_RETURN_IF_ERROR(m.enter_file(f.file));
  HPC_RETURN_IF_ERROR(m.out->write_fragment(f.text, sf::Kind::Procedure, m.builder.next()));
  m.builder.skip(f.elements);
  return Status();
}

ProcedureFormatter::ProcedureFormatter(const std::string& binary_path, std::shared_ptr<const DebugInfo> debug,
                                       bool gpu) {
  shell_.binary_path = binary_path;
  shell_.debug = std::move(debug);
  shell_.gpu = gpu;
}

Expected<FormattedProcedure> ProcedureFormatter::format(const Procedure& p) const {
  Builder b(shell_, 0);
  FormattedProcedure f;
  f.file = p.file;
  HPC_RETURN_IF_ERROR(sf::format_tree(b.procedure(p), f.text));
  f.elements = b.next();
  return f;
}

Status StructureFileWriter::finish() {
  Impl& m = *impl_;
  if (m.file) HPC_RETURN_IF_ERROR(m.out->close());
  m.file.reset();
  HPC_RETURN_IF_ERROR(m.out->close());
  HPC_RETURN_IF_ERROR(m.out->close());
  return m.out->finish();
}

sf::Scope procedure_model(const Structure& shell, const Procedure& p) {
  Builder b(shell, 0);
  sf::Scope lm = b.load_module();
  sf::Scope file = b.file(p.file);
  file.children.push_back(b.procedure(p));
  lm.children.push_back(std::move(file));
  return lm;
}

std::vector<uint32_t> file_order(const std::vector<uint32_t>& files) {
  // Files ranked by first appearance, then a stable counting sort by rank.
  std::unordered_map<uint32_t, uint32_t> rank;
  std::vector<uint32_t> start;  // procedures per rank, then where each rank's go
  std::vector<uint32_t> ranks(files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    auto [it, fresh] = rank.try_emplace(files[i], static_cast<uint32_t>(start.size()));
    if (fresh) start.push_back(0);
    ranks[i] = it->second;
    ++start[it->second];
  }
  uint32_t at = 0;
  for (auto& n : start) at += std::exchange(n, at);
  std::vector<uint32_t> out(files.size());
  for (size_t i = 0; i < files.size(); ++i) out[start[ranks[i]]++] = static_cast<uint32_t>(i);
  return out;
}

Status write_structure_file(const Structure& s, const std::string& path) {
  HPC_ASSIGN_OR_RETURN(auto w, StructureFileWriter::create(path, s.binary_path, s.debug, s.gpu, s.gpu_cfg));
  std::vector<uint32_t> files;
  for (const auto& p : s.procedures) files.push_back(p.file);
  for (uint32_t i : file_order(files)) HPC_RETURN_IF_ERROR(w->add(s.procedures[i]));
  return w->finish();
}

}  // namespace hpc::structure
