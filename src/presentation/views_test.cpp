// Views over the conformance databases. Expected values are those the reference
// checker prints (PYTHONPATH=shared/conformance python3 -m hpctesttool.formats.print DB).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "presentation/compare.hpp"
#include "presentation/experiment.hpp"
#include "presentation/report.hpp"
#include "presentation/api_test_util.hpp"
#include "presentation/server/api.hpp"
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

// hpcviewer's flat view as an outline: small.d's module, file, functions, spinsleep's loop
// and line, main's call sites; a call site has no exclusive value and no children.
TEST(Views, SmallStaticStructure) {
  auto e = open_db("small.d");
  ASSERT_TRUE(e);
  StaticTree st(*e);
  auto mods = st.rows({});
  ASSERT_EQ(mods.size(), 1u);
  EXPECT_EQ(mods[0].name, "testmeas-small");
  EXPECT_EQ(mods[0].kind, StaticKind::Module);
  EXPECT_NEAR(mods[0].inc[0], 1.210259, 1e-6);
  EXPECT_NEAR(mods[0].exc[0], 1.210259, 1e-6);
  EXPECT_TRUE(mods[0].hasChildren);
  auto files = st.rows(mods[0].path);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].name, "small.c");
  EXPECT_EQ(files[0].kind, StaticKind::File);
  auto fns = st.rows(files[0].path);
  ASSERT_EQ(fns.size(), 3u);
  EXPECT_EQ(fns[0].name, "spinsleep");  // ties on inclusive: the larger exclusive first
  EXPECT_NEAR(fns[0].inc[0], 1.210259, 1e-6);
  EXPECT_NEAR(fns[0].exc[0], 1.210259, 1e-6);
  EXPECT_EQ(fns[1].name, "main");
  EXPECT_NEAR(fns[1].exc[0], 0.0, 1e-12);
  EXPECT_EQ(fns[2].name, "caller");
  EXPECT_NEAR(fns[2].inc[0], 0.605316, 1e-9);
  // Flattened twice from the top: the same functions.
  auto flat3 = st.rows({}, 3);
  ASSERT_EQ(flat3.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(flat3[i].path, fns[i].path);
  auto body = st.rows(fns[0].path);
  ASSERT_FALSE(body.empty());
  EXPECT_EQ(body[0].name, "loop at small.c:3");
  EXPECT_EQ(body[0].kind, StaticKind::Loop);
  EXPECT_EQ(body[0].line, 3u);
  EXPECT_NEAR(body[0].exc[0], 1.210259, 1e-6);
  auto inLoop = st.rows(body[0].path);
  ASSERT_EQ(inLoop.size(), 1u);
  EXPECT_EQ(inLoop[0].name, "small.c:3");
  EXPECT_EQ(inLoop[0].kind, StaticKind::Line);
  EXPECT_NEAR(inLoop[0].inc[0], 1.210259, 1e-6);
  auto mainBody = st.rows(fns[1].path);
  ASSERT_EQ(mainBody.size(), 1u);
  EXPECT_EQ(mainBody[0].name, "small.c:11");
  auto calls = st.rows(mainBody[0].path);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].name, "-> caller");
  EXPECT_EQ(calls[0].kind, StaticKind::Call);
  EXPECT_NEAR(calls[0].inc[0], 0.605316, 1e-9);
  EXPECT_EQ(calls[0].exc[0], 0.0);
  EXPECT_FALSE(calls[0].hasChildren);
  EXPECT_EQ(calls[1].name, "-> spinsleep");
  EXPECT_NEAR(calls[1].inc[0], 0.604943, 1e-9);
  EXPECT_TRUE(st.rows(calls[0].path).empty());
  ASSERT_TRUE(st.node(calls[1].path));
  EXPECT_EQ(st.node(calls[1].path)->name, "-> spinsleep");
  EXPECT_FALSE(st.node({12345}));
  // Keys as text and back; bad text is refused.
  std::string text;
  for (uint64_t k : calls[1].path) text += (text.empty() ? "" : "/") + static_key_string(k);
  auto back = parse_static_path(text);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, calls[1].path);
  for (const char* bad : {"x1", "s", "s1//s2", "s12345678901234567", "sg"}) EXPECT_FALSE(parse_static_path(bad).ok()) << bad;
  EXPECT_TRUE(parse_static_path("").ok());
  // A budget of rows: past it, nothing and over_budget().
  StaticTree small(*e);
  small.set_row_budget(2);
  size_t total = 99;
  EXPECT_TRUE(small.rows({}, 3, SIZE_MAX, &total).empty());
  EXPECT_TRUE(small.over_budget());
  EXPECT_EQ(total, 0u);
  small.set_row_budget(100);
  EXPECT_EQ(small.rows({}, 3).size(), 3u);
  EXPECT_FALSE(small.over_budget());
}

