// The metric taxonomy of a database, metrics/default.yaml (spec: shared/reference/
// METRICS.yaml): what the viewer shows as metric columns and how each column's values are
// computed from the summary statistics in meta.db. Two levels: Taxonomy mirrors the file
// (inputs with anchors, roots with variants and formulas); MetricSpec is the database's
// metric list as hpcprof knows it, and default_taxonomy() turns one into the other the
// way the reference hpcprof does. See README.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.hpp"

namespace hpc::metrics {

// Propagation scopes of a metric (FORMATS.md, meta.db "Performance metrics").
enum class Scope : uint8_t { Point, Function, LexAware, Execution };
std::string_view scope_name(Scope s);  // "point", "function", "lex_aware", "execution"

enum class Combine : uint8_t { Sum, Min, Max };
std::string_view combine_name(Combine c);  // "sum", "min", "max"

// A formula: a number, a reference (to a metric in a MetricSpec list, or to an input in
// a Taxonomy), or an operator or function applied to arguments. Operators are binary
// and written as the reference does, as one-pair maps: a/b -> {/: [a, b]}.
struct Expr {
  enum class Kind : uint8_t { Number, Ref, Call };
  Kind kind = Kind::Number;
  double number = 0;
  uint32_t ref = 0;
  std::string op;  // "+", "-", "*", "/", "^" or a function: "min", "max", "sum", "sqrt", ...
  std::vector<Expr> args;

  static Expr num(double v);
  static Expr reference(uint32_t r);
  static Expr call(std::string op, std::vector<Expr> args);
  bool operator==(const Expr&) const = default;
};

// hpcrun's formula syntax (MetricDesc::formula): numbers, "#N" or "$N" for metric N of
// the same profile, + - * / ^ with the usual precedence (left-associative, ^ right),
// parentheses and calls f(a, b, ...). Unary minus becomes 0 - x.
Expected<Expr> parse_formula(std::string_view text);

// ---- The file's own model ----
struct Input {
  std::string metric;           // the metric's name in meta.db
  Scope scope = Scope::Execution;
  std::string formula = "$$";   // the statistic's accumulation formula
  Combine combine = Combine::Sum;
  bool operator==(const Input&) const = default;
};

// Refs in these Exprs index Taxonomy::inputs.
struct FormulaPair {
  std::optional<Expr> custom, standard;
};

struct Variant {
  std::string name;                 // "Sum", "Mean", ... ("" for a derived metric's only one)
  std::vector<std::string> render;  // "number", "percent", "colorbar", "hidden"
  std::optional<FormulaPair> inclusive, exclusive;
};

struct Metric {
  std::string name, description;
  std::optional<bool> visible_by_default;
  std::optional<std::string> format;  // printf format, e.g. "%6.2f %%"
  std::vector<Variant> variants;
  std::vector<Metric> children;
};

struct Taxonomy {
  std::vector<Input> inputs;
  std::vector<Metric> roots;
  // Index of `in` in inputs, appended if not yet there.
  uint32_t input(const Input& in);
};

// The YAML text in the reference's layout: block style, each input anchored with a name
// derived from its fields, formulas in flow style, aliases for references.
std::string to_yaml(const Taxonomy& t);
// Written atomically.
Status write(const std::filesystem::path& path, const Taxonomy& t);

// ---- The database's metrics as hpcprof sees them ----
// For metrics from hpcrun's metric table (flags.show / show_percent / formula / format):
//   show 0 -> visible=false; 3 -> inclusive=false; 4 -> listed=false;
//   show_percent 0 -> percent=false; a non-empty formula -> formula=parse_formula(it)
//   with each #N remapped to the metric's index in this list.
struct MetricSpec {
  std::string name, description;
  bool visible = true;    // "visible by default"
  bool listed = true;     // false: only an input for other metrics' formulas
  bool inclusive = true;  // false: exclusive values only
  bool percent = true;    // render a percentage beside the number
  std::string format;     // "" for the viewer's default
  // A derived metric (no values of its own): Refs index this MetricSpec list and must
  // name non-derived metrics.
  std::optional<Expr> formula;
};

// Every non-derived metric becomes three inputs (execution, lex_aware, function; sum of
// "$$"); every listed metric a root with one variant: "Sum" (or "" when derived) whose
// inclusive value is the execution input (standard) and exclusive value the lex_aware
// input (custom) and the function input (standard).
Expected<Taxonomy> default_taxonomy(const std::vector<MetricSpec>& metrics);

}  // namespace hpc::metrics
