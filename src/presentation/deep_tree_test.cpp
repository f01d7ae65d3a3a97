// Every view over a call chain 300,005 contexts deep (mutual recursion of ping and pong, as
// deep recursion in an application makes): nothing recurses along the tree (recursion that
// deep overflows an 8 MiB stack), nothing walks to the root once per context or row
// (quadratic: minutes), and the answers are the real ones.
#include <gtest/gtest.h>

#include <chrono>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unistd.h>

#include "presentation/experiment.hpp"
#include "presentation/report.hpp"
#include "presentation/server/api.hpp"
#include "presentation/trace_view.hpp"
#include "presentation/views.hpp"

namespace fs = std::filesystem;
using namespace hpc;
using namespace hpc::present;

namespace {

// ctxIds follow the chain, so a context's tree depth is its id: 1 the entry point, 2 main,
// 3 its call site main.c:4, then frame k (k < kFrames) as a function context 4+2k (ping when
// k is even, pong when odd) and its call site 5+2k (pingpong.c:5 or :10); at the bottom
// leaf (a function of another module and file) 4+2*kFrames and its line leaf.c:7, deepest,
// which alone has a value (kLeafValue, so every context's inclusive value is kLeafValue).
// Every kTickEvery-th frame's call site also calls tick (a leaf without values, ctxIds after
// kDeepest): 15,000 instances, each the outermost, deep down the chain.
constexpr uint32_t kFrames = 150000, kTickEvery = 10;
constexpr uint32_t kLeafFn = 4 + 2 * kFrames, kDeepest = kLeafFn + 1, kTicks = kFrames / kTickEvery;
constexpr double kLeafValue = 2.5;
constexpr uint32_t kMain = 0, kPing = 1, kPong = 2, kLeaf = 3, kTick = 4;  // function indices
constexpr uint32_t kSamples = 3000;                             // trace records
constexpr uint64_t kT0 = 1000000;

// The trace's sample k: idle first, then contexts spread over the whole chain.
uint32_t sample_ctx(uint32_t k) {
  if (k == 0) return 0;
  return k == kSamples - 1 ? kDeepest : 4 + uint32_t((uint64_t(k) * 7919) % (kDeepest - 3));
}

fs::path write_deep_db() {
  using namespace hpc::db;
  Database db;
  Meta& m = db.meta;
  m.general = {"deep", "a call chain 300,005 contexts deep"};
  m.idNames = {"SUMMARY", "NODE", "RANK", "THREAD", "GPUDEVICE", "GPUCONTEXT", "GPUSTREAM"};
  m.scopes = {{"point", 1, 255}, {"function", 3, 0}, {"execution", 2, 255}};
  Metric mt;
  mt.name = "CPUTIME (sec)";
  mt.scopeInsts = {{0, 0}, {1, 1}, {2, 2}};
  mt.summaries = {{1, "$$", 0, 1}, {2, "$$", 0, 2}};  // function sum: stat 1; execution sum: stat 2
  m.metrics = {mt};
  m.modules = {{0, "/opt/app/bin/app"}, {0, "/opt/app/lib/libleaf.so"}};
  m.files = {{0, "/src/main.c"}, {0, "/src/pingpong.c"}, {0, "/src/leaf.c"}};
  m.functions = {{"main", 0, 0x1000, 0, 1, 0}, {"ping", 0, 0x1100, 1, 3, 0}, {"pong", 0, 0x1200, 1, 8, 0},
                 {"leaf", 1, 0x400, 2, 6, 0}, {"tick", 0, 0x1300, 1, 20, 0}};
  m.entryPoints.push_back({1, 1, "main thread", {}});
  auto fnCtx = [](uint32_t id, uint32_t fn) {
    Context c;
    c.ctxId = id, c.relation = 1, c.lexicalType = 0, c.function = fn;
    return c;
  };
  auto lineCtx = [](uint32_t id, uint32_t file, uint32_t line) {
    Context c;
    c.ctxId = id, c.relation = 0, c.lexicalType = 2, c.propagation = 1, c.file = file, c.line = line;
    return c;
  };
  auto& top = m.entryPoints[0].children;
  top.push_back(fnCtx(2, kMain));
  Context* at = &top.back();
  auto below = [&](Context c) {
    at->children.push_back(std::move(c));
    at = &at->children.back();
  };
  below(lineCtx(3, 0, 4));
  for (uint32_t k = 0; k < kFrames; ++k) {
    below(fnCtx(4 + 2 * k, k % 2 ? kPong : kPing));
    below(lineCtx(5 + 2 * k, 1, k % 2 ? 10 : 5));
    if (k % kTickEvery == 0) at->children.push_back(fnCtx(kDeepest + 1 + k / kTickEvery, kTick));
  }
  below(fnCtx(kLeafFn, kLeaf));
  below(lineCtx(kDeepest, 2, 7));

  // Summary: inclusive (execution) everywhere, exclusive (function) at leaf and its line.
  Profile summary;
  summary.flags = 1;
  for (uint32_t c = 0; c <= kDeepest; ++c) {
    if (c >= kLeafFn) summary.values.push(1, kLeafValue);
    summary.values.push(2, kLeafValue);
    summary.values.close(c);
  }
  Profile thread;
  thread.idTuple = std::vector<Identifier>{{1, 1, 0, 0x5eed}, {3, 0, 0, 0}};
  for (uint16_t mid : {0, 1, 2}) thread.values.push(mid, kLeafValue);
  thread.values.close(kDeepest);
  Profile stream;  // a GPU stream, idle throughout: the CPU line takes the blame
  stream.idTuple = std::vector<Identifier>{{1, 1, 0, 0x5eed}, {6, 0, 0, 0}};
  db.profiles.push_back(std::move(summary));
  db.profiles.push_back(std::move(thread));
  db.profiles.push_back(std::move(stream));
  db.contexts.resize(kDeepest + 1 + kTicks);
  for (uint16_t mid : {0, 1, 2}) {
    db.contexts[kDeepest].push(1, kLeafValue);
    db.contexts[kDeepest].close(mid);
  }
  TraceDb tr;
  tr.minTimestamp = kT0;
  tr.maxTimestamp = kT0 + 10 * kSamples;
  Trace line;
  line.profIndex = 1;
  for (uint32_t k = 0; k < kSamples; ++k) line.line.push_back({kT0 + 10 * k, sample_ctx(k)});
  tr.traces.push_back(std::move(line));
  tr.traces.push_back({2, {{kT0, 0}}});
  db.trace = std::move(tr);

  fs::path dir = fs::temp_directory_path() / ("pres-deep-" + std::to_string(::getpid())) / "deep.d";
  fs::remove_all(dir.parent_path());
  fs::create_directories(dir.parent_path());
  Status s = write_database(db, dir);
  EXPECT_TRUE(s.ok()) << s.message();
  // Taken apart a level at a time: the test does not rely on how the chain's nested
  // vectors free themselves (a plain std::vector of them recurses to the bottom).
  ContextList chain = std::move(m.entryPoints[0].children);
  while (!chain.empty()) {
    ContextList next;
    for (Context& c : chain)  // the frame below, or a tick (no children)
      if (!c.children.empty()) next = std::move(c.children);
    chain = std::move(next);
  }
  return dir;
}

class ViewsDeepTree : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(write_deep_db());
    auto e = Experiment::open(*dir_);
    ASSERT_TRUE(e.ok()) << e.status().message();
    e_ = e->release();
  }
  static void TearDownTestSuite() {
    delete e_;
    e_ = nullptr;
    if (dir_) fs::remove_all(dir_->parent_path());
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(e_); }
  // Each test's views take a second or two; walks to the root per context or row took minutes.
  void TearDown() override {
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(), 30.0);
  }
  static const MetricView& metric() { return e_->metrics()[0]; }
  static Experiment* e_;
  static fs::path* dir_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};
