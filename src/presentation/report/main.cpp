// hpcreport: the hottest call paths and functions of a database, for terminals and
// scripts (text, CSV or JSON), like `perf report --stdio`.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>

#include "presentation/compare.hpp"
#include "presentation/experiment.hpp"
#include "presentation/report.hpp"
#include "presentation/views.hpp"

using namespace hpc::present;

int main(int argc, char** argv) {
  CLI::App app{"hpcreport: hottest call paths and functions of an HPCToolkit database"};
  std::string dir, metric, view = "summary", format = "text", by = "function";
  size_t top = 20;
  app.add_option("DB", dir, "database directory (hpcprof's output)")->required();
  app.add_option("-m,--metric", metric, "metric name (or unique prefix, or index); default the first time metric with a value");
  app.add_option("-n,--top", top, "number of rows per section")->check(CLI::Range(size_t(1), size_t(1) << 24));
  app.add_option("-v,--view", view,
                 "summary (kinds of work, top-down and flat functions), top-down, bottom-up, flat,\n"
                 "overview (where the time went by kind of work: computation, MPI, OpenMP runtime, GPU\n"
                 "runtime, I/O, waiting; the GPU's operations; a verdict), or structure (hpcviewer's\n"
                 "flat view: load modules, "
                 "files, functions, then loops, lines, inlined code [I] and call sites ->\n"
                 "as nested in the source), or trace (hpcviewer's trace statistics: the time the\n"
                 "trace lines spent in each function, in all and the most on one line; -t runs)")
      ->check(CLI::IsMember({"summary", "top-down", "bottom-up", "flat", "overview", "structure", "trace"}));
  int traceDepth = -1;
  app.add_option("--depth", traceDepth,
                 "--view trace: the function at this call depth (0: the outermost), as the trace view\n"
                 "colours a line; default the innermost function")
      ->check(CLI::Range(0, 1 << 20))
      ->option_text("N");
  app.add_option("--by", by, "flat view grouping: module, file, function, line or loop (each loop's source line)")
      ->check(CLI::IsMember({"module", "file", "function", "line", "loop"}));
  app.add_option("-f,--format", format, "text, csv or json")->check(CLI::IsMember({"text", "csv", "json"}));
  bool list = false, listProfiles = false;
  std::string profiles;
  app.add_flag("--list-metrics", list, "list the metrics and exit");
  app.add_option("--profiles", profiles,
                 "the values of these profiles alone, summed (as hpcviewer's thread view): indices as\n"
                 "--list-profiles shows them, e.g. 1,3,5-8");
  app.add_flag("--list-profiles", listProfiles, "list the profiles (index and identity: RANK, THREAD, ...) and exit");
  std::vector<std::string> filterSpecs;
  app.add_option("--filter", filterSpecs,
                 "hide contexts of the top-down view by name, as hpcviewer's CCT filters: MODE:GLOB,\n"
                 "MODE self (the context hidden, its children in its place), descendants (its\n"
                 "children hidden) or all (hidden with its subtree); repeatable, the first match decides")
      ->option_text("MODE:GLOB");
  std::string queryText;
  app.add_option("--query", queryText,
                 "the calling contexts a call path query matches, hottest first (each named by its\n"
                 "path), how many and what the outermost ones hold: steps separated by /, each ** (any\n"
                 "number of contexts), * (one), GLOB (a name), or KIND:GLOB with KIND entry, function,\n"
                 "inlined, loop, line, instruction, module or file; a leading / anchors it at the top.\n"
                 "E.g. '**/function:MPI_*', 'main/**/loop:*', '**/module:libcuda*'. With --compare BASE:\n"
                 "what it matches in each run and the change; with --view trace: only the time at the\n"
                 "contexts it matches and below them counts")
      ->option_text("PATH");
  double atMost = -1, atLeast = -1;
  app.add_option("--at-most", atMost,
                 "with --query, a check for scripts and CI: exit status 3 (and why, on stderr) when\n"
                 "the outermost contexts matched hold more than PCT % of the metric's total")
      ->check(CLI::Range(0.0, 100.0))
      ->option_text("PCT");
  app.add_option("--at-least", atLeast, "with --query: exit status 3 when they hold less than PCT %")
      ->check(CLI::Range(0.0, 100.0))
      ->option_text("PCT");
  std::string baseline;
  app.add_option("--compare", baseline,
                 "DB against a baseline database BASE (another run: before a change, another input or\n"
                 "machine): the metric's values in both, the change, matched by name: flat rows by\n"
                 "--by (exclusive) and calling contexts by their path (inclusive), largest change first;\n"
                 "--view flat or top-down for one of the two")
      ->option_text("BASE");
  CLI11_PARSE(app, argc, argv);

  auto exp = Experiment::open(dir);
  if (!exp) {
    std::cerr << "hpcreport: " << exp.status().message() << "\n";
    return 1;
  }
  Experiment& e = **exp;
  if (listProfiles) {
    for (size_t i = 1; i < e.profiles().size(); ++i) std::cout << i << "\t" << e.profile_label(i) << "\n";
    return 0;
  }
  if (!profiles.empty()) {
    auto chosen = parse_profile_list(profiles, e.profiles().size(), "--profiles");
    if (!chosen.ok()) {
      std::cerr << "hpcreport: " << chosen.status().message() << "\n";
      return 2;
    }
    e.select_profiles(std::move(*chosen));
  }
  if (list) {
    for (size_t i = 0; i < e.metrics().size(); ++i) std::cout << i << "\t" << e.metrics()[i].name << "\n";
    return 0;
  }
  if (e.metrics().empty()) {
    std::cerr << "hpcreport: " << (e.dir() / "meta.db").string() << ": the database has no metrics\n";
    return 1;
  }
  ReportOptions o;
  o.metric = e.default_metric();
  if (!metric.empty()) {
    int m = e.find_metric(metric);
    if (m < 0) {
      std::cerr << "hpcreport: no metric (or more than one) matches '" << metric << "'; metrics are:\n";
      for (auto& mv : e.metrics()) std::cerr << "  " << mv.name << "\n";
      return 2;
    }
    o.metric = size_t(m);
  }
  o.top = top;
  o.view = view == "top-down" ? ReportView::TopDown : view == "bottom-up" ? ReportView::BottomUp
           : view == "flat"   ? ReportView::Flat : view == "overview" ? ReportView::Overview
           : view == "structure" ? ReportView::Structure : view == "trace" ? ReportView::Trace : ReportView::Summary;
  o.traceDepth = traceDepth;
  if (o.view == ReportView::Trace) {
    auto tr = e.trace();
    if (!tr.ok() || !*tr) {
      std::cerr << "hpcreport: " << (tr.ok() ? (e.dir() / "trace.db").string() + ": no traces (measure with hpcrun -t)"
                                             : tr.status().message())
                << "\n";
      return 1;
    }
  }
  parse_flat_by(by, o.by);
  o.format = format == "csv" ? ReportFormat::Csv : format == "json" ? ReportFormat::Json : ReportFormat::Text;
  if (!queryText.empty()) {
    auto q = parse_path_query(queryText);
    if (!q.ok()) {
      std::cerr << "hpcreport: --query: " << q.status().message() << "\n";
      return 2;
    }
    if (app.count("--view") && view != "summary" && view != "trace") {
      std::cerr << "hpcreport: --query is a view of its own (or, with --view trace, the contexts whose time in the "
                   "traces counts); leave out --view "
                << view << "\n";
      return 2;
    }
    if (view != "trace") o.view = ReportView::Query;
    o.query = std::move(*q);
    o.queryText = queryText;
  }
  for (const std::string& f : filterSpecs) {
    const size_t colon = f.find(':');
    CctFilter c;
    if (colon == std::string::npos || !parse_filter_mode(f.substr(0, colon), c.mode) || colon + 1 == f.size()) {
      std::cerr << "hpcreport: --filter '" << f << "' is not MODE:GLOB with MODE self, descendants or all\n";
      return 2;
    }
    c.pattern = f.substr(colon + 1);
    o.filters.push_back(std::move(c));
  }
  if ((atMost >= 0 || atLeast >= 0) && queryText.empty()) {
    std::cerr << "hpcreport: --at-most and --at-least check what --query matches; give --query PATH\n";
    return 2;
  }
  // --at-most / --at-least: 3 (and why) when what the query matches in DB holds more or less.
  auto check_share = [&]() {
    if (atMost < 0 && atLeast < 0) return 0;
    const MetricView& m = e.metrics()[o.metric];
    const double total = e.inclusive(0, m);
    const QueryTotals t = query_totals(e, o.query, m);
    const double share = total != 0 ? 100.0 * t.inclusive / total : 0.0;
    char buf[256];
    if (atMost >= 0 && share > atMost) {
      std::snprintf(buf, sizeof buf, "%.2f %% of %s, more than %g %%", share, m.name.c_str(), atMost);
    } else if (atLeast >= 0 && share < atLeast) {
      std::snprintf(buf, sizeof buf, "%.2f %% of %s, less than %g %%", share, m.name.c_str(), atLeast);
    } else {
      return 0;
    }
    std::cerr << "hpcreport: check failed: what '" << queryText << "' matches (" << t.outermost
              << " outermost contexts) holds " << buf << "\n";
    return 3;
  };
  if (!baseline.empty()) {
    auto base = Experiment::open(baseline);
    if (!base) {
      std::cerr << "hpcreport: " << base.status().message() << "\n";
      return 1;
    }
    if (!profiles.empty()) {
      std::cerr << "hpcreport: --profiles and --compare do not go together\n";
      return 2;
    }
    const std::string& mname = e.metrics()[o.metric].name;
    const auto& baseMetrics = (*base)->metrics();
    auto baseMetric = std::find_if(baseMetrics.begin(), baseMetrics.end(), [&](const MetricView& m) { return m.name == mname; });
    if (baseMetric == baseMetrics.end()) {
      std::cerr << "hpcreport: " << ((*base)->dir() / "meta.db").string() << ": no metric '" << mname
                << "' to compare with; its metrics are:\n";
      for (auto& mv : baseMetrics) std::cerr << "  " << mv.name << "\n";
      return 2;
    }
    if (o.view == ReportView::Query) {
      // What the query matches in each run (it names contexts, so it reads both alike).
      const QueryTotals a = query_totals(**base, o.query, *baseMetric), b = query_totals(e, o.query, e.metrics()[o.metric]);
      const double ta = (*base)->inclusive(0, *baseMetric), tb = e.inclusive(0, e.metrics()[o.metric]);
      const double pa = ta != 0 ? 100.0 * a.inclusive / ta : 0.0, pb = tb != 0 ? 100.0 * b.inclusive / tb : 0.0;
      if (o.format == ReportFormat::Json) {
        auto side = [](const QueryTotals& t, double pct) {
          return nlohmann::json{{"contexts", t.matched}, {"outermost", t.outermost}, {"inclusive", t.inclusive}, {"percent", pct}};
        };
        std::cout << nlohmann::json{{"query", queryText}, {"metric", mname}, {"baseline", side(a, pa)}, {"run", side(b, pb)},
                                    {"change", b.inclusive - a.inclusive}, {"change_percent_points", pb - pa}}.dump(1)
                  << "\n";
      } else if (o.format == ReportFormat::Csv) {
        std::cout << "database,contexts,outermost,inclusive,percent\n"
                  << csv_field((*base)->dir().string()) << ',' << a.matched << ',' << a.outermost << ','
                  << format_number(a.inclusive) << ',' << format_number(pa) << '\n'
                  << csv_field(e.dir().string()) << ',' << b.matched << ',' << b.outermost << ','
                  << format_number(b.inclusive) << ',' << format_number(pb) << '\n';
      } else {
        char line[160];
        std::cout << "# Query: " << queryText << " (" << mname << ", the outermost contexts matched)\n";
        std::snprintf(line, sizeof line, "%14s %7.2f%%  %zu contexts, %zu outermost  baseline: ", format_number(a.inclusive).c_str(),
                      pa, a.matched, a.outermost);
        std::cout << line << (*base)->dir().string() << "\n";
        std::snprintf(line, sizeof line, "%14s %7.2f%%  %zu contexts, %zu outermost  this run: ", format_number(b.inclusive).c_str(),
                      pb, b.matched, b.outermost);
        std::cout << line << e.dir().string() << "\n";
        std::snprintf(line, sizeof line, "%14s %+7.2f   points of the total\n", format_number(b.inclusive - a.inclusive).c_str(),
                      pb - pa);
        std::cout << line;
      }
      if (!std::cout.good()) return 1;
      return check_share();
    }
    if (o.view != ReportView::Summary && o.view != ReportView::Flat && o.view != ReportView::TopDown) {
      std::cerr << "hpcreport: --compare shows the flat view and the calling contexts (--view summary, flat or "
                   "top-down), not --view "
                << view << "\n";
      return 2;
    }
    CompareOptions c;
    c.flat = o.view != ReportView::TopDown;
    c.topDown = o.view != ReportView::Flat;
    c.metricB = o.metric;
    c.top = top;
    c.by = o.by;
    c.format = o.format;
    c.metricA = size_t(baseMetric - baseMetrics.begin());
    print_comparison(**base, e, c, std::cout);
    return std::cout.good() ? 0 : 1;
  }
  print_report(e, o, std::cout);
  if (!std::cout.good()) return 1;
  return check_share();
}
