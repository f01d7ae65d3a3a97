#include "structure/gpu_cfg.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

extern char** environ;

namespace hpc::structure {

namespace {

// DOT tokens: quoted strings keep record escapes (\l, \ , \{) and lose only \" quoting.
struct Lexer {
  std::string_view s;
  size_t i = 0;
  int line = 1;
  enum class T { End, Id, Str, Punct };
  T kind = T::End;
  std::string text;

  void skip() {
    while (i < s.size()) {
      char c = s[i];
      if (c == '\n') ++line;
      if (std::isspace(static_cast<unsigned char>(c)) || c == ';' || c == ',') {
        ++i;
      } else if (c == '/' && i + 1 < s.size() && s[i + 1] == '/') {
        while (i < s.size() && s[i] != '\n') ++i;
      } else {
        break;
      }
    }
  }
  bool next() {
    skip();
    text.clear();
    if (i >= s.size()) return kind = T::End, false;
    char c = s[i];
    if (c == '"') {
      ++i;
      while (i < s.size() && s[i] != '"') {
        if (s[i] == '\\' && i + 1 < s.size()) {
          if (s[i + 1] == '"') {
            text += '"';
          } else if (s[i + 1] != '\n') {  // backslash-newline continues the string
            text += s[i];
            text += s[i + 1];
          }
          i += 2;
          continue;
        }
        if (s[i] == '\n') ++line;
        if (s[i] != '\n' && s[i] != '\r') text += s[i];
        ++i;
      }
      ++i;
      return kind = T::Str, true;
    }
    if (c == '-' && i + 1 < s.size() && s[i + 1] == '>') {
      i += 2;
      text = "->";
      return kind = T::Punct, true;
    }
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.') {
      while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_' || s[i] == '.')) text += s[i++];
      return kind = T::Id, true;
    }
    text = std::string(1, c);
    ++i;
    return kind = T::Punct, true;
  }
  bool is(const char* p) const { return kind == T::Punct && text == p; }
};

std::string unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      out += s[++i];
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string trim(std::string s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return {};
  size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

bool all_hex(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

// One `\l`-ended line of a record cell: "00f0:   @P0 BRA `(.L_3);" or, for the second
// instruction of a dual-issue pair, "/*0018*/   S2R R0, SR_TID.X }". Directives and labels
// (".L_4:", "\t.global f") are not instructions.
std::optional<NvGraph::Inst> parse_inst(std::string line) {
  line = trim(unescape(line));
  std::string off, rest;
  if (line.rfind("/*", 0) == 0) {
    size_t e = line.find("*/");
    if (e == std::string::npos) return std::nullopt;
    off = line.substr(2, e - 2);
    rest = line.substr(e + 2);
  } else {
    size_t colon = line.find(':');
    if (colon == std::string::npos) return std::nullopt;
    off = line.substr(0, colon);
    rest = line.substr(colon + 1);
  }
  std::erase_if(rest, [](char c) { return c == '{' || c == '}' || c == ';'; });
  rest = trim(rest);
  if (!all_hex(off) || rest.empty()) return std::nullopt;
  return NvGraph::Inst{std::stoull(off, nullptr, 16), rest};
}

// A record label "{<entry>...\l...|<exit0>...\l}": cells split at unescaped '|'.
std::vector<NvGraph::Field> parse_record(std::string_view label) {
  std::vector<NvGraph::Field> fields;
  std::vector<std::string> cells(1);
  for (size_t i = 0; i < label.size(); ++i) {
    char c = label[i];
    if (c == '\\' && i + 1 < label.size()) {
      cells.back() += c;
      cells.back() += label[++i];
    } else if (c == '|') {
      cells.emplace_back();
    } else if (c == '{' || c == '}') {
      // record nesting: nvdisasm nests one level only
    } else {
      cells.back() += c;
    }
  }
  for (auto& cell : cells) {
    NvGraph::Field f;
    std::string_view rest = cell;
    size_t b = rest.find_first_not_of(" \t");
    if (b != std::string_view::npos && rest[b] == '<') {
      size_t e = rest.find('>', b);
      if (e != std::string_view::npos) {
        f.port = std::string(rest.substr(b + 1, e - b - 1));
        rest = rest.substr(e + 1);
      }
    }
    // Lines end at \l, \n or \r (Graphviz's left/center/right-justified breaks).
    std::string cur;
    auto flush = [&] {
      if (auto inst = parse_inst(cur)) f.insts.push_back(std::move(*inst));
      cur.clear();
    };
    for (size_t i = 0; i < rest.size(); ++i) {
      if (rest[i] == '\\' && i + 1 < rest.size()) {
        char n = rest[i + 1];
        if (n == 'l' || n == 'n' || n == 'r') {
          flush();
        } else {
          cur += rest[i];
          cur += n;
        }
        ++i;
      } else {
        cur += rest[i];
      }
    }
    flush();
    fields.push_back(std::move(f));
  }
  return fields;
}

struct Op {
  std::string opcode;  // without modifiers: "BRA" for "BRA.U"
  bool predicated = false;
  std::string target;  // ".L_3" where the operands name a label
};

Op decode(const std::string& text) {
  Op op;
  size_t i = 0;
  auto word = [&] {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    size_t b = i;
    while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    return text.substr(b, i - b);
  };
  std::string w = word();
  if (!w.empty() && w[0] == '@') {
    op.predicated = w != "@PT";
    w = word();
  }
  op.opcode = w.substr(0, w.find('.'));
  if (size_t l = text.find(".L_", i); l != std::string::npos) {
    size_t e = l + 3;
    while (e < text.size() && (std::isalnum(static_cast<unsigned char>(text[e])) || text[e] == '_')) ++e;
    op.target = text.substr(l, e - l);
  }
  return op;
}

bool is_branch(const Op& op) {
  static const std::set<std::string> ops = {"BRA", "BRX", "JMP", "JMX", "JMXU", "BRXU", "EXIT", "RET", "KILL",
                                            "SYNC", "BRK", "CONT", "BPT"};
  return ops.count(op.opcode) != 0;
}

}  // namespace

Expected<NvGraph> parse_nvdisasm_cfg(std::string_view dot) {
  NvGraph g;
  Lexer lx;
  lx.s = dot;
  auto where = [&] { return "nvdisasm output line " + std::to_string(lx.line) + ": "; };
  lx.next();
  if (lx.kind != Lexer::T::Id || lx.text != "digraph") return Status::error(where() + "expected 'digraph'");
  std::map<std::string, size_t> byName;
  // Each statement consumes its tokens and leaves the next statement's first one current:
  // `ID [attrs]` (node), `ID(:port(:compass)?)? -> ID... [attrs]` (edge),
  // `node|edge|graph [attrs]`, `(sub|di)graph ID? {`, `{`, `}`, `a=b`.
  auto endpoint = [&](std::string& name, std::string& port) {
    name = lx.text;
    port.clear();
    lx.next();
    if (lx.is(":")) {
      lx.next();
      port = lx.text;
      lx.next();
      if (lx.is(":")) {
        lx.next();
        lx.next();
      }
    }
  };
  auto attrs = [&](std::string* label) -> Status {
    if (!lx.is("[")) return Status();
    for (lx.next(); !lx.is("]");) {
      if (lx.kind == Lexer::T::End) return Status::error(where() + "unterminated attribute list");
      std::string key = lx.text;
      lx.next();
      if (lx.is("=")) {
        lx.next();
        if (key == "label" && label) *label = lx.text;
        lx.next();
      }
    }
    lx.next();
    return Status();
  };
  while (lx.kind != Lexer::T::End) {
    if (lx.is("{") || lx.is("}")) {
      lx.next();
    } else if (lx.kind == Lexer::T::Id && (lx.text == "subgraph" || lx.text == "digraph")) {
      lx.next();
      if (!lx.is("{")) lx.next();
    } else if (lx.kind == Lexer::T::Id && (lx.text == "node" || lx.text == "edge" || lx.text == "graph")) {
      lx.next();
      HPC_RETURN_IF_ERROR(attrs(nullptr));
    } else if (lx.kind == Lexer::T::Id || lx.kind == Lexer::T::Str) {
      std::string from, fromPort;
      endpoint(from, fromPort);
      if (lx.is("->")) {
        lx.next();
        if (lx.kind != Lexer::T::Id && lx.kind != Lexer::T::Str) return Status::error(where() + "edge without a head");
        std::string to, toPort;
        endpoint(to, toPort);
        HPC_RETURN_IF_ERROR(attrs(nullptr));
        g.edges.push_back({from, fromPort, to});
      } else if (lx.is("=")) {
        lx.next();
        lx.next();
      } else {
        std::string label;
        HPC_RETURN_IF_ERROR(attrs(&label));
        auto [it, fresh] = byName.emplace(from, g.nodes.size());
        if (fresh) g.nodes.push_back({from, {}});
        if (!label.empty()) g.nodes[it->second].fields = parse_record(label);
      }
    } else {
      return Status::error(where() + "unexpected '" + lx.text + "'");
    }
  }
  return g;
}

Cfg cfg_from_nvgraph(const NvGraph& g, uint64_t section, uint64_t begin, uint64_t end) {
  // Instructions in address order, each with its node and cell; a block ends after a
  // branch, before a node's first instruction, and where instructions stop being adjacent.
  struct At {
    uint64_t addr;
    size_t node, field;
    Op op;
  };
  std::vector<At> insts;
  bool narrow = false;  // sm_6x and older: 8-byte instructions, control words between
  for (size_t n = 0; n < g.nodes.size(); ++n)
    for (size_t f = 0; f < g.nodes[n].fields.size(); ++f)
      for (const auto& in : g.nodes[n].fields[f].insts) {
        narrow |= in.offset % 16 != 0;
        uint64_t a = section + in.offset;
        if (a >= begin && a < end) insts.push_back({a, n, f, decode(in.text)});
      }
  const uint64_t size = narrow ? 8 : 16;
  std::stable_sort(insts.begin(), insts.end(), [](const At& a, const At& b) { return a.addr < b.addr; });
  insts.erase(std::unique(insts.begin(), insts.end(), [](const At& a, const At& b) { return a.addr == b.addr; }),
              insts.end());

  Cfg cfg;
  std::vector<size_t> firstOfNode(g.nodes.size(), SIZE_MAX), lastOfNode(g.nodes.size(), SIZE_MAX);
  std::map<std::pair<size_t, size_t>, size_t> blockOfField;  // (node, cell) -> block of its last instruction
  std::vector<const At*> lastInst;
  for (size_t i = 0; i < insts.size(); ++i) {
    const At& in = insts[i];
    bool start = i == 0 || insts[i - 1].node != in.node || is_branch(insts[i - 1].op) ||
                 insts[i - 1].addr + 2 * size < in.addr;
    if (start) {
      if (!cfg.blocks.empty()) cfg.blocks.back().end = insts[i - 1].addr + size;
      cfg.blocks.push_back(Block{in.addr, in.addr + size, in.addr, {}, {}});
      lastInst.push_back(&in);
    }
    size_t b = cfg.blocks.size() - 1;
    cfg.blocks[b].last = in.addr;
    lastInst[b] = &in;
    if (firstOfNode[in.node] == SIZE_MAX) firstOfNode[in.node] = b;
    lastOfNode[in.node] = b;
    blockOfField[{in.node, in.field}] = b;
  }
  if (!cfg.blocks.empty()) cfg.blocks.back().end = insts.back().addr + size;

  std::map<std::string, size_t> nodeByName;
  for (size_t n = 0; n < g.nodes.size(); ++n) nodeByName.emplace(g.nodes[n].name, n);
  auto edge = [&](size_t from, size_t to) {
    auto& s = cfg.blocks[from].succs;
    if (std::find(s.begin(), s.end(), to) == s.end()) s.push_back(static_cast<uint32_t>(to));
  };
  // Fall-through inside a node (nvdisasm draws no edge for it), then branches to labels.
  for (size_t b = 0; b + 1 < cfg.blocks.size(); ++b) {
    const At& in = *lastInst[b];
    bool stops = is_branch(in.op) && !in.op.predicated && in.op.opcode != "BPT";
    if (!stops && lastInst[b + 1]->node == in.node) edge(b, b + 1);
  }
  for (size_t b = 0; b < cfg.blocks.size(); ++b) {
    const At& in = *lastInst[b];
    if (!is_branch(in.op) || in.op.target.empty()) continue;
    auto it = nodeByName.find(in.op.target);
    if (it != nodeByName.end() && firstOfNode[it->second] != SIZE_MAX) edge(b, firstOfNode[it->second]);
  }
  // The graph's own edges: from the cell of the branch (exitN) or the end of the node.
  for (const auto& e : g.edges) {
    auto from = nodeByName.find(e.from), to = nodeByName.find(e.to);
    if (from == nodeByName.end() || to == nodeByName.end() || firstOfNode[to->second] == SIZE_MAX ||
        lastOfNode[from->second] == SIZE_MAX)
      continue;
    size_t src = lastOfNode[from->second];
    if (e.from_port.rfind("exit", 0) == 0) {
      const auto& fields = g.nodes[from->second].fields;
      for (size_t f = 0; f < fields.size(); ++f)
        if (fields[f].port == e.from_port) {
          auto it = blockOfField.find({from->second, f});
          if (it != blockOfField.end()) src = it->second;
        }
    }
    edge(src, firstOfNode[to->second]);
  }
  for (size_t b = 0; b < cfg.blocks.size(); ++b)
    for (uint32_t s : cfg.blocks[b].succs) cfg.blocks[s].preds.push_back(static_cast<uint32_t>(b));
  int entry = cfg.block_at(begin);
  cfg.entry = entry >= 0 ? static_cast<uint32_t>(entry) : 0;
  return cfg;
}

std::optional<std::string> find_nvdisasm() {
  std::vector<std::filesystem::path> dirs;
  if (const char* path = std::getenv("PATH")) {
    std::string_view p(path);
    for (size_t start = 0; start <= p.size();) {
      size_t e = p.find(':', start);
      if (e == std::string_view::npos) e = p.size();
      if (e > start) dirs.emplace_back(p.substr(start, e - start));
      start = e + 1;
    }
  }
  dirs.emplace_back("/usr/local/cuda/bin");
  for (const auto& d : dirs) {
    auto cand = d / "nvdisasm";
    if (::access(cand.c_str(), X_OK) == 0 && std::filesystem::is_regular_file(cand)) return cand.string();
  }
  return std::nullopt;
}

Expected<std::string> run_nvdisasm(const std::string& nvdisasm, const std::string& cubin, uint32_t symbol) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Status::error(cubin + ": cannot create a pipe for nvdisasm");
  // Its messages go to an anonymous file, read once it exits: a refusal then says why.
  int err = ::memfd_create("nvdisasm-stderr", MFD_CLOEXEC);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  if (err >= 0)
    posix_spawn_file_actions_adddup2(&fa, err, 2);
  else
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  std::string fun = std::to_string(symbol);
  std::vector<std::string> args = {nvdisasm, "-cfg", "-poff", "-fun", fun, cubin};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawn(&pid, nvdisasm.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    if (err >= 0) ::close(err);
    return Status::error(cubin + ": cannot run " + nvdisasm);
  }
  std::string out;
  char buf[65536];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  std::string said;
  if (err >= 0) {
    for (ssize_t n; (n = ::pread(err, buf, sizeof buf, static_cast<off_t>(said.size()))) > 0;)
      said.append(buf, static_cast<size_t>(n));
    ::close(err);
  }
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    // The function is the caller's to name: failures of one cubin's functions then read alike.
    std::string why = "nvdisasm failed (status " +
                      std::to_string(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st)) + ")";
    if (auto line = nvdisasm_complaint(said); !line.empty()) why += ": " + line;
    return Status::error(cubin + ": " + why);
  }
  return out;
}

std::string nvdisasm_complaint(std::string_view said) {
  // The last line that reports an error (else the last line), without the tool's own prefix
  // ("nvdisasm error   : ...") and surrounding blanks.
  std::string_view last, last_error;
  for (size_t start = 0; start < said.size();) {
    size_t e = said.find('\n', start);
    if (e == std::string_view::npos) e = said.size();
    std::string_view line = said.substr(start, e - start);
    start = e + 1;
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.remove_suffix(1);
    if (line.empty()) continue;
    last = line;
    if (line.find("error") != std::string_view::npos || line.find("fatal") != std::string_view::npos)
      last_error = line;
  }
  std::string_view pick = last_error.empty() ? last : last_error;
  if (size_t c = pick.find(" : "); c != std::string_view::npos && pick.substr(0, c).starts_with("nvdisasm"))
    pick.remove_prefix(c + 3);
  while (!pick.empty() && std::isspace(static_cast<unsigned char>(pick.front()))) pick.remove_prefix(1);
  return std::string(pick);
}

}  // namespace hpc::structure
