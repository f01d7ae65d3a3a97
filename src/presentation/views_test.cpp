// Views over the conformance databases. Expected values are those the reference
// checker prints (PYTHONPATH=shared/conformance python3 -m hpctesttool.formats.print DB).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "presentation/experiment.hpp"
#include "presentation/report.hpp"
#include "presentation/views.hpp"

namespace fs = std::filesystem;
using namespace hpc::present;

namespace {

const fs::path kDbase = fs::path(HPC_SHARED_DIR) / "conformance" / "dbase";

std::unique_ptr<Experiment> open_db(const std::string& name) {
  auto e = Experiment::open(kDbase / name);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? std::move(*e) : nullptr;
}

uint32_t child_named(const Experiment& e, uint32_t ctx, const std::string& name) {
  for (uint32_t k : e.children(ctx))
    if (e.name(k) == name) return k;
  return kNoCtx;
}

const FlatRow* row_named(const std::vector<FlatRow>& rows, const std::string& name) {
  for (auto& r : rows)
    if (r.name == name) return &r;
  return nullptr;
}

}  // namespace

TEST(Experiment, SmallMetricsAndTree) {
  auto e = open_db("small.d");
  ASSERT_TRUE(e);
  ASSERT_EQ(e->metrics().size(), 1u);
  const MetricView& m = e->metrics()[0];
  EXPECT_EQ(m.name, "CPUTIME (sec)");
  EXPECT_EQ(m.incProp, 3);  // execution
  EXPECT_EQ(m.excProp, 1);  // function
  EXPECT_EQ(e->find_metric("cputime"), 0);
  EXPECT_EQ(e->find_metric("0"), 0);
  EXPECT_EQ(e->find_metric("REALTIME"), -1);
  EXPECT_EQ(e->num_contexts(), 14u);  // root, 1 entry point, 12 contexts
  EXPECT_NEAR(e->inclusive(0, m), 1.210259, 1e-9);
  uint32_t main = child_named(*e, 1, "main");
  ASSERT_EQ(main, 4u);
  EXPECT_EQ(e->name(1), "main thread");
  EXPECT_EQ(e->name(15), "small.c:11");
  EXPECT_EQ(e->name(7), "loop at small.c:3");
  EXPECT_NEAR(e->inclusive(main, m), 1.210259, 1e-9);
  EXPECT_NEAR(e->exclusive(10, m), 0.604943, 1e-9);  // spinsleep called from main
}

TEST(Experiment, MissingOrCorruptDatabaseNamesTheFile) {
  auto e = Experiment::open(kDbase / "no-such.d");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("no-such.d"), std::string::npos);

  fs::path tmp = fs::temp_directory_path() / ("pres-corrupt-" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  for (auto f : {"meta.db", "profile.db", "cct.db"}) fs::copy_file(kDbase / "small.d" / f, tmp / f);
  fs::permissions(tmp / "profile.db", fs::perms::owner_write, fs::perm_options::add);
  fs::resize_file(tmp / "profile.db", 100);
  e = Experiment::open(tmp);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("profile.db"), std::string::npos) << e.status().message();
  fs::remove_all(tmp);
}

TEST(Views, SmallHotPathReachesSpinsleep) {
  auto e = open_db("small.d");
  ASSERT_TRUE(e);
  const MetricView& m = e->metrics()[0];
  auto path = hot_path(*e, 0, m, 0.4);
  ASSERT_GE(path.size(), 4u);
  std::vector<std::string> names;
  for (auto c : path) names.push_back(e->name(c));
  EXPECT_EQ(names[1], "main thread");
  EXPECT_EQ(names[2], "main");
  EXPECT_NE(std::find(names.begin(), names.end(), "spinsleep"), names.end());
  auto kids = sorted_children(*e, 15, m);  // main's call site small.c:11
  ASSERT_EQ(kids.size(), 2u);
  EXPECT_GE(e->inclusive(kids[0], m), e->inclusive(kids[1], m));
}

