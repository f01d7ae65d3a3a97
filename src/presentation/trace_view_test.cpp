// The trace view on small.d: one line of 13 samples, ~0.1 s apart: ctx 0 (idle), six in
// spinsleep called from main (ctx 9), six in spinsleep called from caller (ctx 18).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "presentation/api_test_util.hpp"
#include "presentation/server/api.hpp"
#include "presentation/trace_view.hpp"

using namespace hpc::present;

namespace {
std::unique_ptr<Experiment> small() {
  auto e = Experiment::open(std::filesystem::path(HPC_SHARED_DIR) / "conformance/dbase/small.d");
  EXPECT_TRUE(e.ok()) << e.status().message();
  return e.ok() ? std::move(*e) : nullptr;
}
uint32_t fn(const Experiment& e, const std::string& name) {
  for (uint32_t i = 0; i < e.meta().functions.size(); ++i)
    if (e.function_name(i) == name) return i;
  return UINT32_MAX;
}
}  // namespace

TEST(TraceView, PixelsByDepth) {
  auto e = small();
  ASSERT_TRUE(e);
  auto tr = e->trace();
  ASSERT_TRUE(tr.ok() && *tr);
  TraceQuery q{(*tr)->minTimestamp(), (*tr)->maxTimestamp(), 0, 1, 1, 12, 0};
  auto rows = trace_pixels(*e, q);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  ASSERT_EQ(rows->size(), 1u);
  using Runs = std::vector<std::pair<uint32_t, uint32_t>>;
  EXPECT_EQ((*rows)[0].runs, (Runs{{kTraceIdle, 1}, {fn(*e, "main"), 11}}));
  q.depth = 1;
  rows = trace_pixels(*e, q);
  EXPECT_EQ((*rows)[0].runs, (Runs{{kTraceIdle, 1}, {fn(*e, "spinsleep"), 6}, {fn(*e, "caller"), 5}}));
  q.depth = 5;  // deeper than any path: the deepest function
  rows = trace_pixels(*e, q);
  EXPECT_EQ((*rows)[0].runs, (Runs{{kTraceIdle, 1}, {fn(*e, "spinsleep"), 11}}));
  // Zoomed into the first sample only: idle everywhere.
  q.t1 = q.t0 + 1000;
  q.width = 4;
  rows = trace_pixels(*e, q);
  EXPECT_EQ((*rows)[0].runs, (Runs{{kTraceIdle, 4}}));
}

TEST(TraceView, RowsAsJson) {
  auto e = small();
  ASSERT_TRUE(e);
  TraceQuery q{(*e->trace())->minTimestamp(), (*e->trace())->maxTimestamp(), 0, 1, 1, 12, 1};
  auto rows = trace_pixels(*e, q);
  ASSERT_TRUE(rows.ok());
  auto j = nlohmann::json::parse("{" + trace_rows_json(*e, *rows) + "}");
  EXPECT_EQ(j["lines"][0]["runs"].dump(), "[[-1,1],[" + std::to_string(fn(*e, "spinsleep")) + ",6],[" +
                                              std::to_string(fn(*e, "caller")) + ",5]]");
  EXPECT_EQ(j["functions"][std::to_string(fn(*e, "caller"))], "caller");
  EXPECT_EQ(j["lines"][0]["profile"], 1);
}

TEST(TraceView, BadQueriesAreRefused) {
  auto e = small();
  ASSERT_TRUE(e);
  TraceQuery q{10, 5, 0, 1, 1, 12, 0};
  EXPECT_FALSE(trace_pixels(*e, q).ok());
  q = {0, 100, 0, 2, 1, 12, 0};  // only one line
  EXPECT_FALSE(trace_pixels(*e, q).ok());
  q = {0, 100, 0, 1, 1, kMaxTraceWidth + 1, 0};
  EXPECT_FALSE(trace_pixels(*e, q).ok());
  EXPECT_FALSE(trace_sample(*e, 7, 0).ok());
}

