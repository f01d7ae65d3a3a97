// metrics/default.yaml in the reference's layout: block style throughout, formulas in
// flow style, one anchor per input.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <set>

#include "common/file.hpp"
#include "formats/metrics/metrics_yaml.hpp"

namespace hpc::metrics {
namespace {

bool needs_quotes(std::string_view s) {
  if (s.empty() || s.front() == ' ' || s.back() == ' ' || s.back() == ':') return true;
  static constexpr std::string_view kIndicators = "-?:,[]{}#&*!|>'\"%@`";
  char f = s.front();
  if (kIndicators.find(f) != std::string_view::npos || std::isdigit(static_cast<unsigned char>(f)) ||
      f == '.' || f == '+' || f == '~')
    return true;
  if (s.find(": ") != std::string_view::npos || s.find('#') != std::string_view::npos) return true;
  for (char c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == ',' || c == '[' || c == ']' ||
        c == '{' || c == '}')
      return true;
  // Words a YAML reader would take for a boolean or null.
  std::string lower;
  for (char c : s) lower += char(std::tolower(static_cast<unsigned char>(c)));
  for (const char* w : {"null", "true", "false", "yes", "no", "on", "off", "y", "n"})
    if (lower == w) return true;
  return false;
}

std::string scalar(std::string_view s) {
  if (!needs_quotes(s)) return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string number(double v) {
  if (std::isnan(v)) return ".nan";
  if (std::isinf(v)) return v > 0 ? ".inf" : "-.inf";
  if (v == std::trunc(v) && std::fabs(v) < 1e15) return std::to_string(int64_t(v));
  char buf[64];
  auto [p, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, p);
}

// Anchor names keep [A-Za-z0-9_] and write any other byte as x<hex>_, as the
// reference does: "CPUTIME (sec)" -> "CPUTIMEx20_x28_secx29_".
std::string anchor_part(std::string_view s) {
  std::string out;
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '_') {
      out += c;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "x%x_", u);
      out += buf;
    }
  }
  return out;
}

// The reference names the statistic's "$$" variable "[0x0]" in its anchors.
std::string formula_part(std::string_view f) {
  std::string s;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f.substr(i, 2) == "$$") {
      s += "[0x0]";
      ++i;
    } else {
      s += f[i];
    }
  }
  return anchor_part(s);
}

class Emitter {
public:
  explicit Emitter(const Taxonomy& t) : t_(t) {
    std::set<std::string> used;
    for (const Input& in : t.inputs) {
      std::string base = anchor_part(in.metric) + "-" + std::string(combine_name(in.combine)) +
                         "-" + formula_part(in.formula) + "-" + std::string(scope_name(in.scope));
      std::string a = base;
      for (int k = 2; used.count(a); ++k) a = base + "-" + std::to_string(k);
      used.insert(a);
      anchors_.push_back(a);
    }
  }

  Expected<std::string> run() {
    out_ = "version: 0\ninputs:\n";
    for (size_t i = 0; i < t_.inputs.size(); ++i) {
      const Input& in = t_.inputs[i];
      out_ += "  - &" + anchors_[i] + "\n";
      out_ += "    metric: " + scalar(in.metric) + "\n";
      out_ += "    scope: " + std::string(scope_name(in.scope)) + "\n";
      out_ += "    formula: " + scalar(in.formula) + "\n";
      out_ += "    combine: " + std::string(combine_name(in.combine)) + "\n";
    }
    out_ += "roots:\n";
    for (const Metric& m : t_.roots) HPC_RETURN_IF_ERROR(metric(m, 2));
    out_.pop_back();  // the reference ends without a newline
    return std::move(out_);
  }

private:
  Status metric(const Metric& m, size_t indent) {
    std::string pad(indent, ' ');
    out_ += pad + "- name: " + scalar(m.name) + "\n";
    pad += "  ";
    out_ += pad + "description: " + scalar(m.description) + "\n";
    if (m.visible_by_default)
      out_ += pad + "visible by default: " + (*m.visible_by_default ? "true" : "false") + "\n";
    if (m.format) out_ += pad + "format: " + scalar(*m.format) + "\n";
    if (!m.variants.empty()) {
      out_ += pad + "variants:\n";
      for (const Variant& v : m.variants) HPC_RETURN_IF_ERROR(variant(v, indent + 4));
    }
    if (!m.children.empty()) {
      out_ += pad + "children:\n";
      for (const Metric& c : m.children) HPC_RETURN_IF_ERROR(metric(c, indent + 4));
    }
    return Status();
  }

  Status variant(const Variant& v, size_t indent) {
    std::string pad(indent, ' ');
    out_ += pad + scalar(v.name) + ":\n";
    pad += "  ";
    out_ += pad + "render: [";
    for (size_t i = 0; i < v.render.size(); ++i) out_ += (i ? ", " : "") + scalar(v.render[i]);
    out_ += "]\n";
    if (!v.inclusive && !v.exclusive) return Status();
    out_ += pad + "formula:\n";
    for (auto [key, pair] : {std::pair{"inclusive", &v.inclusive}, {"exclusive", &v.exclusive}}) {
      if (!*pair) continue;
      out_ += pad + "  " + key + ":\n";
      for (auto [which, e] : {std::pair{"custom", &(*pair)->custom}, {"standard", &(*pair)->standard}}) {
        if (!*e) continue;
        std::string text;
        HPC_RETURN_IF_ERROR(expr(**e, text, 0));
        out_ += pad + "    " + which + ": " + text + "\n";
      }
    }
    return Status();
  }

  Status expr(const Expr& e, std::string& out, int depth) {
    if (depth > 500) return Status::error("metric formula nested too deeply");
    switch (e.kind) {
      case Expr::Kind::Number: out += number(e.number); break;
      case Expr::Kind::Ref:
        if (e.ref >= anchors_.size())
          return Status::error("metric formula refers to input " + std::to_string(e.ref) +
                               " of " + std::to_string(anchors_.size()));
        out += "*" + anchors_[e.ref];
        break;
      case Expr::Kind::Call:
        out += "{" + scalar(e.op) + ": [";
        for (size_t i = 0; i < e.args.size(); ++i) {
          if (i) out += ", ";
          HPC_RETURN_IF_ERROR(expr(e.args[i], out, depth + 1));
        }
        out += "]}";
        break;
    }
    return Status();
  }

  const Taxonomy& t_;
  std::vector<std::string> anchors_;
  std::string out_;
};

}  // namespace

std::string to_yaml(const Taxonomy& t) {
  auto r = Emitter(t).run();
  return r.ok() ? std::move(*r) : std::string();
}

Status write(const std::filesystem::path& path, const Taxonomy& t) {
  auto r = Emitter(t).run();
  if (!r.ok()) return std::move(r).take_status().prepend(path.string());
  return write_file_atomically(path, std::string_view(*r));
}

}  // namespace hpc::metrics