TEST(Views, SmallFlatAndBottomUp) {
  auto e = open_db("small.d");
  ASSERT_TRUE(e);
  auto fns = flat_rows(*e, FlatBy::Function);
  const FlatRow* spin = row_named(fns, "spinsleep");
  ASSERT_TRUE(spin);
  EXPECT_NEAR(spin->exc[0], 0.604943 + 0.605316, 1e-6);
  EXPECT_NEAR(spin->inc[0], 0.604943 + 0.605316, 1e-6);
  const FlatRow* caller = row_named(fns, "caller");
  ASSERT_TRUE(caller);
  EXPECT_NEAR(caller->inc[0], 0.605316, 1e-9);
  EXPECT_NEAR(caller->exc[0], 0.0, 1e-12);

  auto lines = flat_rows(*e, FlatBy::Line);
  const FlatRow* l3 = row_named(lines, "small.c:3");
  ASSERT_TRUE(l3);
  EXPECT_NEAR(l3->exc[0], 0.604943 + 0.605316, 1e-6);

  auto modules = flat_rows(*e, FlatBy::Module);
  ASSERT_EQ(modules.size(), 1u);
  EXPECT_NEAR(modules[0].inc[0], 1.210259, 1e-6);

  CallerIndex ci(*e);
  auto roots = ci.roots();
  auto it = std::find_if(roots.begin(), roots.end(), [&](auto& a) { return ci.key_name(a.key) == "spinsleep"; });
  ASSERT_NE(it, roots.end());
  auto callers = ci.children({it->key});
  ASSERT_EQ(callers.size(), 2u);  // main and caller
  sort_rows(callers, 0, true);
  EXPECT_EQ(ci.key_name(callers[0].key), "caller");
  EXPECT_NEAR(callers[0].exc[0], 0.605316, 1e-9);
  EXPECT_EQ(ci.key_name(callers[1].key), "main");
  EXPECT_NEAR(callers[1].exc[0], 0.604943, 1e-9);
  auto up = ci.children({it->key, callers[0].key});  // spinsleep <- caller <- main
  ASSERT_EQ(up.size(), 1u);
  EXPECT_EQ(ci.key_name(up[0].key), "main");
  EXPECT_NEAR(ci.node({it->key, callers[0].key}).exc[0], 0.605316, 1e-9);
}

// From its second query on a CallerIndex answers from an index (function contexts by
// function, every context's caller): the same callers and values as a scan of every context,
// which a fresh index's first query does.
TEST(Views, IndexedCallersEqualScans) {
  for (const char* db : {"small.d", "loops-cputime-t.d"}) {
    auto e = open_db(db);
    ASSERT_TRUE(e) << db;
    CallerIndex shared(*e);
    const auto roots = shared.roots();
    ASSERT_FALSE(roots.empty()) << db;
    size_t compared = 0;
    for (int pass = 0; pass < 2; ++pass)  // the shared one indexes during the first pass
      for (const Aggregate& r : roots) {
        std::vector<uint64_t> path{r.key};
        for (int depth = 0; depth < 4; ++depth) {
          CallerIndex fresh(*e);
          const auto a = fresh.children(path), b = shared.children(path);
          ASSERT_EQ(a.size(), b.size()) << db << " " << shared.key_name(r.key);
          for (size_t i = 0; i < a.size(); ++i) {
            EXPECT_EQ(a[i].key, b[i].key);
            EXPECT_EQ(a[i].inc, b[i].inc);
            EXPECT_EQ(a[i].exc, b[i].exc);
            EXPECT_EQ(a[i].hasChildren, b[i].hasChildren);
          }
          ++compared;
          if (a.empty()) break;
          path.push_back(a[0].key);
        }
      }
    EXPECT_GT(compared, roots.size()) << db;
    CallerIndex fresh(*e);
    for (uint32_t c = 0; c < e->id_limit(); ++c)
      ASSERT_EQ(fresh.caller_of(c), shared.caller_of(c)) << db << " context " << c;
  }
}

// flat_top by line: spilled to temporary files by key hash (a 1-byte budget forces it) or
// in memory, the same hottest rows, values and row count as the whole table.
TEST(Views, FlatTopSpilledEqualsWhole) {
  auto e = open_db("loops-cputime-t.d");
  ASSERT_TRUE(e);
  FlatTable whole = flat_table(*e, FlatBy::Line);
  ASSERT_GT(whole.size(), 10u);
  std::vector<uint32_t> want = whole.top(0, 7);
  for (size_t budget : {size_t(1), size_t(1) << 30}) {
    size_t total = 0;
    FlatTable top = flat_top(*e, FlatBy::Line, {}, 7, total, budget);
    EXPECT_EQ(total, whole.size()) << budget;
    ASSERT_EQ(top.size(), 7u) << budget;
    for (size_t i = 0; i < 7; ++i) {
      EXPECT_EQ(top.keys[i], whole.keys[want[i]]) << budget << " row " << i;
      EXPECT_NEAR(top.exc(i, 0), whole.exc(want[i], 0), 1e-12);
      EXPECT_NEAR(top.inc(i, 0), whole.inc(want[i], 0), 1e-12);
    }
    EXPECT_GE(top.exc(0, 0), top.exc(6, 0));
  }
}

TEST(Views, ProfileValuesFromCctDb) {
  auto e = open_db("loops-cputime-t.d");
  ASSERT_TRUE(e);
  const MetricView& m = e->metrics()[0];
  auto pv = profile_values(*e, 0, m.incProp);
  ASSERT_TRUE(pv.ok()) << pv.status().message();
  double sum = 0;
  for (auto& v : *pv) sum += v.value;
  EXPECT_NEAR(sum, e->inclusive(0, m), 1e-6);
  EXPECT_EQ(pv->size(), 4u);  // four threads
}

