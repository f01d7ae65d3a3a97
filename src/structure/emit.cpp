// Structure -> structure file, through the format library's model and writer.
#include <map>

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

// Writes one procedure at a time through the streaming writer, so the file's model is
// never held whole (it is several times the size of the structure file). Ids are given
// in document order as sf::assign_ids does: the root 0, then 2, 3, ...
class Builder {
public:
  explicit Builder(const Structure& s) : s_(s) {}

  Status run(const std::string& path) {
    HPC_ASSIGN_OR_RETURN(auto w, sf::Writer::create(path));
    sf::Scope root = element(sf::Kind::Root);
    root.version = "4.9";
    root.name = "";
    root.id = 0;
    HPC_RETURN_IF_ERROR(w->open(root));
    sf::Scope lm = element(sf::Kind::LoadModule);
    lm.name = s_.binary_path;
    lm.has_calls = false;
    lm.vranges = sf::VRanges{};
    lm.id = next_++;
    HPC_RETURN_IF_ERROR(w->open(lm));
    std::map<uint32_t, std::vector<const Procedure*>> byFile;
    std::vector<uint32_t> order;
    for (const auto& p : s_.procedures) {
      auto& v = byFile[p.file];
      if (v.empty()) order.push_back(p.file);
      v.push_back(&p);
    }
    for (uint32_t f : order) {
      sf::Scope file = element(sf::Kind::File);
      file.name = s_.file_name(f);
      file.id = next_++;
      HPC_RETURN_IF_ERROR(w->open(file));
      for (const Procedure* p : byFile[f]) {
        sf::Scope e = proc(*p);
        number(e);
        HPC_RETURN_IF_ERROR(w->write_tree(e));
      }
      HPC_RETURN_IF_ERROR(w->close());
    }
    HPC_RETURN_IF_ERROR(w->close());
    HPC_RETURN_IF_ERROR(w->close());
    return w->finish();
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
  uint64_t next_ = 2;
};

}  // namespace

Status write_structure_file(const Structure& s, const std::string& path) {
  return Builder(s).run(path);
}

}  // namespace hpc::structure