TEST(TraceView, SampleStack) {
  auto e = small();
  ASSERT_TRUE(e);
  uint64_t t0 = (*e->trace())->minTimestamp();
  auto s = trace_sample(*e, 0, t0 + 800'000'000);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s->found);
  EXPECT_EQ(s->ctx, 18u);
  EXPECT_EQ(s->stack, (std::vector<uint32_t>{0, 1, 4, 15, 22, 21, 19, 18}));
  EXPECT_LE(s->start, t0 + 800'000'000);
  EXPECT_GT(s->end, t0 + 800'000'000);
  s = trace_sample(*e, 0, t0 - 1);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->found);
}

TEST(TraceView, GpuIdleBlame) {
  // loops-cuda-nvidia-t: one GPU stream line (context 0 between kernels), one CPU thread
  // line without samples: the idle time is found and left unattributed.
  auto e = Experiment::open(std::filesystem::path(HPC_SHARED_DIR) / "conformance/dbase/loops-cuda-nvidia-t.d");
  ASSERT_TRUE(e.ok()) << e.status().message();
  auto tr = (*e)->trace();
  ASSERT_TRUE(tr.ok() && *tr);
  EXPECT_TRUE(is_gpu_profile(**e, (*tr)->line(0).profIndex()));
  EXPECT_FALSE(is_gpu_profile(**e, (*tr)->line(1).profIndex()));
  auto b = gpu_idle_blame(**e, (*tr)->minTimestamp(), (*tr)->maxTimestamp() + 1, 1000);
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->gpuLines, 1u);
  EXPECT_EQ(b->cpuLines, 1u);
  EXPECT_GT(b->idleTime, 0);
  EXPECT_LT(b->idleTime, double((*tr)->maxTimestamp() - (*tr)->minTimestamp()));
  EXPECT_DOUBLE_EQ(b->unattributed, b->idleTime);
  EXPECT_TRUE(b->rows.empty());
  EXPECT_FALSE(gpu_idle_blame(**e, 10, 5, 100).ok());
}

// The depth view of small.d's line: main at depth 0, then spinsleep (called from main) or
// caller, then spinsleep below caller only; no fourth row: no path is that deep.
TEST(TraceView, DepthViewOfOneLine) {
  auto e = small();
  ASSERT_TRUE(e);
  const uint64_t t0 = (*e->trace())->minTimestamp(), t1 = (*e->trace())->maxTimestamp();
  auto d = trace_depth_rows(*e, 0, t0, t1, 12, 64);
  ASSERT_TRUE(d.ok()) << d.status().message();
  using Runs = std::vector<std::pair<uint32_t, uint32_t>>;
  ASSERT_EQ(d->depths.size(), 3u);
  EXPECT_EQ(d->depths[0], (Runs{{kTraceIdle, 1}, {fn(*e, "main"), 11}}));
  EXPECT_EQ(d->depths[1], (Runs{{kTraceIdle, 1}, {fn(*e, "spinsleep"), 6}, {fn(*e, "caller"), 5}}));
  EXPECT_EQ(d->depths[2], (Runs{{kTraceIdle, 7}, {fn(*e, "spinsleep"), 5}}));  // idle where the path ends
  EXPECT_EQ(d->profIndex, 1u);
  d = trace_depth_rows(*e, 0, t0, t1, 12, 2);  // at most two rows
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->depths.size(), 2u);
  EXPECT_FALSE(trace_depth_rows(*e, 1, t0, t1, 12, 8).ok());  // no such line
  EXPECT_FALSE(trace_depth_rows(*e, 0, t1, t0, 12, 8).ok());
  EXPECT_FALSE(trace_depth_rows(*e, 0, t0, t1, 12, 0).ok());
  EXPECT_FALSE(trace_depth_rows(*e, 0, t0, t1, 12, kMaxTraceDepths + 1).ok());
}

