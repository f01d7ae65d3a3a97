// The reference hpcprof's default taxonomy: one root per listed metric.
#include <array>

#include "formats/metrics/metrics_yaml.hpp"

namespace hpc::metrics {

std::string_view scope_name(Scope s) {
  switch (s) {
    case Scope::Point: return "point";
    case Scope::Function: return "function";
    case Scope::LexAware: return "lex_aware";
    case Scope::Execution: return "execution";
  }
  return "?";
}

std::string_view combine_name(Combine c) {
  switch (c) {
    case Combine::Sum: return "sum";
    case Combine::Min: return "min";
    case Combine::Max: return "max";
  }
  return "?";
}

uint32_t Taxonomy::input(const Input& in) {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i] == in) return uint32_t(i);
  inputs.push_back(in);
  return uint32_t(inputs.size() - 1);
}

namespace {

constexpr Scope kInputScopes[] = {Scope::Execution, Scope::LexAware, Scope::Function};

// Rewrites metric references into references to that metric's input in `scope`.
Expected<Expr> bind(const Expr& e, Scope scope, const std::vector<MetricSpec>& metrics,
                    const std::vector<std::array<uint32_t, 3>>& ids, const std::string& owner) {
  Expr out = e;
  if (e.kind == Expr::Kind::Ref) {
    if (e.ref >= metrics.size() || metrics[e.ref].formula)
      return Status::error("metric " + owner + ": formula refers to metric " +
                           std::to_string(e.ref) + ", which is not a measured metric");
    size_t k = scope == Scope::Execution ? 0 : scope == Scope::LexAware ? 1 : 2;
    out.ref = ids[e.ref][k];
  }
  for (size_t i = 0; i < e.args.size(); ++i) {
    HPC_ASSIGN_OR_RETURN(out.args[i], bind(e.args[i], scope, metrics, ids, owner));
  }
  return out;
}

}  // namespace

Expected<Taxonomy> default_taxonomy(const std::vector<MetricSpec>& metrics) {
  Taxonomy t;
  std::vector<std::array<uint32_t, 3>> ids(metrics.size());
  for (size_t m = 0; m < metrics.size(); ++m) {
    if (metrics[m].formula) continue;
    for (size_t k = 0; k < 3; ++k) ids[m][k] = t.input(Input{metrics[m].name, kInputScopes[k]});
  }
  for (size_t m = 0; m < metrics.size(); ++m) {
    const MetricSpec& s = metrics[m];
    if (!s.listed) continue;
    Metric out;
    out.name = s.name;
    out.description = s.description;
    if (!s.visible) out.visible_by_default = false;
    if (!s.format.empty()) out.format = s.format;
    Variant v;
    v.name = s.formula ? "" : "Sum";
    v.render = s.percent ? std::vector<std::string>{"number", "percent"}
                         : std::vector<std::string>{"number"};
    Expr self = s.formula ? *s.formula : Expr::reference(uint32_t(m));
    auto in = [&](Scope sc) { return bind(self, sc, metrics, ids, s.name); };
    if (s.inclusive) {
      HPC_ASSIGN_OR_RETURN(Expr e, in(Scope::Execution));
      v.inclusive = FormulaPair{std::nullopt, std::move(e)};
    }
    HPC_ASSIGN_OR_RETURN(Expr custom, in(Scope::LexAware));
    HPC_ASSIGN_OR_RETURN(Expr standard, in(Scope::Function));
    v.exclusive = FormulaPair{std::move(custom), std::move(standard)};
    out.variants.push_back(std::move(v));
    t.roots.push_back(std::move(out));
  }
  return t;
}

}  // namespace hpc::metrics