Experiment* ViewsDeepTree::e_ = nullptr;
fs::path* ViewsDeepTree::dir_ = nullptr;

// The function index whose colour a sample context has at call depth `d` (0: main), computed
// from the chain's layout (call depth: main 1, frame k k+2, leaf kFrames+2).
uint32_t expected_colour(uint32_t ctx, uint64_t d) {
  if (ctx == 0) return kTraceIdle;
  const uint64_t frame = ctx >= kLeafFn ? kFrames : (ctx - 4) / 2;  // frames on the path, the leaf as frame kFrames
  if (d == 0) return kMain;
  uint64_t f = std::min<uint64_t>(d - 1, frame);
  return f == kFrames ? kLeaf : f % 2 ? kPong : kPing;
}

Reply get(Api& api, const std::string& endpoint, const Params& q, std::string& body) {
  Reply r = api.handle(endpoint, q);
  body = r.body;
  if (r.stream) {
    EXPECT_TRUE(r.stream([&](std::string_view s) {
      body += s;
      return true;
    }));
    api.done();
  }
  return r;
}

}  // namespace

TEST_F(ViewsDeepTree, TreeAndTopDown) {
  const Experiment& e = *e_;
  EXPECT_EQ(e.num_contexts(), size_t(kDeepest) + 1 + kTicks);
  EXPECT_EQ(e.depth(kDeepest + 1 + kTicks / 2), 5 + 2 * (kTicks / 2) * kTickEvery + 1);
  EXPECT_EQ(e.depth(kDeepest), kDeepest);
  EXPECT_EQ(e.call_depth(kDeepest), kFrames + 2);
  EXPECT_EQ(e.name(kDeepest), "leaf.c:7");
  EXPECT_EQ(e.inclusive(0, metric()), kLeafValue);
  EXPECT_EQ(e.inclusive(0, metric()), e.inclusive(kDeepest, metric()));
  EXPECT_EQ(e.exclusive(kDeepest, metric()), kLeafValue);
  auto path = hot_path(e, 0, metric(), 0.5);
  ASSERT_EQ(path.size(), size_t(kDeepest) + 1);
  EXPECT_EQ(path.back(), kDeepest);
  auto hottest = hottest_contexts(e, metric(), kDeepest + 1);
  ASSERT_EQ(hottest.size(), size_t(kDeepest) + 1);
  EXPECT_EQ(hottest.back(), kDeepest);

  // hpcreport's top-down rows: the whole chain, each row one deeper.
  ReportOptions o;
  o.view = ReportView::TopDown;
  o.top = kDeepest + 1;
  auto rows = report_rows(e, o);
  ASSERT_EQ(rows.size(), size_t(kDeepest) + 1);
  EXPECT_EQ(rows.back().depth, kDeepest);
  EXPECT_EQ(rows.back().id, std::to_string(kDeepest));
  EXPECT_EQ(rows[kFrames].depth, kFrames);
  // As text: two spaces a level down to 1,000 levels, then the depth written out.
  o.top = 1200;
  std::ostringstream text;
  print_report(e, o, text);
  const std::string t = text.str();
  EXPECT_NE(t.find("%  " + std::string(2 * 1000, ' ') + "ping  [1000]\n"), std::string::npos);
  EXPECT_NE(t.find("%  " + std::string(2 * 1000, ' ') + "[depth 1199] pingpong.c:10  [1199]\n"), std::string::npos);
  EXPECT_EQ(t.find(std::string(2 + 2 * 1000 + 1, ' ')), std::string::npos);  // after the columns' two
}