// Without structure every instruction a call reached is a function of its module's address:
// the tree still has them, under `<unknown file>`, with the reference's values.
TEST(Views, NostructStaticStructureByAddress) {
  auto e = open_db("small.nostruct.d");
  ASSERT_TRUE(e);
  StaticTree st(*e);
  auto fns = st.rows({}, 3);
  double exc = 0;
  for (const StaticRow& r : fns) exc += r.exc[0];
  EXPECT_NEAR(exc, 1.210259, 1e-6);  // every sample once
  ASSERT_FALSE(fns.empty());
  EXPECT_EQ(fns[0].name, "testmeas-small+0x114c");
  EXPECT_NEAR(fns[0].inc[0], 0.302391 + 0.403829, 1e-6);  // two instances, neither below the other
  EXPECT_EQ(st.rows({})[0].inc[0], e->inclusive(0, e->metrics()[0]));
}

// The functions of the outline, flattened to them, are the flat view's by function; its
// modules the flat view's by module; each row's exclusive value is its own and its
// children's (call sites have none; inlined code is its own function).
TEST(Views, StaticStructureAgreesWithFlatLists) {
  for (const char* db : {"small.d", "loops-cputime-t.d", "loops-cuda-nvidia-t.d", "loops-cuda-nvidiapc-t.d"}) {
    SCOPED_TRACE(db);
    auto e = open_db(db);
    ASSERT_TRUE(e);
    StaticTree st(*e);
    // A module with code reached without a function (a thread's start in libgomp, as
    // libgomp.so+0x1a86d) has more in the outline than the list, which counts functions only.
    std::set<uint64_t> addressed;
    for (const StaticRow& r : st.rows({}, 3))
      if (r.path.back() >> 60 != 0) addressed.insert(r.path[0]);
    for (auto [depth, by] : {std::pair{1u, FlatBy::Module}, std::pair{3u, FlatBy::Function}}) {
      std::map<uint64_t, const FlatRow*> byKey;
      auto flat = flat_rows(*e, by);
      for (const FlatRow& r : flat) byKey[r.key] = &r;
      size_t n = 0;
      for (const StaticRow& r : st.rows({}, depth)) {
        if (r.path.size() != depth || (depth == 3 && r.path.back() >> 60 != 0)) continue;  // addresses: not in the lists
        ++n;
        if (depth == 1 && addressed.count(r.path[0])) continue;
        const uint64_t key = depth == 1 ? (r.path[0] == 0xffffffffull ? hpc::db::kNone : r.path[0]) : r.path.back();
        ASSERT_TRUE(byKey.count(key)) << r.name;
        for (size_t m = 0; m < e->metrics().size(); ++m) {
          EXPECT_NEAR(r.inc[m], byKey[key]->inc[m], 1e-9 * (1 + std::abs(r.inc[m]))) << r.name << " metric " << m;
          EXPECT_NEAR(r.exc[m], byKey[key]->exc[m], 1e-9 * (1 + std::abs(r.exc[m]))) << r.name << " metric " << m;
        }
      }
      EXPECT_EQ(n, flat.size());
    }
    // loops.c's main._omp_fn.0: its outer loop holds the nested loop, its lines and call sites.
    if (std::string(db) == "loops-cputime-t.d") {
      auto fns = st.rows({}, 3);
      auto omp = std::find_if(fns.begin(), fns.end(), [](auto& r) { return r.name == "main._omp_fn.0"; });
      ASSERT_NE(omp, fns.end());
      auto body = st.rows(omp->path);
      ASSERT_FALSE(body.empty());
      EXPECT_EQ(body[0].name, "loop at loops.c:1010");
      EXPECT_NEAR(body[0].inc[0], 3.97331, 1e-5);  // both instances of the outlined function
      auto helper = std::find_if(fns.begin(), fns.end(), [](auto& r) { return r.name == "test_separated_loops"; });
      ASSERT_NE(helper, fns.end());
      auto loop = st.rows(helper->path);  // hottest first
      ASSERT_FALSE(loop.empty());
      EXPECT_EQ(loop[0].name, "loop at loops.c:1000");
      auto line = st.rows(loop[0].path);
      ASSERT_FALSE(line.empty());
      EXPECT_EQ(line[0].name, "loops.c:1001");
      auto inl = st.rows(line[0].path);
      ASSERT_FALSE(inl.empty());
      EXPECT_EQ(inl[0].name, "[I] test_separated_loops_helper");
      EXPECT_EQ(inl[0].kind, StaticKind::Inlined);
      EXPECT_NEAR(inl[0].exc[0], 0.992777, 1e-6);
      EXPECT_TRUE(inl[0].hasChildren);
    }
  }
}

