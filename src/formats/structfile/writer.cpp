// Streaming writer in the reference hpcstruct's layout (see README.md).
#include <charconv>
#include <fstream>
#include <ostream>
#include <sstream>
#include <vector>

#include "common/file.hpp"
#include "formats/structfile/schema.hpp"
#include "formats/structfile/structfile.hpp"

namespace hpc::structfile {

extern const char kStructureDtd[];

namespace {

// Length of the valid UTF-8 sequence at s[i], or 0 if it is not one.
size_t utf8_len(std::string_view s, size_t i) {
  unsigned char c = s[i];
  size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return 0;
  return n;
}

// Escapes for an attribute value. Tab/newline/CR become character references so that
// attribute normalization does not turn them into spaces; bytes XML cannot carry at
// all (other control characters, invalid UTF-8, e.g. from a binary's symbol table)
// become '?', so the output always re-reads.
void append_escaped(std::string& out, std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    // A run of bytes that need no escape, appended at once.
    size_t j = i;
    while (j < s.size()) {
      const unsigned char b = static_cast<unsigned char>(s[j]);
      if (b < 0x20 || b >= 0x80 || b == '&' || b == '<' || b == '>' || b == '"') break;
      ++j;
    }
    out.append(s.data() + i, j - i);
    i = j;
    if (i == s.size()) break;
    char c = s[i];
    switch (c) {
      case '&': out += "&amp;"; ++i; continue;
      case '<': out += "&lt;"; ++i; continue;
      case '>': out += "&gt;"; ++i; continue;
      case '"': out += "&quot;"; ++i; continue;
      case '\t': out += "&#x9;"; ++i; continue;
      case '\n': out += "&#xA;"; ++i; continue;
      case '\r': out += "&#xD;"; ++i; continue;
      default: break;
    }
    size_t n = utf8_len(s, i);
    if (n == 0 || static_cast<unsigned char>(c) < 0x20) {
      out += '?';
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
}

void append_number(std::string& out, uint64_t v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  (void)ec;
  out.append(buf, end);
}

Status format_start_tag(const Scope& s, std::string& out) {
  using A = schema::Attr;
  out += '<';
  out += tag_name(s.kind);
  for (const auto& spec : schema::attributes(s.kind)) {
    bool present = true;
    switch (spec.attr) {
      case A::Name: present = s.name.has_value(); break;
      case A::LinkName: present = s.link_name.has_value(); break;
      case A::File: present = s.file.has_value(); break;
      case A::Device: present = s.device.has_value(); break;
      case A::Line: present = s.line.has_value(); break;
      case A::StaticId: present = s.static_id.has_value(); break;
      case A::VRanges: present = s.vranges.has_value(); break;
      case A::Target: present = s.target.has_value(); break;
      default: break;
    }
    if (!present) {
      if (spec.required)
        return Status::error("<" + std::string(tag_name(s.kind)) + "> needs attribute " +
                             std::string(spec.xml));
      continue;
    }
    out += ' ';
    out += spec.xml;
    out += "=\"";
    // Each value written in place; numbers and address ranges need no escape.
    switch (spec.attr) {
      case A::Id: append_number(out, s.id); break;
      case A::Version: append_escaped(out, s.version.empty() ? std::string_view("4.9") : std::string_view(s.version)); break;
      case A::HasCalls: out += s.has_calls ? '1' : '0'; break;
      case A::Name: append_escaped(out, *s.name); break;
      case A::LinkName: append_escaped(out, *s.link_name); break;
      case A::File: append_escaped(out, *s.file); break;
      case A::Device: append_escaped(out, *s.device); break;
      case A::Line: append_number(out, *s.line); break;
      case A::StaticId: append_number(out, *s.static_id); break;
      case A::VRanges: out += format_vranges(*s.vranges); break;
      case A::Target: schema::append_addr(out, *s.target); break;
    }
    out += '"';
  }
  return Status();
}

Status append_tree(const Scope& s, std::string& out, int depth) {
  if (depth >= schema::kMaxDepth) return Status::error("elements nested too deeply");
  HPC_RETURN_IF_ERROR(format_start_tag(s, out));
  // The reference self-closes statements and call sites only (those without children).
  if ((s.kind == Kind::Statement || s.kind == Kind::Call) && s.children.empty()) {
    out += "/>\n";
    return Status();
  }
  out += ">\n";
  for (const Scope& c : s.children) {
    if (!allowed_child(s.kind, c.kind))
      return Status::error("<" + std::string(tag_name(c.kind)) + "> is not allowed inside <" +
                           std::string(tag_name(s.kind)) + ">");
    HPC_RETURN_IF_ERROR(append_tree(c, out, depth + 1));
  }
  out += "</";
  out += tag_name(s.kind);
  out += ">\n";
  return Status();
}

}  // namespace

Status format_tree(const Scope& scope, std::string& out) { return append_tree(scope, out, 0); }

struct Writer::FileState {
  explicit FileState(const std::filesystem::path& p) : atomic(p, AtomicOutput::Kind::File) {}
  AtomicOutput atomic;
  std::vector<char> buffer = std::vector<char>(size_t(1) << 20);  // fewer, larger writes
  std::ofstream stream;
};

Writer::Writer(std::ostream& out) : out_(&out) {}
Writer::~Writer() = default;

Expected<std::unique_ptr<Writer>> Writer::create(const std::filesystem::path& path) {
  auto fs = std::make_unique<FileState>(path);
  HPC_RETURN_IF_ERROR(fs->atomic.begin());
  fs->stream.rdbuf()->pubsetbuf(fs->buffer.data(), static_cast<std::streamsize>(fs->buffer.size()));
  // begin() made the file, empty: opened again without truncation, since on ext4 truncating
  // a file marks it to be written back when it is closed (auto_da_alloc).
  fs->stream.open(fs->atomic.temp_path(), std::ios::binary | std::ios::in | std::ios::out);
  if (!fs->stream) return Status::error(path.string() + ": cannot write");
  auto w = std::unique_ptr<Writer>(new Writer(fs->stream));
  w->file_ = std::move(fs);
  return w;
}

void Writer::flush_batch() {
  if (batch_.empty()) return;
  out_->write(batch_.data(), static_cast<std::streamsize>(batch_.size()));
  batch_.clear();
}

Status Writer::open(const Scope& scope) {
  flush_batch();
  if (stack_.empty()) {
    if (started_ || scope.kind != Kind::Root)
      return Status::error("a structure file has exactly one root, <HPCToolkitStructure>");
    *out_ << "<?xml version=\"1.0\"?>\n<!DOCTYPE HPCToolkitStructure [\n" << kStructureDtd
          << "]>\n";
    started_ = true;
  } else if (!allowed_child(stack_.back(), scope.kind)) {
    return Status::error("<" + std::string(tag_name(scope.kind)) + "> is not allowed inside <" +
                         std::string(tag_name(stack_.back())) + ">");
  }
  std::string tag;
  HPC_RETURN_IF_ERROR(format_start_tag(scope, tag));
  if (pending_) *out_ << ">\n";
  *out_ << tag;
  // The reference self-closes statements and call sites only.
  pending_ = scope.kind == Kind::Statement || scope.kind == Kind::Call;
  if (!pending_) *out_ << ">\n";
  stack_.push_back(scope.kind);
  return Status();
}

Status Writer::close() {
  flush_batch();
  if (stack_.empty()) return Status::error("close() without an open element");
  if (pending_) {
    *out_ << "/>\n";
    pending_ = false;
  } else {
    *out_ << "</" << tag_name(stack_.back()) << ">\n";
  }
  stack_.pop_back();
  return Status();
}

Status Writer::write_tree(const Scope& scope) {
  if (int(stack_.size()) >= schema::kMaxDepth) return Status::error("elements nested too deeply");
  if (stack_.empty()) {  // the root: open() writes the prologue
    HPC_RETURN_IF_ERROR(open(scope));
    for (const Scope& c : scope.children) HPC_RETURN_IF_ERROR(write_tree(c));
    return close();
  }
  if (!allowed_child(stack_.back(), scope.kind))
    return Status::error("<" + std::string(tag_name(scope.kind)) + "> is not allowed inside <" +
                         std::string(tag_name(stack_.back())) + ">");
  std::string text;
  HPC_RETURN_IF_ERROR(append_tree(scope, text, static_cast<int>(stack_.size())));
  if (pending_) batch_ += ">\n";
  pending_ = false;
  batch_ += text;
  if (batch_.size() >= (size_t(1) << 20)) flush_batch();
  return Status();
}

Status Writer::write_fragment(std::string_view text, Kind kind, uint64_t id_base) {
  if (stack_.empty()) return Status::error("a fragment needs an open parent element");
  if (!allowed_child(stack_.back(), kind))
    return Status::error("<" + std::string(tag_name(kind)) + "> is not allowed inside <" +
                         std::string(tag_name(stack_.back())) + ">");
  if (pending_) batch_ += ">\n";
  pending_ = false;
  // Every element is one line; a start tag's first attribute is its id (format_start_tag).
  std::string& buf = batch_;
  buf.reserve(buf.size() + text.size() + text.size() / 8);
  uint64_t expect = 0;
  for (size_t at = 0; at < text.size();) {
    size_t eol = text.find('\n', at);
    if (eol == std::string_view::npos) return Status::error("fragment does not end a line");
    std::string_view line = text.substr(at, eol + 1 - at);
    at = eol + 1;
    if (line.size() > 1 && line[0] == '<' && line[1] != '/') {
      size_t sp = line.find(' ');
      if (sp == std::string_view::npos || line.substr(sp, 4) != " i=\"")
        return Status::error("fragment element without an id");
      size_t digits = sp + 4, end = digits;
      uint64_t id = 0;
      while (end < line.size() && line[end] >= '0' && line[end] <= '9') id = id * 10 + (line[end++] - '0');
      if (end == digits || id != expect++) return Status::error("fragment ids not numbered from 0 in order");
      buf.append(line.substr(0, digits));
      buf += std::to_string(id + id_base);
      buf.append(line.substr(end));
    } else {
      buf.append(line);
    }
  }
  if (batch_.size() >= (size_t(1) << 20)) flush_batch();
  return Status();
}

Status Writer::finish() {
  if (!started_ || !stack_.empty()) return Status::error("structure file left incomplete");
  flush_batch();
  out_->flush();
  if (!*out_) return Status::error("write error");
  if (file_) {
    file_->stream.close();
    if (!file_->stream) return Status::error(file_->atomic.target().string() + ": write error");
    return file_->atomic.commit();
  }
  return Status();
}

Status write(const std::filesystem::path& path, const Structure& s) {
  HPC_ASSIGN_OR_RETURN(auto w, Writer::create(path));
  Status st = w->write_tree(s);
  if (!st.ok()) return st.prepend(path.string());
  return w->finish();
}

std::string to_string(const Structure& s) {
  std::ostringstream os;
  Writer w(os);
  Status st = w.write_tree(s);
  if (st.ok()) st = w.finish();
  return st.ok() ? os.str() : std::string();
}

void assign_ids(Structure& s) {
  uint64_t next = 2;
  auto walk = [&](auto& self, Scope& sc) -> void {
    for (Scope& c : sc.children) {
      c.id = next++;
      self(self, c);
    }
  };
  s.id = 0;
  walk(walk, s);
}

}  // namespace hpc::structfile