// Walking every context (its record, children and values) leaves no page of meta.db or
// profile.db resident in the process: those are read by pread through a small cache, not
// through the mappings, whose read faults map up to a large folio (2 MiB) at a time.
TEST_F(ViewsDeepTree, WalksLeaveNoDatabasePagesResident) {
  const Experiment& e = *e_;
  e.release_pages();
  double sum = 0;
  std::vector<uint32_t> kids;
  size_t walked = 0;
  for (uint32_t c = 1; c < e.id_limit(); ++c) {
    if (!e.has(c)) continue;
    const db::Context x = e.context(c);
    ASSERT_EQ(x.ctxId, c);
    e.children(c, kids);
    EXPECT_EQ(e.has_children(c), !kids.empty()) << c;
    sum += e.exclusive(c, metric());
    ++walked;
  }
  EXPECT_EQ(walked + 1, e.num_contexts());
  EXPECT_EQ(sum, 2 * kLeafValue);  // exclusive at the leaf's function context and at its line
  // Resident pages of the two files' mappings, from /proc/self/smaps.
  std::ifstream smaps("/proc/self/smaps");
  std::string line, mapping;
  uint64_t kib = 0;
  while (std::getline(smaps, line)) {
    if (!line.empty() && std::isxdigit(uint8_t(line[0])) && line.find('-') < line.find(' ')) {
      mapping = line.substr(line.rfind(' ') + 1);
    } else if (line.rfind("Rss:", 0) == 0 && (mapping.ends_with("/meta.db") || mapping.ends_with("/profile.db"))) {
      kib += std::stoull(line.substr(4));
    }
  }
  EXPECT_LE(kib, 64u) << "KiB of meta.db and profile.db resident after walking " << walked << " contexts";
}