// On every line of loops-cputime-t.d, each depth row agrees with the main view at that depth
// wherever the path is that deep, and is idle exactly where the main view shows a shallower
// path's innermost function (the same as at the depth above).
TEST(TraceView, DepthViewAgreesWithTheMainView) {
  auto e = Experiment::open(std::filesystem::path(HPC_SHARED_DIR) / "conformance/dbase/loops-cputime-t.d");
  ASSERT_TRUE(e.ok()) << e.status().message();
  const Experiment& x = **e;
  const auto* tr = *x.trace();
  const uint32_t W = 300;
  auto expand = [&](const std::vector<std::pair<uint32_t, uint32_t>>& runs) {
    std::vector<uint32_t> px;
    for (auto [k, n] : runs) px.insert(px.end(), n, k);
    return px;
  };
  size_t deep = 0;
  for (uint32_t line = 0; line < tr->size(); ++line) {
    auto d = trace_depth_rows(x, line, tr->minTimestamp(), tr->maxTimestamp() + 1, W, 64);
    ASSERT_TRUE(d.ok()) << d.status().message();
    ASSERT_FALSE(d->depths.empty());
    deep = std::max(deep, d->depths.size());
    std::vector<uint32_t> above;
    for (uint32_t depth = 0; depth <= d->depths.size(); ++depth) {
      TraceQuery q{tr->minTimestamp(), tr->maxTimestamp() + 1, line, line + 1, 1, W, depth};
      auto main = trace_pixels(x, q);
      ASSERT_TRUE(main.ok());
      const auto m = expand((*main)[0].runs);
      const auto v = depth < d->depths.size() ? expand(d->depths[depth]) : std::vector<uint32_t>(W, kTraceIdle);
      ASSERT_EQ(v.size(), W);
      for (uint32_t px = 0; px < W; ++px) {
        if (v[px] != kTraceIdle) {
          EXPECT_EQ(v[px], m[px]) << "line " << line << " depth " << depth << " pixel " << px;
        } else if (depth > 0) {
          EXPECT_EQ(m[px], above[px]) << "line " << line << " depth " << depth << " pixel " << px;
        }
      }
      above = m;
    }
  }
  EXPECT_GE(deep, 4u);
}

// hpcviewer's "expose GPU traces" on loops-cuda-nvidia-t.d's GPU stream line (100 kernels of
// about 0.3 ms with gaps of about 20 us): at widths whose pixels are about a kernel long, a
// pixel whose middle falls in a gap is idle; exposed, every pixel within which some kernel
// runs shows one, checked against the records themselves; the CPU line is drawn as before.
TEST(TraceView, ExposedGpuOperations) {
  auto e = Experiment::open(std::filesystem::path(HPC_SHARED_DIR) / "conformance/dbase/loops-cuda-nvidia-t.d");
  ASSERT_TRUE(e.ok()) << e.status().message();
  const Experiment& x = **e;
  const auto* tr = *x.trace();
  auto busy = [](const TraceRow& r) {
    uint32_t n = 0;
    for (auto [k, c] : r.runs) n += k == kTraceIdle ? 0 : c;
    return n;
  };
  uint32_t gained = 0;
  for (uint32_t W : {40u, 97u, 101u, 150u, 199u, 1000u}) {
    TraceQuery q{tr->minTimestamp(), tr->maxTimestamp() + 1, 0, uint32_t(tr->size()), 8, W, 0};
    auto plain = trace_pixels(x, q);
    q.exposeGpu = true;
    auto exposed = trace_pixels(x, q);
    ASSERT_TRUE(plain.ok() && exposed.ok());
    for (size_t i = 0; i < plain->size(); ++i) {
      const TraceRow &p = (*plain)[i], &x2 = (*exposed)[i];
      if (!is_gpu_profile(x, p.profIndex)) {
        EXPECT_EQ(p.runs, x2.runs) << "a CPU line is drawn as before";
        continue;
      }
      EXPECT_GE(busy(x2), busy(p));
      gained += busy(x2) - busy(p);
      const hpc::db::TraceLineView& l = tr->line(p.line);
      std::vector<uint32_t> px;
      for (auto [k, c] : x2.runs) px.insert(px.end(), c, k);
      ASSERT_EQ(px.size(), W);
      const unsigned __int128 span = q.t1 - q.t0;
      for (uint32_t at = 0; at < W; ++at) {
        const uint64_t s = q.t0 + uint64_t(span * at / W), t = q.t0 + uint64_t(span * (at + 1) / W);
        bool any = false;
        for (uint64_t r = 0; r < l.size(); ++r) {
          const bool inEffect = l.time(r) <= s && (r + 1 == l.size() || l.time(r + 1) > s);
          if ((inEffect || (l.time(r) > s && l.time(r) < t)) && l.ctx(r) != 0) any = true;
        }
        EXPECT_EQ(px[at] != kTraceIdle, any) << "width " << W << " pixel " << at;
      }
    }
  }
  EXPECT_GT(gained, 0u) << "pixels whose middle fell in a gap";
}

