// hpcreport's rendering: the hottest call paths (top-down), functions with their
// callers (bottom-up) and flat aggregations, as text, CSV or JSON.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "presentation/experiment.hpp"
#include "presentation/views.hpp"

namespace hpc::present {

// Summary: the overview's kinds of work and verdict (text), top-down and flat functions.
// Overview: where the time went by kind of work, in detail (overview.hpp).
// Structure: hpcviewer's flat view, the static structure as a tree (views.hpp: StaticTree).
enum class ReportView { Summary, TopDown, BottomUp, Flat, Overview, Structure, Query, Trace };
enum class ReportFormat { Text, Csv, Json };

struct ReportOptions {
  size_t metric = 0;  // index into Experiment::metrics()
  size_t top = 20;
  ReportView view = ReportView::Summary;
  FlatBy by = FlatBy::Function;
  ReportFormat format = ReportFormat::Text;
  std::vector<CctFilter> filters;  // the top-down tree as hpcviewer's CCT filters show it
  // ReportView::Query: the contexts a call path query matches (views.hpp), hottest first;
  // rows of section "query", id the ctxId, name the path's entry point and functions down to
  // the context, depth 0 for an outermost match and 1 for one below another match.
  PathQuery query;
  std::string queryText;
  // ReportView::Trace: the time the trace lines spent in each function (hpcviewer's trace
  // statistics): at this call depth (0: the outermost), as the trace view colours a line,
  // or the innermost function where negative. Rows of section "trace": id "f<index>", "idle",
  // "none" (no function on the path) or "unknown" (a context meta.db does not list);
  // inclusive the seconds summed over the lines, exclusive the most one line spent there.
  int traceDepth = -1;
};

struct ReportRow {
  std::string section;  // "top-down", "bottom-up", "flat-function", ...
  uint32_t depth = 0;   // tree depth within the section (0 for flat rows)
  std::string id;       // ctxId; bottom-up key path "f3/f1/e6"; flat key; structure key path
  std::string name;
  double inc = 0, exc = 0;
};

std::vector<ReportRow> report_rows(const Experiment& e, const ReportOptions& o);
// What a call path query matches: how many contexts, how many outermost, and the metric's
// inclusive value summed over the outermost (each cost once).
struct QueryTotals {
  size_t matched = 0, outermost = 0;
  double inclusive = 0;
};
QueryTotals query_totals(const Experiment& e, const PathQuery& q, const MetricView& m);
// The metric the overview breaks down: `metric` unless it is one of the GPU's (a kernel's
// time is attributed to the CPU code that launched it, the GPU runtime) or counts bytes (-e
// IO, -e MEMLEAK), then the first CPU time metric with a value; -1 where the database has
// none (the GPU's operations only, or bytes only).
int overview_metric(const Experiment& e, size_t metric);

// hpcrun -e MEMLEAK's databases: per allocating function, the bytes allocated and not freed
// (Bytes Allocated less Bytes Freed, exclusive), the `top` largest; empty without both.
struct LeakRow {
  std::string name;
  double leaked = 0, allocated = 0;
};
std::vector<LeakRow> leak_rows(const Experiment& e, size_t top);
void print_report(const Experiment& e, const ReportOptions& o, std::ostream& os);
// Text for reports: a CSV field quoted where it must be; a number as %.6g.
std::string csv_field(const std::string& s);
std::string format_number(double v);

}  // namespace hpc::present