// A call path query down the whole chain: walked without recursion; the leaf's line is
// matched once, below every ping (so outermost), and "**/ping" matches 75,000 frames, the
// first of them alone outermost.
TEST_F(ViewsDeepTree, PathQueries) {
  const Experiment& e = *e_;
  auto q = parse_path_query("**/function:ping/**/line:leaf.c:7");
  ASSERT_TRUE(q.ok()) << q.status().message();
  auto found = query_contexts(e, *q);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].ctx, kDeepest);
  EXPECT_TRUE(found[0].outermost);
  auto pings = query_contexts(e, *parse_path_query("ping"));
  ASSERT_EQ(pings.size(), size_t(kFrames / 2));
  EXPECT_EQ(pings[0].ctx, 4u);  // frame 0, tree order
  EXPECT_TRUE(pings[0].outermost);
  EXPECT_EQ(std::count_if(pings.begin(), pings.end(), [](const QueryMatch& m) { return m.outermost; }), 1);
  // Anchored: main is the entry point's child, not the top.
  EXPECT_TRUE(query_contexts(e, *parse_path_query("/main")).empty());
  EXPECT_EQ(query_contexts(e, *parse_path_query("/*/main")).size(), 1u);
  EXPECT_EQ(query_contexts(e, *parse_path_query("**/module:libleaf.so")).size(), 1u);  // the leaf (its line has no module)
  EXPECT_EQ(query_contexts(e, *parse_path_query("**/file:\\/src\\/leaf.c")).size(), 2u);
}

TEST_F(ViewsDeepTree, FlatAndBottomUp) {
  const Experiment& e = *e_;
  // By function: inclusive over the outermost instances only (the recursion counts once).
  auto fns = flat_rows(e, FlatBy::Function);
  ASSERT_EQ(fns.size(), 5u);
  for (const FlatRow& r : fns) {
    SCOPED_TRACE(r.name);
    EXPECT_EQ(r.inc[0], r.key == kTick ? 0.0 : kLeafValue);
    EXPECT_EQ(r.exc[0], r.key == kLeaf ? kLeafValue : 0.0);
  }
  auto mods = flat_rows(e, FlatBy::Module);
  ASSERT_EQ(mods.size(), 2u);
  EXPECT_EQ(mods[0].inc[0], kLeafValue);
  EXPECT_EQ(mods[1].name, "/opt/app/lib/libleaf.so");
  EXPECT_EQ(mods[1].exc[0], kLeafValue);
  auto files = flat_rows(e, FlatBy::File);
  ASSERT_EQ(files.size(), 3u);
  for (const FlatRow& r : files) EXPECT_EQ(r.inc[0], kLeafValue) << r.name;
  auto lines = flat_rows(e, FlatBy::Line);
  ASSERT_EQ(lines.size(), 4u);  // main.c:4, pingpong.c:5, pingpong.c:10, leaf.c:7
  for (const FlatRow& r : lines) EXPECT_EQ(r.inc[0], kLeafValue) << r.name;
  size_t total = 0;
  FlatTable spilled = flat_top(e, FlatBy::Line, {0}, 10, total, /*budget=*/64);
  EXPECT_EQ(total, 4u);
  EXPECT_EQ(spilled.size(), 4u);

  CallerIndex ci(e);
  auto roots = ci.roots();
  ASSERT_EQ(roots.size(), 5u);
  for (const Aggregate& a : roots) EXPECT_TRUE(a.hasChildren) << a.key;
  auto tickCallers = ci.children({kTick});  // frame k, k a multiple of 10: ping
  ASSERT_EQ(tickCallers.size(), 1u);
  EXPECT_EQ(tickCallers[0].key, kPing);
  // leaf <- pong (kFrames is even: the last frame is pong) <- ping <- pong ...
  auto callers = ci.children({kLeaf});
  ASSERT_EQ(callers.size(), 1u);
  EXPECT_EQ(callers[0].key, kPong);
  EXPECT_EQ(callers[0].inc[0], kLeafValue);
  EXPECT_TRUE(callers[0].hasChildren);
  // ping's callers: main once (the outermost instance, inclusive), pong 74,999 times.
  auto pingCallers = ci.children({kPing});
  ASSERT_EQ(pingCallers.size(), 2u);
  for (const Aggregate& a : pingCallers) EXPECT_EQ(a.inc[0], a.key == kMain ? kLeafValue : 0.0) << a.key;
  Aggregate pp = ci.node({kPing, kPong});
  EXPECT_EQ(pp.inc[0], 0.0);  // no instance of ping called from pong is the outermost
  EXPECT_TRUE(pp.hasChildren);
}

