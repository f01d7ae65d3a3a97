// Viewer response times on a database, without HTTP: open (meta.db + profile.db), the
// first screen (the root's children along the hot path, as the profile view opens), the
// flat and bottom-up views, per-profile values of the hottest context (cct.db), and one
// trace screen (trace.db) at a given pixel width. Prints each figure and the resident
// memory against the database size.
//   viewer_bench DB [width=1920] [rows=1000]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "presentation/trace_view.hpp"
#include "presentation/views.hpp"

namespace fs = std::filesystem;
using namespace hpc::present;

namespace {
double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}
double status_mib(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string k;
  while (f >> k)
    if (k == key) {
      double kb;
      f >> kb;
      return kb / 1024;
    }
  return 0;
}
double rss_mib() { return status_mib("VmRSS:"); }
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: viewer_bench DB [width] [rows]\n");
    return 2;
  }
  fs::path dir = argv[1];
  uint32_t width = argc > 2 ? uint32_t(std::atoi(argv[2])) : 1920, rows = argc > 3 ? uint32_t(std::atoi(argv[3])) : 1000;
  double dbMiB = 0;
  for (auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) dbMiB += double(e.file_size()) / (1 << 20);

  auto t = std::chrono::steady_clock::now();
  auto exp = Experiment::open(dir);
  if (!exp) {
    std::fprintf(stderr, "viewer_bench: %s\n", exp.status().message().c_str());
    return 1;
  }
  const Experiment& e = **exp;
  double openMs = ms_since(t);
  double openPeak = status_mib("VmHWM:");
  const MetricView& m = e.metrics()[e.default_metric()];

  t = std::chrono::steady_clock::now();
  auto path = hot_path(e, 0, m, 0.5);
  size_t shown = 0;
  for (uint32_t c : path) shown += sorted_children(e, c, m).size();
  double firstMs = ms_since(t);

  t = std::chrono::steady_clock::now();
  auto pv = profile_values(e, path.back(), m.incProp);
  double pvFirstMs = ms_since(t);
  t = std::chrono::steady_clock::now();
  pv = profile_values(e, path.size() > 1 ? path[1] : 0, m.incProp);
  double pvMs = ms_since(t);

  t = std::chrono::steady_clock::now();
  auto tr = e.trace();
  double traceLoadMs = ms_since(t);
  double traceMs = -1, traceZoomMs = -1;
  size_t lines = 0, records = 0;
  if (tr.ok() && *tr) {
    lines = (*tr)->size();
    records = (*tr)->records();
    TraceQuery q{(*tr)->minTimestamp(), (*tr)->maxTimestamp(), 0, uint32_t(lines), rows, width, 3};
    t = std::chrono::steady_clock::now();
    auto px = trace_pixels(e, q);
    traceMs = ms_since(t);
    q.t1 = q.t0 + (q.t1 - q.t0) / 100;
    t = std::chrono::steady_clock::now();
    px = trace_pixels(e, q);
    traceZoomMs = ms_since(t);
  }
  e.release_pages();  // as hpcserver does after each request
  double typicalPeak = status_mib("VmHWM:");
  double typicalMiB = rss_mib(), typicalAnon = status_mib("RssAnon:"), typicalFile = status_mib("RssFile:");
  t = std::chrono::steady_clock::now();
  auto flat = flat_rows(e, FlatBy::Function);
  double flatMs = ms_since(t);
  t = std::chrono::steady_clock::now();
  CallerIndex ci(e);
  auto roots = ci.roots();
  double buMs = ms_since(t);

  e.release_pages();
  double allMiB = rss_mib();
  std::printf("database: %s, %.1f MiB, %zu contexts, %zu profiles, %zu trace lines, %zu trace records\n",
              dir.c_str(), dbMiB, e.num_contexts(), e.profiles().size() - 1, lines, records);
  std::printf("open (meta.db + profile.db):           %9.1f ms (peak memory %.1f MiB)\n", openMs, openPeak);
  std::printf("first screen (hot path %zu deep, %zu rows): %9.2f ms\n", path.size(), shown, firstMs);
  std::printf("flat by function (%zu rows):          %9.1f ms\n", flat.size(), flatMs);
  std::printf("bottom-up roots (%zu functions):      %9.1f ms\n", roots.size(), buMs);
  std::printf("per-profile values, first (maps cct.db): %9.1f ms; next: %.3f ms (%zu values)\n", pvFirstMs, pvMs,
              pv.ok() ? pv->size() : 0);
  std::printf("trace.db map + index:                  %9.1f ms\n", traceLoadMs);
  std::printf("trace screen %u x %u px, depth 3:      %9.2f ms (1%% zoom: %.2f ms)\n", width, rows, traceMs, traceZoomMs);
  std::printf("resident memory after open, first screen, values, trace screens: %.1f MiB = %.1f%% of the database"
              " (anonymous %.1f, file pages %.1f); peak %.1f MiB = %.1f%%\n", typicalMiB, 100 * typicalMiB / dbMiB, typicalAnon,
              typicalFile, typicalPeak, 100 * typicalPeak / dbMiB);
  std::printf("resident memory after flat and bottom-up too (computed per call, nothing kept): %.1f MiB = %.1f%%; peak %.1f MiB = %.1f%%\n",
              allMiB, 100 * allMiB / dbMiB, status_mib("VmHWM:"), 100 * status_mib("VmHWM:") / dbMiB);
  return 0;
}
