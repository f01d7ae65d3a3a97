// Expr helpers and a recursive-descent parser for hpcrun's formula syntax.
#include <cctype>
#include <charconv>
#include <cstdlib>

#include "formats/metrics/metrics_yaml.hpp"

namespace hpc::metrics {

Expr Expr::num(double v) {
  Expr e;
  e.kind = Kind::Number;
  e.number = v;
  return e;
}

Expr Expr::reference(uint32_t r) {
  Expr e;
  e.kind = Kind::Ref;
  e.ref = r;
  return e;
}

Expr Expr::call(std::string op, std::vector<Expr> args) {
  Expr e;
  e.kind = Kind::Call;
  e.op = std::move(op);
  e.args = std::move(args);
  return e;
}

namespace {

class FormulaParser {
public:
  explicit FormulaParser(std::string_view t) : t_(t) {}

  Expected<Expr> run() {
    auto e = expr();
    if (e.ok()) {
      skip();
      if (i_ != t_.size()) return fail("unexpected '" + std::string(1, t_[i_]) + "'");
    }
    return e;
  }

private:
  static constexpr int kMaxDepth = 200;

  Status fail(const std::string& why) const {
    return Status::error("formula \"" + std::string(t_) + "\": at " + std::to_string(i_ + 1) +
                         ": " + why);
  }
  void skip() {
    while (i_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[i_]))) ++i_;
  }
  bool eat(char c) {
    skip();
    if (i_ < t_.size() && t_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }

  Expected<Expr> expr() {
    if (++depth_ > kMaxDepth) return fail("nested too deeply");
    HPC_ASSIGN_OR_RETURN(Expr lhs, term());
    while (true) {
      char op = eat('+') ? '+' : eat('-') ? '-' : 0;
      if (!op) break;
      HPC_ASSIGN_OR_RETURN(Expr rhs, term());
      lhs = Expr::call(std::string(1, op), {std::move(lhs), std::move(rhs)});
    }
    --depth_;
    return lhs;
  }

  Expected<Expr> term() {
    HPC_ASSIGN_OR_RETURN(Expr lhs, power());
    while (true) {
      char op = eat('*') ? '*' : eat('/') ? '/' : 0;
      if (!op) break;
      HPC_ASSIGN_OR_RETURN(Expr rhs, power());
      lhs = Expr::call(std::string(1, op), {std::move(lhs), std::move(rhs)});
    }
    return lhs;
  }

  Expected<Expr> power() {
    HPC_ASSIGN_OR_RETURN(Expr base, unary());
    if (!eat('^')) return base;
    if (++depth_ > kMaxDepth) return fail("nested too deeply");
    HPC_ASSIGN_OR_RETURN(Expr exp, power());
    --depth_;
    return Expr::call("^", {std::move(base), std::move(exp)});
  }

  Expected<Expr> unary() {
    if (eat('-')) {
      if (++depth_ > kMaxDepth) return fail("nested too deeply");
      HPC_ASSIGN_OR_RETURN(Expr e, unary());
      --depth_;
      return Expr::call("-", {Expr::num(0), std::move(e)});
    }
    return primary();
  }

  Expected<Expr> primary() {
    skip();
    if (i_ == t_.size()) return fail("expression expected");
    char c = t_[i_];
    if (c == '(') {
      ++i_;
      HPC_ASSIGN_OR_RETURN(Expr e, expr());
      if (!eat(')')) return fail("')' expected");
      return e;
    }
    if (c == '#' || c == '$') {
      ++i_;
      uint32_t id = 0;
      auto [p, ec] = std::from_chars(t_.data() + i_, t_.data() + t_.size(), id);
      if (ec != std::errc()) return fail("metric number expected");
      i_ = size_t(p - t_.data());
      return Expr::reference(id);
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      size_t start = i_;
      while (i_ < t_.size() && (std::isdigit(static_cast<unsigned char>(t_[i_])) || t_[i_] == '.'))
        ++i_;
      if (i_ < t_.size() && (t_[i_] == 'e' || t_[i_] == 'E')) {
        size_t save = i_++;
        if (i_ < t_.size() && (t_[i_] == '+' || t_[i_] == '-')) ++i_;
        if (i_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[i_]))) {
          while (i_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[i_]))) ++i_;
        } else {
          i_ = save;
        }
      }
      double v = 0;
      auto [p, ec] = std::from_chars(t_.data() + start, t_.data() + i_, v);
      if (ec != std::errc() || p != t_.data() + i_) {
        i_ = start;
        return fail("bad number");
      }
      return Expr::num(v);
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t start = i_;
      while (i_ < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[i_])) || t_[i_] == '_'))
        ++i_;
      std::string name(t_.substr(start, i_ - start));
      if (!eat('(')) return fail("'(' expected after " + name);
      std::vector<Expr> args;
      if (!eat(')')) {
        do {
          HPC_ASSIGN_OR_RETURN(Expr a, expr());
          args.push_back(std::move(a));
        } while (eat(','));
        if (!eat(')')) return fail("')' expected");
      }
      return Expr::call(std::move(name), std::move(args));
    }
    return fail("unexpected '" + std::string(1, c) + "'");
  }

  std::string_view t_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

Expected<Expr> parse_formula(std::string_view text) { return FormulaParser(text).run(); }

}  // namespace hpc::metrics