// The outline over the recursion: each row counts its outermost instance's inclusive value
// once (ping's line 5 lies below 75,000 ping frames, each a path through that row).
TEST_F(ViewsDeepTree, StaticStructure) {
  const Experiment& e = *e_;
  StaticTree st(e);
  auto mods = st.rows({});
  ASSERT_EQ(mods.size(), 2u);
  for (const StaticRow& r : mods) EXPECT_EQ(r.inc[0], kLeafValue) << r.name;
  EXPECT_EQ(mods[0].name, "libleaf.so");  // ties on inclusive: the exclusive decides
  EXPECT_EQ(mods[0].exc[0], kLeafValue);
  auto fns = st.rows({}, 3);
  ASSERT_EQ(fns.size(), 5u);
  for (const StaticRow& r : fns) {
    SCOPED_TRACE(r.name);
    EXPECT_EQ(r.inc[0], r.name == "tick" ? 0.0 : kLeafValue);
    EXPECT_EQ(r.exc[0], r.name == "leaf" ? kLeafValue : 0.0);
  }
  auto ping = std::find_if(fns.begin(), fns.end(), [](auto& r) { return r.name == "ping"; });
  ASSERT_NE(ping, fns.end());
  auto body = st.rows(ping->path);
  ASSERT_EQ(body.size(), 1u);
  EXPECT_EQ(body[0].name, "pingpong.c:5");
  EXPECT_EQ(body[0].inc[0], kLeafValue);
  auto calls = st.rows(body[0].path);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].name, "-> pong");
  EXPECT_EQ(calls[0].inc[0], kLeafValue);
  EXPECT_EQ(calls[1].name, "-> tick");
  EXPECT_EQ(calls[1].inc[0], 0.0);
  // Flattened to the call sites: every function's body, four levels down.
  auto sites = st.rows({}, 5);
  std::map<std::string, double> inc;
  for (const StaticRow& r : sites) inc[r.name] += r.inc[0];
  EXPECT_EQ(inc["-> pong"], kLeafValue);
  EXPECT_EQ(inc["-> ping"], 2 * kLeafValue);  // two rows: main's call site and pong's
  EXPECT_EQ(inc["-> leaf"], kLeafValue);
  EXPECT_EQ(inc["leaf.c:7"], kLeafValue);  // a leaf above the depth asked

  Api api(e);
  std::string text;
  std::string path;
  for (uint64_t k : ping->path) path += (path.empty() ? "" : "/") + static_key_string(k);
  Reply r = get(api, "structure", {{"path", path}}, text);
  ASSERT_EQ(r.status, 200) << text.substr(0, 200);
  auto j = nlohmann::json::parse(text);
  ASSERT_EQ(j["rows"].size(), 1u);
  EXPECT_EQ(j["rows"][0]["name"], "pingpong.c:5");
  EXPECT_EQ(j["rows"][0]["kind"], "line");
  EXPECT_EQ(j["rows"][0]["line"], 5);
  EXPECT_EQ(j["rows"][0]["inc"][0], kLeafValue);
  r = get(api, "structure", {{"path", j["rows"][0]["path"]}}, text);
  ASSERT_EQ(r.status, 200);
  j = nlohmann::json::parse(text);
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_EQ(j["rows"][0]["kind"], "call");
  EXPECT_FALSE(j["rows"][0]["hasChildren"]);
  r = get(api, "structure", {{"depth", "3"}, {"top", "2"}}, text);
  ASSERT_EQ(r.status, 200);
  j = nlohmann::json::parse(text);
  EXPECT_EQ(j["total"], 5);
  EXPECT_EQ(j["rows"].size(), 2u);
  EXPECT_EQ(get(api, "structure", {{"path", "f1"}}, text).status, 400);
  EXPECT_EQ(get(api, "structure", {{"depth", "0"}}, text).status, 400);
  EXPECT_EQ(get(api, "structure", {{"depth", "9"}}, text).status, 400);
}