// hpcviewer's filter of execution contexts: lines 3 and 1 of loops-cputime-t.d alone, in that
// order, each as it is drawn alone; through the API too, with the lines' labels listed.
TEST(TraceView, ChosenLines) {
  auto e = Experiment::open(std::filesystem::path(HPC_SHARED_DIR) / "conformance/dbase/loops-cputime-t.d");
  ASSERT_TRUE(e.ok()) << e.status().message();
  const Experiment& x = **e;
  const auto* tr = *x.trace();
  ASSERT_EQ(tr->size(), 4u);
  TraceQuery q{tr->minTimestamp(), tr->maxTimestamp() + 1, 0, 2, 8, 64, 1};
  q.lines = {3, 1};
  auto chosen = trace_pixels(x, q);
  ASSERT_TRUE(chosen.ok()) << chosen.status().message();
  ASSERT_EQ(chosen->size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    TraceQuery one{q.t0, q.t1, q.lines[i], q.lines[i] + 1, 1, 64, 1};
    auto alone = trace_pixels(x, one);
    ASSERT_TRUE(alone.ok());
    EXPECT_EQ((*chosen)[i].line, q.lines[i]);
    EXPECT_EQ((*chosen)[i].runs, (*alone)[0].runs);
  }
  q.line1 = 3;  // past the list
  EXPECT_FALSE(trace_pixels(x, q).ok());
  q.line1 = 2, q.lines = {1, 9};
  EXPECT_FALSE(trace_pixels(x, q).ok());

  Api api(x);
  auto body = [&](const Params& p, int status) { return api_body(api, p.count("width") ? "trace" : "trace-lines", p, status); };
  auto lines = nlohmann::json::parse(body({}, 200));
  ASSERT_EQ(lines["lines"].size(), 4u);
  EXPECT_EQ(lines["lines"][3]["line"], 3);
  EXPECT_FALSE(lines["lines"][3]["label"].get<std::string>().empty());
  EXPECT_EQ(lines["lines"][3]["label"], x.profile_label(lines["lines"][3]["profile"].get<uint32_t>()));
  auto j = nlohmann::json::parse(body({{"width", "64"}, {"depth", "1"}, {"lines", "3,1"}}, 200));
  ASSERT_EQ(j["lines"].size(), 2u);
  EXPECT_EQ(j["lines"][0]["line"], 3);
  EXPECT_EQ(j["lines"][1]["line"], 1);
  j = nlohmann::json::parse(body({{"width", "64"}, {"lines", "0-3"}}, 200));
  EXPECT_EQ(j["lines"].size(), 4u);
  for (const char* bad : {"4", "2-1", "x", "1,,2"}) body({{"width", "64"}, {"lines", bad}}, 400);
}