TEST(Report, TextNamesHotFunction) {
  auto e = open_db("small.d");
  ASSERT_TRUE(e);
  ReportOptions o;
  std::ostringstream os;
  print_report(*e, o, os);
  std::string s = os.str();
  EXPECT_NE(s.find("spinsleep"), std::string::npos) << s;
  EXPECT_NE(s.find("1.21026"), std::string::npos) << s;
  o.format = ReportFormat::Csv;
  o.view = ReportView::Flat;
  std::ostringstream csv;
  print_report(*e, o, csv);
  std::istringstream lines(csv.str());
  std::string header, first;
  std::getline(lines, header);
  std::getline(lines, first);
  EXPECT_EQ(header, "section,depth,id,name,inclusive,inclusive_percent,exclusive,exclusive_percent");
  EXPECT_NE(first.find(",spinsleep,1.21026,100,1.21026,100"), std::string::npos) << first;
}

// loops-cputime-t.d: four threads. Values as the reference checker prints them:
// root execution 3.973308; func2 is called at contexts 105 (0.765755) and 176 (0.203695).
TEST(Report, LoopsHotFunctionsAndPaths) {
  auto e = open_db("loops-cputime-t.d");
  ASSERT_TRUE(e);
  const MetricView& m = e->metrics()[0];
  EXPECT_NEAR(e->inclusive(0, m), 3.973308, 1e-6);
  ReportOptions o;
  o.view = ReportView::Flat;
  o.top = 3;
  auto rows = report_rows(*e, o);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].name, "main._omp_fn.0");
  // test_separated_loops_helper is inlined at two sites, each an entry of meta.db's
  // function table (0.269513 and 0.723264 s): one row.
  EXPECT_EQ(rows[1].name, "test_separated_loops_helper");
  EXPECT_NEAR(rows[1].exc, 0.992777, 1e-6);
  EXPECT_EQ(rows[2].name, "func2");
  EXPECT_NEAR(rows[2].exc, 0.765755 + 0.203695, 1e-6);
  EXPECT_NEAR(rows[2].inc, 0.765755 + 0.203695, 1e-6);

  o.view = ReportView::TopDown;
  o.top = 10;
  rows = report_rows(*e, o);
  ASSERT_EQ(rows.size(), 10u);
  EXPECT_EQ(rows[0].name, "<program root>");
  EXPECT_NEAR(rows[0].inc, 3.973308, 1e-6);
  for (size_t i = 1; i < rows.size(); ++i) EXPECT_LE(rows[i].depth, rows[i - 1].depth + 1);

  o.view = ReportView::BottomUp;
  rows = report_rows(*e, o);
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(rows[0].depth, 0u);
  EXPECT_EQ(rows[0].name, "main._omp_fn.0");
  EXPECT_EQ(std::count_if(rows.begin(), rows.end(),
                          [](auto& r) { return r.name == "test_separated_loops_helper" && r.depth == 0; }),
            1);
  auto f2 = std::find_if(rows.begin(), rows.end(), [](auto& r) { return r.name == "func2" && r.depth == 0; });
  ASSERT_NE(f2, rows.end());
  EXPECT_NEAR(f2->exc, 0.96945, 1e-6);
  ASSERT_NE(f2 + 1, rows.end());
  EXPECT_EQ((f2 + 1)->name, "main._omp_fn.0");  // its only caller
  EXPECT_EQ((f2 + 1)->depth, 1u);

  std::ostringstream js;
  o.format = ReportFormat::Json;
  o.view = ReportView::Flat;
  print_report(*e, o, js);
  EXPECT_NE(js.str().find("\"name\": \"func2\""), std::string::npos) << js.str();
  // Streamed row by row, the text is what one nlohmann::json document of it prints.
  auto document = [&](const ReportOptions& opt) {
    const MetricView& m = e->metrics().at(opt.metric);
    const double total = e->inclusive(0, m);
    auto pct = [&](double v) { return total != 0 ? 100.0 * v / total : 0.0; };
    nlohmann::json j;
    j["database"] = e->dir().string();
    j["title"] = e->meta().general.title;
    j["metric"] = m.name;
    j["total"] = total;
    j["rows"] = nlohmann::json::array();
    for (auto& r : report_rows(*e, opt))
      j["rows"].push_back({{"section", r.section}, {"depth", r.depth}, {"id", r.id}, {"name", r.name},
                           {"inclusive", r.inc}, {"inclusive_percent", pct(r.inc)},
                           {"exclusive", r.exc}, {"exclusive_percent", pct(r.exc)}});
    return j.dump(1) + "\n";
  };
  EXPECT_EQ(js.str(), document(o));
  o.view = ReportView::Summary;
  js.str("");
  print_report(*e, o, js);
  EXPECT_EQ(js.str(), document(o));
  EXPECT_GT(js.str().size(), 2000u);
  o.top = 0;  // no rows: an empty array
  js.str("");
  print_report(*e, o, js);
  EXPECT_EQ(js.str(), document(o));
  EXPECT_NE(js.str().find("\"rows\": []"), std::string::npos) << js.str();
}