TEST_F(ViewsDeepTree, TraceColoursAndStacks) {
  const Experiment& e = *e_;
  auto tr = e.trace();
  ASSERT_TRUE(tr.ok() && *tr);
  constexpr uint32_t kWidth = kSamples;  // a pixel a sample
  for (uint64_t d : std::vector<uint64_t>{0, 1, 2, 77777, kFrames, kFrames + 1, 1u << 20}) {
    SCOPED_TRACE(d);
    TraceQuery q{kT0, kT0 + 10 * kSamples, 0, 1, 1, kWidth, uint32_t(d)};  // the CPU line
    auto rows = trace_pixels(e, q);
    ASSERT_TRUE(rows.ok()) << rows.status().message();
    ASSERT_EQ(rows->size(), 1u);
    std::vector<uint32_t> pixels;
    for (auto [key, n] : (*rows)[0].runs) pixels.insert(pixels.end(), n, key);
    ASSERT_EQ(pixels.size(), kWidth);
    for (uint32_t x = 0; x < kWidth; ++x) {  // pixel x's instant falls in sample x's span
      ASSERT_EQ(pixels[x], expected_colour(sample_ctx(x), d)) << "pixel " << x << " ctx " << sample_ctx(x);
      if (x % 97 == 0 && sample_ctx(x) != 0) {  // and what the walk over the whole path finds
        ASSERT_EQ(pixels[x], e.function_of(context_at_depth(e, sample_ctx(x), uint32_t(d))));
      }
    }
  }
  auto s = trace_sample(e, 0, kT0 + 10 * (kSamples - 1));
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_TRUE(s->found);
  EXPECT_EQ(s->ctx, kDeepest);
  ASSERT_EQ(s->stack.size(), size_t(kDeepest) + 1);
  EXPECT_EQ(s->stack.front(), 0u);
  EXPECT_EQ(s->stack.back(), kDeepest);
  // GPU idle throughout: each sample's innermost function takes its 10 time units.
  auto blame = gpu_idle_blame(e, kT0, kT0 + 10 * kSamples, kSamples);
  ASSERT_TRUE(blame.ok()) << blame.status().message();
  EXPECT_EQ(blame->gpuLines, 1u);
  std::map<uint32_t, double> want;
  for (uint32_t x = 1; x < kSamples; ++x) want[expected_colour(sample_ctx(x), 1ull << 40)] += 10;
  std::map<uint32_t, double> got;
  for (auto [key, v] : blame->rows) got[key] = v;
  EXPECT_EQ(got, want);
  EXPECT_EQ(blame->unattributed, 10.0);  // the idle first sample
}

