#include "formats/metrics/metrics_yaml.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>

#include "common/file.hpp"
#include "formats/hpcrun/hpcrun.hpp"

// Designated initializers name only the fields a test sets.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace hpc::metrics {
namespace {

namespace fs = std::filesystem;

TEST(MetricsFormula, ParsesHpcrunSyntax) {
  auto e = parse_formula("min(100, max(0, 100*#27/#26))");
  ASSERT_TRUE(e.ok()) << e.status().message();
  Expr want = Expr::call(
      "min", {Expr::num(100),
              Expr::call("max", {Expr::num(0),
                                 Expr::call("/", {Expr::call("*", {Expr::num(100), Expr::reference(27)}),
                                                  Expr::reference(26)})})});
  EXPECT_TRUE(*e == want);
  auto f = parse_formula(" (#5/#5) + ($6/#5) ");
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(*f == Expr::call("+", {Expr::call("/", {Expr::reference(5), Expr::reference(5)}),
                                     Expr::call("/", {Expr::reference(6), Expr::reference(5)})}));
  auto g = parse_formula("2^3^-1.5e1 - f()");
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(*g == Expr::call("-", {Expr::call("^", {Expr::num(2),
                                                      Expr::call("^", {Expr::num(3),
                                                                       Expr::call("-", {Expr::num(0), Expr::num(15)})})}),
                                     Expr::call("f", {})}));
  for (const char* bad : {"", "#", "1 +", "(1", "1)", "min(1,", "foo", "1 2", "#x", "1.2.3", "@"})
    EXPECT_FALSE(parse_formula(bad).ok()) << bad;
  EXPECT_FALSE(parse_formula(std::string(10000, '(')).ok());
  EXPECT_FALSE(parse_formula(std::string(10000, '-')).ok());
}

TEST(MetricsYaml, SmallIsByteIdenticalToTheReference) {
  auto t = default_taxonomy({MetricSpec{.name = "CPUTIME (sec)", .description = "CPUTIME (sec)"}});
  ASSERT_TRUE(t.ok());
  auto ref = read_text_file(fs::path(HPC_SHARED_DIR) / "conformance/dbase/small.d/metrics/default.yaml");
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ(to_yaml(*t), *ref);
}

TEST(MetricsYaml, QuotingAndLayout) {
  Taxonomy t;
  uint32_t a = t.input({"a: b", Scope::Function});
  uint32_t b = t.input({"x", Scope::Point, "$$^2", Combine::Max});
  EXPECT_EQ(t.input({"a: b", Scope::Function}), a);
  Metric m;
  m.name = "true";
  m.description = "line1\nline2 \"q\"";
  m.visible_by_default = false;
  m.format = "%6.2f %%";
  Variant v;
  v.name = "";
  v.render = {"number"};
  v.exclusive = FormulaPair{std::nullopt, Expr::call("*", {Expr::num(0.5), Expr::reference(a),
                                                           Expr::call("-", {Expr::reference(b)})})};
  m.variants = {v};
  Metric child;
  child.name = "child";
  child.description = "[x]";
  m.children = {child};
  t.roots = {m};
  std::string y = to_yaml(t);
  EXPECT_EQ(y,
            "version: 0\ninputs:\n"
            "  - &ax3a_x20_b-sum-x5b_0x0x5d_-function\n    metric: \"a: b\"\n    scope: function\n"
            "    formula: $$\n    combine: sum\n"
            "  - &x-max-x5b_0x0x5d_x5e_2-point\n    metric: x\n    scope: point\n"
            "    formula: $$^2\n    combine: max\n"
            "roots:\n"
            "  - name: \"true\"\n    description: \"line1\\nline2 \\\"q\\\"\"\n"
            "    visible by default: false\n    format: \"%6.2f %%\"\n    variants:\n"
            "      \"\":\n        render: [number]\n        formula:\n          exclusive:\n"
            "            standard: {\"*\": [0.5, *ax3a_x20_b-sum-x5b_0x0x5d_-function, "
            "{\"-\": [*x-max-x5b_0x0x5d_x5e_2-point]}]}\n"
            "    children:\n      - name: child\n        description: \"[x]\"");
  t.roots[0].variants[0].exclusive->standard = Expr::reference(7);
  EXPECT_EQ(to_yaml(t), "");
  EXPECT_FALSE(write(fs::path(HPC_BINARY_DIR) / "bad.yaml", t).ok());
}

TEST(MetricsYaml, DerivedMetricsMustReferToMeasuredOnes) {
  std::vector<MetricSpec> specs(2);
  specs[0].name = "a";
  specs[1].name = "b";
  specs[1].formula = Expr::reference(1);
  EXPECT_FALSE(default_taxonomy(specs).ok());
  specs[1].formula = Expr::reference(9);
  EXPECT_FALSE(default_taxonomy(specs).ok());
  specs[1].formula = Expr::reference(0);
  EXPECT_TRUE(default_taxonomy(specs).ok());
}

// The metric list hpcprof would build from the measurements' hpcrun metric tables:
// unified by name in order of first appearance (profiles sorted by file name).
std::vector<MetricSpec> specs_from_measurements(const fs::path& meas) {
  std::vector<fs::path> profiles;
  for (auto& e : fs::directory_iterator(meas))
    if (e.path().extension() == ".hpcrun") profiles.push_back(e.path());
  std::sort(profiles.begin(), profiles.end());
  std::vector<MetricSpec> out;
  std::map<std::string, uint32_t> index;
  struct Pending {
    uint32_t metric;
    std::string formula;
    std::vector<std::string> table;  // names by the profile's own metric ids
  };
  std::vector<Pending> pending;
  for (const auto& p : profiles) {
    auto prof = hpcrun::read_profile(p);
    EXPECT_TRUE(prof.ok()) << prof.status().message();
    if (!prof.ok()) continue;
    std::vector<std::string> table;
    for (const auto& m : prof->metrics) table.push_back(m.name);
    for (const auto& m : prof->metrics) {
      if (index.count(m.name)) continue;
      index[m.name] = uint32_t(out.size());
      MetricSpec s;
      s.name = m.name;
      s.description = m.description;
      s.visible = m.flags.show != 0;
      s.inclusive = m.flags.show != 3;
      s.listed = m.flags.show != 4;
      s.percent = m.flags.show_percent != 0;
      s.format = m.format;
      if (!m.formula.empty()) pending.push_back({uint32_t(out.size()), m.formula, table});
      out.push_back(std::move(s));
    }
  }
  // Formulas name metrics by the profile's ids, possibly later in its table.
  for (const auto& pf : pending) {
    auto f = parse_formula(pf.formula);
    EXPECT_TRUE(f.ok()) << f.status().message();
    if (!f.ok()) continue;
    auto remap = [&](auto& self, Expr& e) -> void {
      if (e.kind == Expr::Kind::Ref) e.ref = index.at(pf.table.at(e.ref));
      for (auto& a : e.args) self(self, a);
    };
    remap(remap, *f);
    out[pf.metric].formula = std::move(*f);
  }
  return out;
}

TEST(MetricsYaml, ConformanceDatabasesMatchTheReference) {
  if (std::system("/usr/bin/python3 -c 'import ruamel.yaml' 2>/dev/null") != 0)
    GTEST_SKIP() << "python3 with ruamel.yaml needed";
  fs::path kit = fs::path(HPC_SHARED_DIR) / "conformance";
  fs::path tmp = fs::path(HPC_BINARY_DIR) / "metrics_yaml_test_tmp";
  fs::create_directories(tmp);
  int cases = 0;
  for (auto& e : fs::directory_iterator(kit / "dbase")) {
    std::string name = e.path().filename().string();
    std::string meas = name.substr(0, name.find('.')) + ".m";
    if (!fs::exists(kit / "meas" / meas)) continue;
    auto t = default_taxonomy(specs_from_measurements(kit / "meas" / meas));
    ASSERT_TRUE(t.ok()) << t.status().message();
    fs::path ours = tmp / (name + ".yaml");
    ASSERT_TRUE(write(ours, *t).ok());
    std::string cmd = "/usr/bin/python3 '" HPC_SOURCE_DIR "/src/formats/metrics/metrics_compare.py' '" +
                      ours.string() + "' '" + (e.path() / "metrics/default.yaml").string() + "'";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << name;
    ++cases;
  }
  EXPECT_GE(cases, 8);
}

}  // namespace
}  // namespace hpc::metrics