// hpcviewer's CCT filters on small.d: main thread (1) -> main (4) -> small.c:11 (15) ->
// caller (22), spinsleep (10).
TEST(Views, CctFiltersHideSpliceOrCut) {
  auto e = open_db("small.d");
  ASSERT_TRUE(e);
  auto names = [&](const std::vector<FilteredChild>& v) {
    std::vector<std::string> out;
    for (const FilteredChild& c : v) out.push_back(e->name(c.ctx) + (c.leaf ? "/leaf" : ""));
    std::sort(out.begin(), out.end());
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(names(filtered_children(*e, 1, {})), V{"main"});
  EXPECT_EQ(names(filtered_children(*e, 1, {{"main", FilterMode::Self}})), V{"small.c:11"});
  EXPECT_EQ(names(filtered_children(*e, 1, {{"ma*", FilterMode::Self}, {"small.c:*", FilterMode::Self}})),
            (V{"caller", "spinsleep"}));
  EXPECT_EQ(names(filtered_children(*e, 1, {{"main", FilterMode::Descendants}})), V{"main/leaf"});
  EXPECT_TRUE(filtered_children(*e, 1, {{"main", FilterMode::SelfAndDescendants}}).empty());
  EXPECT_TRUE(filtered_children(*e, 1, {{"*", FilterMode::Self}}).empty());  // everything spliced away
  // The first filter that matches decides.
  EXPECT_EQ(names(filtered_children(*e, 1, {{"main", FilterMode::Descendants}, {"main", FilterMode::Self}})),
            V{"main/leaf"});
  EXPECT_EQ(filtered_children(*e, 1, {{"ma*", FilterMode::Self}, {"small.c:*", FilterMode::Self}}, 1).size(), 1u);
  // A pattern matches the name shown or the function's own within it: hpcstruct names a
  // procedure "main [app]", an inlined call shows as "[I] f".
  EXPECT_TRUE(filter_matches("main", "main [app]"));
  EXPECT_TRUE(filter_matches("main", "[I] main"));
  EXPECT_TRUE(filter_matches("gomp_*", "[I] gomp_barrier [libgomp.so.1]"));
  EXPECT_TRUE(filter_matches("main ?app?", "main [app]"));
  EXPECT_FALSE(filter_matches("app", "main [app]"));
  EXPECT_FALSE(filter_matches("main", "mainly [app]"));
  EXPECT_FALSE(filter_matches("x", "[x]"));
  FilterMode m;
  EXPECT_TRUE(parse_filter_mode("all", m) && m == FilterMode::SelfAndDescendants);
  EXPECT_FALSE(parse_filter_mode("some", m));
  // The server's children: spliced and hottest first, a leaf without children; bad filters refused.
  Api api(*e);
  auto get = [&](const Params& q, int status = 200) { return nlohmann::json::parse(api_body(api, "children", q, status)); };
  auto j = get({{"ctx", "1"}, {"filter", R"([{"pattern":"ma*","mode":"self"},{"pattern":"small.c:*","mode":"self"}])"}});
  ASSERT_EQ(j["children"].size(), 2u);
  EXPECT_EQ(j["children"][0]["name"], "caller");  // 0.605316 before spinsleep's 0.604943
  EXPECT_EQ(j["children"][1]["name"], "spinsleep");
  j = get({{"ctx", "1"}, {"filter", R"([{"pattern":"main","mode":"descendants"}])"}});
  ASSERT_EQ(j["children"].size(), 1u);
  EXPECT_FALSE(j["children"][0]["hasChildren"]);
  // What is hidden becomes the exclusive cost of the nearest context shown, as hpcviewer's
  // filters move it; inclusive values stay. main's descendants hidden: all 1.21026 its own.
  EXPECT_NEAR(j["children"][0]["exc"][0].get<double>(), 1.210259, 1e-6);
  EXPECT_NEAR(j["children"][0]["inc"][0].get<double>(), 1.210259, 1e-6);
  // spinsleep hidden with its subtree: small.c:11 (main's line) and small.c:7 (caller's) take
  // the costs of the calls hidden there.
  j = get({{"ctx", "4"}, {"filter", R"([{"pattern":"spinsleep","mode":"all"}])"}});
  ASSERT_EQ(j["children"].size(), 1u);
  EXPECT_EQ(j["children"][0]["name"], "small.c:11");
  EXPECT_NEAR(j["children"][0]["exc"][0].get<double>(), 0.604943, 1e-6);
  j = get({{"ctx", "22"}, {"filter", R"([{"pattern":"spinsleep","mode":"all"}])"}});
  ASSERT_EQ(j["children"].size(), 1u);
  EXPECT_NEAR(j["children"][0]["exc"][0].get<double>(), 0.605316, 1e-6);
  EXPECT_FALSE(j["children"][0]["hasChildren"]);
  // caller hidden alone: the cost at it itself (none: all of it lies below it) moves; its line
  // small.c:7 is shown in its place with its own values.
  j = get({{"ctx", "4"}, {"filter", R"([{"pattern":"caller","mode":"self"}])"}});
  EXPECT_EQ(j["children"][0]["exc"][0], 0.0);
  {
    FilterAbsorbed a = filter_absorbed(*e, 15, false, {{"caller", FilterMode::Self}, {"spinsleep", FilterMode::SelfAndDescendants}});
    EXPECT_EQ(a.own, (std::vector<uint32_t>{22}));
    EXPECT_EQ(a.whole, (std::vector<uint32_t>{10}));
    const MetricView& mv = e->metrics()[0];
    EXPECT_NEAR(absorbed_value(*e, a, [&](uint32_t c) { return e->inclusive(c, mv); }), 0.604943, 1e-6);
  }
  for (const char* bad : {"[", R"({"pattern":"x"})", R"([{"pattern":"x","mode":"sometimes"}])", R"([{"mode":"self"}])"})
    EXPECT_TRUE(get({{"ctx", "1"}, {"filter", bad}}, 400).contains("error")) << bad;
  // Statistics over the profiles: small.d's reference database kept sums alone.
  j = get({{"ctx", "1"}, {"stats", "1"}});
  ASSERT_EQ(j["children"].size(), 1u);
  EXPECT_EQ(j["children"][0]["stats"]["inc"][0]["sum"], j["children"][0]["inc"][0]);
  EXPECT_FALSE(j["children"][0]["stats"]["inc"][0].contains("mean"));
  EXPECT_FALSE(get({{"ctx", "1"}})["children"][0].contains("stats"));
  get({{"ctx", "1"}, {"stats", "yes"}}, 400);
  Reply info = api.handle("info", {});
  EXPECT_TRUE(nlohmann::json::parse(info.body)["metrics"][0]["stats"].empty());
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

// hpcreport --view structure: the outline best-first, as a forest in tree order.
TEST(Report, StructureViewIsTheOutline) {
  auto e = open_db("small.d");
  ASSERT_TRUE(e);
  ReportOptions o;
  o.view = ReportView::Structure;
  o.top = 100;
  auto rows = report_rows(*e, o);
  ASSERT_GE(rows.size(), 10u);
  EXPECT_EQ(rows[0].section, "structure");
  EXPECT_EQ(rows[0].name, "testmeas-small");
  EXPECT_EQ(rows[0].depth, 0u);
  EXPECT_EQ(rows[1].name, "small.c");
  EXPECT_EQ(rows[2].name, "spinsleep");
  EXPECT_EQ(rows[3].name, "loop at small.c:3");
  EXPECT_EQ(rows[3].depth, 3u);
  auto call = std::find_if(rows.begin(), rows.end(), [](auto& r) { return r.name == "-> caller"; });
  ASSERT_NE(call, rows.end());
  EXPECT_EQ(call->depth, 4u);
  EXPECT_NEAR(call->inc, 0.605316, 1e-9);
  EXPECT_EQ(call->exc, 0.0);
  EXPECT_EQ(std::prev(call)->name, "small.c:11");  // under main's line
  EXPECT_EQ(call->id.substr(0, call->id.rfind('/')), std::prev(call)->id);
  std::ostringstream os;
  print_report(*e, o, os);
  EXPECT_NE(os.str().find("Static structure"), std::string::npos) << os.str();
  EXPECT_NE(os.str().find("        -> caller"), std::string::npos) << os.str();
}

// Two databases compared by name: a database against itself changes nothing (the calling
// contexts stop at the root); loops against small matches "main thread" and main across
// databases whose ids differ, and finds what is new and what is gone.
TEST(Report, CompareMatchesByName) {
  auto s = open_db("small.d"), l = open_db("loops-cputime-t.d");
  ASSERT_TRUE(s && l);
  CompareOptions o;
  o.top = 50;
  auto same = compare_rows(*s, *s, o);
  ASSERT_FALSE(same.empty());
  for (const CompareRow& r : same) {
    EXPECT_EQ(r.aInc, r.bInc) << r.name;
    EXPECT_EQ(r.aExc, r.bExc) << r.name;
  }
  EXPECT_EQ(std::count_if(same.begin(), same.end(), [](auto& r) { return r.section == "top-down"; }), 1);
  auto rows = compare_rows(*s, *l, o);
  auto find = [&](const std::string& section, const std::string& name, uint32_t depth = 0) -> const CompareRow* {
    for (const CompareRow& r : rows)
      if (r.section == section && r.name == name && (section != "top-down" || r.depth == depth)) return &r;
    return nullptr;
  };
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(rows[0].name, "main._omp_fn.0");  // the largest change of exclusive value: new
  EXPECT_EQ(rows[0].aExc, 0.0);
  EXPECT_NEAR(rows[0].bExc, 1.244893, 1e-6);
  const CompareRow* spin = find("flat-function", "spinsleep");
  ASSERT_TRUE(spin);
  EXPECT_NEAR(spin->aExc, 1.210259, 1e-6);
  EXPECT_EQ(spin->bExc, 0.0);
  const CompareRow* root = find("top-down", "<program root>");
  ASSERT_TRUE(root);
  EXPECT_NEAR(root->aInc, 1.210259, 1e-6);
  EXPECT_NEAR(root->bInc, 3.973308, 1e-6);
  const CompareRow* mainThread = find("top-down", "main thread", 1);
  ASSERT_TRUE(mainThread);
  EXPECT_NEAR(mainThread->aInc, 1.210259, 1e-6);
  EXPECT_NEAR(mainThread->bInc, 0.994165, 1e-6);
  const CompareRow* mainFn = find("top-down", "main", 2);
  ASSERT_TRUE(mainFn);
  EXPECT_NEAR(mainFn->aInc, 1.210259, 1e-6);
  EXPECT_NEAR(mainFn->bInc, 0.994165, 1e-6);
  const CompareRow* app = find("top-down", "application thread", 1);
  ASSERT_TRUE(app);
  EXPECT_EQ(app->aInc, 0.0);
  EXPECT_NEAR(app->bInc, 2.979143, 1e-6);
  // The forest: a child right below its parent, siblings by the largest change.
  EXPECT_LT(std::find_if(rows.begin(), rows.end(), [](auto& r) { return r.name == "application thread"; }),
            std::find_if(rows.begin(), rows.end(), [](auto& r) { return r.name == "main thread"; }));
  std::ostringstream os;
  print_comparison(*s, *l, o, os);
  EXPECT_NE(os.str().find("total 3.97331 against 1.21026 (+228.3%)"), std::string::npos) << os.str();
  EXPECT_NE(os.str().find("     gone  spinsleep\n"), std::string::npos) << os.str();
}

// hpcserver --compare: top-down children and flat rows carry the baseline's values of the
// rows matching them by name (loops against small: main thread and main match; the
// application thread and main._omp_fn.0 are new, 0 in the baseline).
TEST(Report, ServerCarriesTheBaselinesValues) {
  auto s = open_db("small.d"), l = open_db("loops-cputime-t.d");
  ASSERT_TRUE(s && l);
  Api api(*l, s.get());
  auto get = [&](const std::string& endpoint, const Params& q) { return nlohmann::json::parse(api_body(api, endpoint, q)); };
  auto info = get("info", {});
  EXPECT_EQ(info["baseline"]["metrics"][0], 0);
  EXPECT_NEAR(info["baseline"]["totals"][0].get<double>(), 1.210259, 1e-6);
  auto find = [](const nlohmann::json& rows, const std::string& name) {
    for (const auto& r : rows)
      if (r["name"] == name) return r;
    return nlohmann::json();
  };
  auto top = get("children", {{"ctx", "0"}});
  auto mainThread = find(top["children"], "main thread"), app = find(top["children"], "application thread");
  ASSERT_TRUE(mainThread.is_object() && app.is_object()) << top.dump();
  EXPECT_NEAR(mainThread["inc"][0].get<double>(), 0.994165, 1e-6);
  EXPECT_NEAR(mainThread["base"]["inc"][0].get<double>(), 1.210259, 1e-6);
  EXPECT_EQ(app["base"]["inc"][0], 0.0);
  auto below = get("children", {{"ctx", std::to_string(mainThread["ctx"].get<uint32_t>())}});
  auto mainFn = find(below["children"], "main");
  ASSERT_TRUE(mainFn.is_object()) << below.dump();
  EXPECT_NEAR(mainFn["base"]["inc"][0].get<double>(), 1.210259, 1e-6);
  // A function is matched by name and load module, the programs' executables as one: main
  // in small's and in loops' (before, by the executables' file names, which differ: none).
  auto flat = get("flat", {{"by", "function"}});
  auto omp = find(flat["rows"], "main._omp_fn.0"), fmain = find(flat["rows"], "main");
  ASSERT_TRUE(omp.is_object() && fmain.is_object());
  EXPECT_EQ(omp["base"]["exc"][0], 0.0);
  EXPECT_NEAR(fmain["base"]["inc"][0].get<double>(), 1.210259, 1e-6);
  // Against itself every flat row has its own values as the baseline's.
  Api same(*l, l.get());
  auto lines = nlohmann::json::parse(api_body(same, "flat", {{"by", "line"}}))["rows"];
  ASSERT_GT(lines.size(), 5u);
  for (const auto& r : lines) {
    EXPECT_EQ(r["base"]["inc"], r["inc"]) << r.dump();
    EXPECT_EQ(r["base"]["exc"], r["exc"]) << r.dump();
  }
  // Without a baseline, no such member.
  Api alone(*l);
  Reply r = alone.handle("info", {});
  EXPECT_FALSE(nlohmann::json::parse(r.body).contains("baseline"));
}

// hpcserver --compare in the bottom-up view and the static structure, and in top-down rows a
// filter brought up from below: against itself every row's baseline is its own values; the
// program against its measurement analysed without structure (another database: other ids,
// no loops or lines), each row's baseline is what that database alone shows at the same
// path of names (its functions are addresses, so few rows have one; the permuted database of
// overview_test.cpp matches every row).
TEST(Report, ServerCarriesTheBaselinesValuesInEveryView) {
  auto l = open_db("loops-cputime-t.d"), n = open_db("loops-cputime-t.nostruct.d");
  ASSERT_TRUE(l && n);
  using nlohmann::json;
  Api self(*l, l.get());
  const std::vector<std::tuple<std::string, Params, int>> views{
      {"bottom-up", {}, 4}, {"structure", {}, 6}, {"structure", {{"depth", "3"}}, 3},
      {"children", {{"ctx", "0"}, {"filter", R"([{"pattern":"main","mode":"self"}])"}}, 5},
      {"children", {{"ctx", "0"}, {"filter", R"([{"pattern":"func*","mode":"all"}])"}}, 8}};
  for (const auto& [endpoint, q, levels] : views) {
    auto rows = api_rows_by_names(self, endpoint, q, levels);
    ASSERT_GT(rows.size(), 5u) << endpoint;
    for (const auto& [p, r] : rows) {
      if (r.is_null()) continue;
      ASSERT_TRUE(r.contains("base")) << endpoint << " " << r.dump();
      EXPECT_EQ(r["base"]["inc"], r["inc"]) << endpoint << " " << r.dump();
      EXPECT_EQ(r["base"]["exc"], r["exc"]) << endpoint << " " << r.dump();
    }
  }
  // The filter brought rows up from below main: the check saw some.
  auto filtered = api_rows_by_names(self, "children", std::get<1>(views[3]), 3);
  EXPECT_TRUE(std::none_of(filtered.begin(), filtered.end(), [](auto& x) { return x.first.back() == "main"; }));

  Api cmp(*l, n.get()), alone(*n);
  size_t matched = 0;
  for (const auto& [endpoint, q, levels] : views) {
    if (endpoint == "children") continue;
    auto rows = api_rows_by_names(cmp, endpoint, q, levels), there = api_rows_by_names(alone, endpoint, q, levels);
    for (const auto& [p, r] : rows) {
      if (r.is_null()) continue;
      auto it = there.find(p);
      const json zero = json::array({0.0});
      EXPECT_EQ(r["base"]["inc"], it == there.end() ? zero : it->second["inc"]) << endpoint << " " << r.dump();
      EXPECT_EQ(r["base"]["exc"], it == there.end() ? zero : it->second["exc"]) << endpoint << " " << r.dump();
      if (it != there.end() && it->second["inc"][0].get<double>() > 0) ++matched;
    }
  }
  EXPECT_GE(matched, 3u);  // the module and the structure rows of addresses it has
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

// Call path queries' grammar: kinds, escapes, anchoring, and errors that name the step.
TEST(PathQuery, ParsesStepsAndRefusesWhatIsWrong) {
  auto q = parse_path_query("/entry:main*/**/function:a\\/b/*/loop:*/x.c:12/module:lib*/file:*.c");
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_TRUE(q->anchored);
  using K = PathStep::Kind;
  const std::vector<std::pair<K, std::string>> want = {{K::Entry, "main*"}, {K::AnyMany, ""}, {K::Function, "a/b"},
                                                       {K::Any, ""},        {K::Loop, "*"},     {K::Name, "x.c:12"},
                                                       {K::Module, "lib*"}, {K::File, "*.c"}};
  ASSERT_EQ(q->steps.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(q->steps[i].kind, want[i].first) << i;
    EXPECT_EQ(q->steps[i].glob, want[i].second) << i;
  }
  EXPECT_FALSE(parse_path_query("main").value().anchored);
  EXPECT_EQ(parse_path_query("ns::f").value().steps[0].kind, K::Name);  // "ns" is no kind
  for (const char* bad : {"", "/", "a//b", "a/", "function:"}) {
    auto r = parse_path_query(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("call path query"), std::string::npos) << r.status().message();
  }
  std::string many = "a";
  for (int i = 0; i < 61; ++i) many += "/a";
  EXPECT_FALSE(parse_path_query(many).ok());
}

// Compilers' clones of a function are the function to filters and queries.
TEST(PathQuery, ClonesAreTheirFunction) {
  EXPECT_EQ(strip_clone_suffixes("stencil.constprop.0"), "stencil");
  EXPECT_EQ(strip_clone_suffixes("f.constprop.0.isra.0"), "f");
  EXPECT_EQ(strip_clone_suffixes("g.cold"), "g");
  EXPECT_EQ(strip_clone_suffixes("g.part.12"), "g");
  EXPECT_EQ(strip_clone_suffixes("h.llvm.1234567"), "h");
  EXPECT_EQ(strip_clone_suffixes("v.1"), "v.1");      // a number alone is no clone
  EXPECT_EQ(strip_clone_suffixes(".cold"), ".cold");  // nothing before it
  EXPECT_EQ(strip_clone_suffixes("f.isra0"), "f.isra0");
  EXPECT_TRUE(filter_matches("stencil", "stencil.constprop.0 [demo]"));
  EXPECT_TRUE(filter_matches("sten*", "[I] stencil.cold"));
  EXPECT_FALSE(filter_matches("stencil", "stencil2.constprop.0"));
}