TEST_F(ViewsDeepTree, ServerApi) {
  Api api(*e_);
  std::string body;
  Reply r = get(api, "context", {{"ctx", std::to_string(kDeepest)}}, body);
  ASSERT_EQ(r.status, 200) << body.substr(0, 200);
  auto j = nlohmann::json::parse(body);
  ASSERT_EQ(j["path"].size(), size_t(kDeepest) + 1);
  EXPECT_EQ(j["path"][0]["name"], "<program root>");
  EXPECT_EQ(j["path"][kDeepest]["ctx"], kDeepest);
  EXPECT_EQ(j["path"][kDeepest]["name"], "leaf.c:7");
  EXPECT_EQ(j["metrics"][0]["inc"]["sum"], kLeafValue);
  EXPECT_EQ(j["name"], "leaf.c:7");
  EXPECT_TRUE(r.stream);
  // Streamed, byte for byte what the reply built as a json tree was.
  EXPECT_EQ(body, j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  r = get(api, "context", {{"ctx", "4"}}, body);
  ASSERT_EQ(r.status, 200);
  EXPECT_FALSE(r.stream);
  j = nlohmann::json::parse(body);
  EXPECT_EQ(j["path"].size(), 5u);
  EXPECT_EQ(body, j.dump());

  r = get(api, "children", {{"ctx", std::to_string(kFrames)}}, body);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(nlohmann::json::parse(body)["children"][0]["ctx"], kFrames + 1);
  for (const char* by : {"function", "line", "file", "module"}) {
    r = get(api, "flat", {{"by", by}}, body);
    ASSERT_EQ(r.status, 200) << by;
    EXPECT_EQ(nlohmann::json::parse(body)["rows"][0]["inc"][0], kLeafValue) << by;
  }
  r = get(api, "bottom-up", {}, body);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(nlohmann::json::parse(body)["total"], 5);
  r = get(api, "bottom-up", {{"path", "f1/f2/f1"}}, body);
  ASSERT_EQ(r.status, 200);
  j = nlohmann::json::parse(body);
  ASSERT_EQ(j["rows"].size(), 2u);  // frame 0's ping is called by main, the others by pong
  EXPECT_EQ(j["rows"][0]["key"], "f0");
  EXPECT_EQ(j["rows"][1]["key"], "f2");
  EXPECT_EQ(j["rows"][1]["path"], "f1/f2/f1/f2");
  r = get(api, "trace", {{"width", "2048"}, {"depth", "1048576"}}, body);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(nlohmann::json::parse(body)["lines"].size(), 2u);
  r = get(api, "trace-sample", {{"line", "0"}, {"t", std::to_string(kT0 + 10 * kSamples - 1)}}, body);
  ASSERT_EQ(r.status, 200);
  j = nlohmann::json::parse(body);
  ASSERT_EQ(j["stack"].size(), size_t(kDeepest) + 1);
  EXPECT_EQ(j["stack"][kDeepest]["name"], "leaf.c:7");
  EXPECT_EQ(body, j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  r = get(api, "profile-values", {{"ctx", std::to_string(kDeepest)}}, body);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(nlohmann::json::parse(body)["values"][0][1], kLeafValue);
  // The depth view down the chain: as many rows as asked (every path is deeper), main on
  // top, then ping and pong alternating; the last pixel is the deepest sample's.
  r = get(api, "trace-depth", {{"line", "0"}, {"width", "512"}, {"depths", "512"}}, body);
  ASSERT_EQ(r.status, 200) << body.substr(0, 200);
  j = nlohmann::json::parse(body);
  ASSERT_EQ(j["depths"].size(), 512u);
  EXPECT_EQ(j["depths"][0].back()[0], kMain);
  EXPECT_EQ(j["depths"][1].back()[0], kPing);
  EXPECT_EQ(j["depths"][2].back()[0], kPong);
  for (const auto& row : j["depths"]) {
    uint64_t px = 0;
    for (const auto& run : row) px += run[1].get<uint64_t>();
    EXPECT_EQ(px, 512u);
  }
  EXPECT_EQ(j["functions"][std::to_string(kPing)], "ping");
  EXPECT_EQ(j["profile"], 1);
  EXPECT_EQ(get(api, "trace-depth", {{"width", "10"}}, body).status, 400);  // no line
  EXPECT_EQ(get(api, "trace-depth", {{"line", "0"}}, body).status, 400);    // no width
  EXPECT_EQ(get(api, "trace-depth", {{"line", "9"}, {"width", "10"}}, body).status, 400);
  EXPECT_EQ(get(api, "trace-depth", {{"line", "0"}, {"width", "10"}, {"depths", "513"}}, body).status, 400);
}
