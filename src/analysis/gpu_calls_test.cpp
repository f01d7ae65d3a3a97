// GPU calling contexts reconstructed from PC samples (gpu_calls.hpp): a made-up module whose
// kernel calls g() from two sites, g() calls h(), and the kernel calls r1(), which recurses
// through r2(). Every expected value is worked out by hand from the profile's samples.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <random>
#include <set>

#include "analysis/gpu_calls.hpp"
#include "analysis/fake_profile.hpp"
#include "analysis/memory_sink.hpp"
#include "analysis/pipeline.hpp"

namespace hpc::analysis {
namespace {

constexpr const char* kModule = "/gpu/c.gpubin";

// Procedures: name, entry, end, the line of every instruction but the calls'.
struct Proc {
  const char* name;
  uint64_t begin, end;
  uint32_t line;
};
const Proc kProcs[] = {{"kern()", 0x100, 0x200, 10}, {"g()", 0x300, 0x400, 20}, {"h()", 0x500, 0x600, 30},
                       {"r1()", 0x700, 0x800, 40},   {"r2()", 0x800, 0x900, 50}};
// Calls: site, caller, callee, and the site's line.
struct Call {
  CallSite site;
  uint32_t line;
};
const Call kCalls[] = {{{0x120, 0x100, 0x300}, 11}, {{0x140, 0x100, 0x300}, 12}, {{0x160, 0x100, 0x700}, 13},
                       {{0x320, 0x300, 0x500}, 21}, {{0x720, 0x700, 0x800}, 41}, {{0x820, 0x800, 0x700}, 51}};

class CallStructure final : public StructureSource {
public:
  // A chain of `diamonds` diamonds below the kernel instead (2^diamonds paths to its end).
  explicit CallStructure(unsigned diamonds = 0) : diamonds_(diamonds) {
    for (unsigned k = 0; k < diamonds_; ++k) {
      names_.push_back("d" + std::to_string(k) + "a");
      names_.push_back("d" + std::to_string(k) + "b");
    }
  }
  bool lookup(const std::string& m, uint64_t a, std::vector<ScopeStep>& out) const override {
    out.clear();
    if (m != kModule) return false;
    for (const Proc& p : procs())
      if (a >= p.begin && a < p.end) {
        out.push_back({ScopeStep::Kind::Procedure, p.name, "c.cu", p.line, p.begin, 0});
        uint32_t line = p.line;
        for (const Call& c : calls())
          if (c.site.site == a) line = c.line;
        out.push_back({ScopeStep::Kind::Line, "", "c.cu", line, 0, 0});
        return true;
      }
    return false;
  }
  void callSites(const std::string& m, std::vector<CallSite>& out) const override {
    out.clear();
    if (m == kModule)
      for (const Call& c : calls()) out.push_back(c.site);
  }

  std::vector<Proc> procs() const {
    if (!diamonds_) return {std::begin(kProcs), std::end(kProcs)};
    // Level k: procedures d<k>a and d<k>b at 0x1000 * (2k + 1) and 0x1000 * (2k + 2), each
    // calling both of level k + 1; the kernel calls both of level 0; the last level calls
    // leaf() at 0x100000.
    std::vector<Proc> p{{"kern()", 0x100, 0x200, 10}, {"leaf()", 0x100000, 0x100100, 99}};
    for (unsigned k = 0; k < 2 * diamonds_; ++k) p.push_back({names_[k].c_str(), 0x1000 * (k + 1), 0x1000 * (k + 1) + 0x100, 100 + k});
    return p;
  }
  std::vector<Call> calls() const {
    if (!diamonds_) return {std::begin(kCalls), std::end(kCalls)};
    std::vector<Call> c{{{0x110, 0x100, 0x1000}, 11}, {{0x120, 0x100, 0x2000}, 12}};
    for (unsigned k = 0; k < 2 * diamonds_; ++k) {
      const uint64_t me = 0x1000 * (k + 1);
      const unsigned level = k / 2;
      if (level + 1 < diamonds_) {
        c.push_back({{me + 0x10, me, 0x1000 * (2 * (level + 1) + 1)}, 200});
        c.push_back({{me + 0x20, me, 0x1000 * (2 * (level + 1) + 2)}, 201});
      } else {
        c.push_back({{me + 0x10, me, 0x100000}, 200});
      }
    }
    return c;
  }

private:
  unsigned diamonds_;
  std::vector<std::string> names_;
};

using P = Placeholder;
constexpr uint16_t kCpu = 1, kGpu = 2;

// main -> launch site 0x500 -> <gpu kernel> -> the samples: (pc, GINS, GINS:STL_ANY).
struct Sample {
  uint64_t pc;
  double gins, stalls = 0;
};
void addProfile(std::vector<std::unique_ptr<ProfileSource>>& in, const std::vector<Sample>& samples) {
  ProfileTree t;
  t.idTuple = {{1, 1, 7, 0}, {3, 3, uint64_t(in.size()), uint64_t(in.size())}};
  t.metrics = {"GINS", "GINS:STL_ANY"};
  t.loadMap = {{kCpu, "/bin/app"}, {kGpu, kModule}};
  t.nodes = {{1, 0, 0, P::Root, true, 0}, {2, 1, 0, P::MainThread, true, 0}, {3, 2, kCpu, P::None, true, 0x500},
             {10, 3, 0, P::GpuKernel, true, 0}};
  ProfileValues v;
  uint32_t id = 100;
  for (const Sample& s : samples) {
    t.nodes.push_back({id, 10, kGpu, P::None, false, s.pc});
    if (s.gins) v.values.push_back({id, 0, s.gins});
    if (s.stalls) v.values.push_back({id, 1, s.stalls});
    ++id;
  }
  in.push_back(std::make_unique<FakeProfile>("p-" + std::to_string(in.size()), std::move(t), std::move(v)));
}

struct GpuRun {
  MemorySink sink;
  PipelineResult result;
  const Context* op = nullptr;  // <gpu kernel>
};

void analyse(const StructureSource& structure, std::vector<std::unique_ptr<ProfileSource>> in, GpuRun& run,
             unsigned threads = 1) {
  PipelineOptions opt;
  opt.threads = threads;
  auto r = runPipeline(in, &structure, run.sink, opt);
  ASSERT_TRUE(r.ok()) << r.status().message();
  run.result = std::move(*r);
  const Context* entry = run.sink.meta.cct->root()->children()[0];
  const Context* launch = entry->children()[0];
  ASSERT_EQ(launch->children().size(), 1u);
  run.op = launch->children()[0];
  ASSERT_EQ(run.op->key().function->name, "<gpu kernel>");
}

// The child of c that is function `name`, line `line` or instruction `pc` (nullptr: none).
const Context* fn(const Context* c, const std::string& name) {
  for (const Context* k : c->children())
    if (k->key().type == LexType::Function && k->key().function && k->key().function->name == name) return k;
  return nullptr;
}
const Context* line(const Context* c, uint32_t l) {
  for (const Context* k : c->children())
    if (k->key().type == LexType::Line && k->key().line == l) return k;
  return nullptr;
}
const Context* insn(const Context* c, uint64_t pc) {
  for (const Context* k : c->children())
    if (k->key().type == LexType::Instruction && k->key().offset == pc) return k;
  return nullptr;
}
// The call instruction at `pc` (line `l`) of function `name` below c.
const Context* site(const Context* c, const std::string& name, uint32_t l, uint64_t pc) {
  const Context* f = c ? fn(c, name) : nullptr;
  const Context* ln = f ? line(f, l) : nullptr;
  return ln ? insn(ln, pc) : nullptr;
}
// The sample at `pc` (line `l`) of function `name` below c.
const Context* at(const Context* c, const std::string& name, uint32_t l, uint64_t pc) { return site(c, name, l, pc); }

double point(const GpuRun& r, const Context* c, uint16_t metric = 0, uint32_t profile = 1) {
  return r.sink.value(profile, c->id(), propId(metric, kPoint));
}
double inclusive(const GpuRun& r, const Context* c, uint16_t metric = 0, uint32_t profile = 1) {
  return r.sink.value(profile, c->id(), propId(metric, kExecution));
}

const std::vector<Sample> kSamples = {
    {0x110, 10},  // kern()
    {0x120, 3},   // kern() calls g(): 3 of g()'s 4 calls
    {0x140, 1},   // kern() calls g(): 1 of 4
    {0x310, 40, 8},  // g()
    {0x510, 20},  // h(), through g()'s unsampled call at 0x320 (weighs 1: its only call)
    {0x160, 2},   // kern() calls r1()
    {0x710, 8},   // r1()
    {0x720, 5},   // r1() calls r2()
    {0x810, 4},   // r2()
    {0x820, 1},   // r2() calls r1(): the recursion (unsampled, r1() would not be reached from r2())
};

TEST(GpuCalls, CalledFunctionsSamplesSplitByTheirCallSitesSamples) {
  CallStructure structure;
  std::vector<std::unique_ptr<ProfileSource>> in;
  addProfile(in, kSamples);
  GpuRun run;
  analyse(structure, std::move(in), run);
  // Only the kernel below the operation: its callees are below their call sites.
  ASSERT_EQ(run.op->children().size(), 1u);
  const Context* kern = fn(run.op, "kern()");
  ASSERT_TRUE(kern);
  EXPECT_EQ(inclusive(run, run.op), 10 + 3 + 1 + 40 + 20 + 2 + 8 + 5 + 4 + 1);
  const Context* s1 = site(run.op, "kern()", 11, 0x120);
  const Context* s2 = site(run.op, "kern()", 12, 0x140);
  ASSERT_TRUE(s1 && s2);
  EXPECT_EQ(point(run, s1), 3);
  EXPECT_EQ(point(run, s2), 1);
  // g()'s 40 samples (8 stalled): 3/4 at the first site, 1/4 at the second.
  const Context* g1 = at(s1, "g()", 20, 0x310);
  const Context* g2 = at(s2, "g()", 20, 0x310);
  ASSERT_TRUE(g1 && g2);
  EXPECT_EQ(fn(s1, "g()")->key().relation, Relation::Call);
  EXPECT_EQ(point(run, g1), 30);
  EXPECT_EQ(point(run, g2), 10);
  EXPECT_EQ(point(run, g1, 1), 6);
  EXPECT_EQ(point(run, g2, 1), 2);
  // h()'s 20 along g()'s call at 0x320 on each path: 15 and 5.
  const Context* h1 = at(site(s1, "g()", 21, 0x320), "h()", 30, 0x510);
  const Context* h2 = at(site(s2, "g()", 21, 0x320), "h()", 30, 0x510);
  ASSERT_TRUE(h1 && h2);
  EXPECT_EQ(point(run, h1), 15);
  EXPECT_EQ(point(run, h2), 5);
  EXPECT_EQ(inclusive(run, fn(s1, "g()")), 45);
  EXPECT_EQ(inclusive(run, fn(s2, "g()")), 15);
  EXPECT_EQ(run.sink.value(1, fn(s1, "g()")->id(), propId(0, kFunction)), 30);
  // r1() and r2() call each other: one component, both below the one call into it, whole.
  const Context* s3 = site(run.op, "kern()", 13, 0x160);
  ASSERT_TRUE(s3);
  ASSERT_EQ(s3->children().size(), 2u);
  EXPECT_EQ(point(run, at(s3, "r1()", 40, 0x710)), 8);
  EXPECT_EQ(point(run, site(s3, "r1()", 41, 0x720)), 5);
  EXPECT_EQ(point(run, at(s3, "r2()", 50, 0x810)), 4);
  EXPECT_EQ(point(run, site(s3, "r2()", 51, 0x820)), 1);
  EXPECT_EQ(inclusive(run, s3), 2 + 8 + 5 + 4 + 1);
  // The same in the summary, and at two threads.
  EXPECT_EQ(run.sink.value(0, g1->id(), propId(0, kPoint)), 30);
  GpuRun two;
  std::vector<std::unique_ptr<ProfileSource>> again;
  addProfile(again, kSamples);
  addProfile(again, kSamples);
  analyse(structure, std::move(again), two, 2);
  const Context* t1 = at(site(two.op, "kern()", 11, 0x120), "g()", 20, 0x310);
  ASSERT_TRUE(t1);
  EXPECT_EQ(point(two, t1, 0, 1), 30);
  EXPECT_EQ(point(two, t1, 0, 2), 30);
}

TEST(GpuCalls, EachProfileSplitsByItsOwnCallSamples) {
  CallStructure structure;
  std::vector<std::unique_ptr<ProfileSource>> in;
  addProfile(in, {{0x120, 3}, {0x140, 1}, {0x310, 40}});
  addProfile(in, {{0x120, 1}, {0x140, 1}, {0x310, 40}});
  GpuRun run;
  analyse(structure, std::move(in), run);
  const Context* g1 = at(site(run.op, "kern()", 11, 0x120), "g()", 20, 0x310);
  const Context* g2 = at(site(run.op, "kern()", 12, 0x140), "g()", 20, 0x310);
  ASSERT_TRUE(g1 && g2);
  EXPECT_EQ(point(run, g1, 0, 1), 30);
  EXPECT_EQ(point(run, g2, 0, 1), 10);
  EXPECT_EQ(point(run, g1, 0, 2), 20);
  EXPECT_EQ(point(run, g2, 0, 2), 20);
  EXPECT_EQ(run.sink.value(0, g1->id(), propId(0, kPoint)), 50);
  EXPECT_EQ(run.sink.value(0, g2->id(), propId(0, kPoint)), 30);
}

// No call instruction sampled (nor the kernel): every call weighs one, on up the callers.
TEST(GpuCalls, UnsampledCallsWeighOne) {
  CallStructure structure;
  std::vector<std::unique_ptr<ProfileSource>> in;
  addProfile(in, {{0x510, 12}});
  GpuRun run;
  analyse(structure, std::move(in), run);
  ASSERT_EQ(run.op->children().size(), 1u);  // kern(), though it has no samples of its own
  const Context* h1 = at(site(site(run.op, "kern()", 11, 0x120), "g()", 21, 0x320), "h()", 30, 0x510);
  const Context* h2 = at(site(site(run.op, "kern()", 12, 0x140), "g()", 21, 0x320), "h()", 30, 0x510);
  ASSERT_TRUE(h1 && h2);
  EXPECT_EQ(point(run, h1), 6);
  EXPECT_EQ(point(run, h2), 6);
  EXPECT_EQ(inclusive(run, run.op), 12);
}

// Paths that multiply past kGpuMaxPaths: the called functions' samples stay below the
// operation, whole, as without reconstruction; the kernel's own are unchanged.
TEST(GpuCalls, TooManyPathsLeaveSamplesBelowTheKernel) {
  CallStructure wide(13);  // 2^13 paths to leaf()
  std::vector<std::unique_ptr<ProfileSource>> in;
  addProfile(in, {{0x130, 2}, {0x100010, 7}});
  GpuRun run;
  testing::internal::CaptureStderr();
  analyse(wide, std::move(in), run);
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("warning: in 1 profile a kernel's device functions are reached by more than 4096 call paths"),
            std::string::npos)
      << said;
  const Context* leaf = at(run.op, "leaf()", 99, 0x100010);
  ASSERT_TRUE(leaf);
  EXPECT_EQ(point(run, leaf), 7);
  EXPECT_EQ(inclusive(run, run.op), 9);
  // Within the bound (2^5 paths), each path has its share: 7 / 32.
  CallStructure narrow(5);
  std::vector<std::unique_ptr<ProfileSource>> in2;
  addProfile(in2, {{0x100010, 32 * 7}});
  GpuRun run2;
  testing::internal::CaptureStderr();
  analyse(narrow, std::move(in2), run2);
  EXPECT_EQ(testing::internal::GetCapturedStderr().find("call paths"), std::string::npos);
  EXPECT_FALSE(fn(run2.op, "leaf()"));
  std::function<void(const Context*, int&)> count = [&](const Context* c, int& n) {
    if (c->key().type == LexType::Instruction && c->key().offset == 0x100010) {
      EXPECT_EQ(point(run2, c), 7);
      ++n;
    }
    for (const Context* k : c->children()) count(k, n);
  };
  int n = 0;
  count(run2.op, n);
  EXPECT_EQ(n, 32);
  EXPECT_EQ(inclusive(run2, run2.op), 32 * 7);
}

// A CPU measurement, or GPU samples in a module without call sites, is untouched.
TEST(GpuCalls, ModulesWithoutCallSitesAsBefore) {
  class NoCalls final : public StructureSource {
  public:
    bool lookup(const std::string& m, uint64_t a, std::vector<ScopeStep>& out) const override {
      return inner.lookup(m, a, out);
    }
    CallStructure inner;
  } structure;
  std::vector<std::unique_ptr<ProfileSource>> in;
  addProfile(in, kSamples);
  GpuRun run;
  analyse(structure, std::move(in), run);
  const Context* g = at(run.op, "g()", 20, 0x310);
  ASSERT_TRUE(g);
  EXPECT_EQ(point(run, g), 40);
  EXPECT_EQ(run.op->children().size(), 5u);  // kern(), g(), h(), r1(), r2()
}

}  // namespace
}  // namespace hpc::analysis

namespace hpc::analysis {
namespace {

// Random call graphs (recursion, diamonds, functions never called, calls never sampled) and
// random samples: every sample left to reconstruction has all of its values emitted, split
// over its paths (shares summing to one), or whole below the kernel past kGpuMaxPaths; none
// that unification placed (a function nothing calls) is emitted again; and the same input
// gives the same output.
TEST(GpuCalls, EverySamplesSharesSumToOne) {
  std::mt19937_64 rng(20261129);
  Module module{"/gpu/random.gpubin", 0};
  for (int round = 0; round < 300; ++round) {
    const int procs = 2 + int(rng() % 12);
    auto entry = [](int p) { return uint64_t(0x1000) * uint64_t(p + 1); };
    std::vector<CallSite> sites;
    for (int p = 0; p < procs; ++p) {
      const int calls = int(rng() % 4);
      for (int c = 0; c < calls; ++c) {
        const int callee = int(rng() % uint64_t(procs));
        if (callee == 0) continue;  // the kernel is never called
        sites.push_back({entry(p) + 0x10 * uint64_t(c + 1), entry(p), entry(callee)});
      }
    }
    GpuCallGraph graph(sites);
    std::vector<GpuSample> samples;
    std::vector<double> weights;
    std::vector<GpuSampleValue> values;
    Context* op = reinterpret_cast<Context*>(uintptr_t(0x40));
    // Samples at random instructions: procedure p's instructions are its entry + 0x10 k.
    std::set<uint64_t> used;
    const int n = 1 + int(rng() % 20);
    for (int s = 0; s < n; ++s) {
      const int p = int(rng() % uint64_t(procs));
      const uint64_t pc = entry(p) + 0x10 * (rng() % 5);
      if (!used.insert(pc).second) continue;
      GpuSample g;
      g.node = uint32_t(100 + samples.size());
      g.opNode = 10;
      g.op = op;
      g.module = &module;
      g.graph = &graph;
      g.pc = pc;
      g.proc = entry(p);
      // Unification placed it where nothing calls its function.
      g.ctx = graph.hasCallers(g.proc) ? nullptr : reinterpret_cast<Context*>(uintptr_t(0x1000) + 64 * samples.size());
      const double w = double(rng() % 4);  // some calls never sampled
      weights.push_back(w);
      if (w > 0) values.push_back({uint32_t(samples.size()), 0, w});  // values are sparse
      values.push_back({uint32_t(samples.size()), 1, 1.5});
      samples.push_back(g);
    }
    // Contexts by (parent, instruction): each distinct path a distinct context.
    std::map<std::pair<uintptr_t, uint64_t>, uintptr_t> made;
    std::map<uintptr_t, uint64_t> pcOf;
    const GpuPlace place = [&](Context* parent, const Module* m, uint64_t addr) {
      EXPECT_EQ(m, &module);
      auto [it, added] = made.emplace(std::make_pair(reinterpret_cast<uintptr_t>(parent), addr),
                                      uintptr_t(0x100000) + 64 * made.size());
      pcOf[it->second] = addr;
      return reinterpret_cast<Context*>(it->second);
    };
    auto runOnce = [&](std::map<std::pair<uintptr_t, uint16_t>, double>& out) {
      return reconstructGpuContexts(samples, weights, values, place, [&](const Context* c, uint16_t m, double v) {
        EXPECT_GT(v, 0.0);
        out[{reinterpret_cast<uintptr_t>(c), m}] += v;
      });
    };
    std::map<std::pair<uintptr_t, uint16_t>, double> out, again;
    const size_t tooMany = runOnce(out);
    EXPECT_EQ(runOnce(again), tooMany);
    EXPECT_EQ(out, again);
    // Sum by sample (by pc) and metric.
    std::map<std::pair<uint64_t, uint16_t>, double> bySample;
    for (const auto& [key, v] : out) bySample[{pcOf.at(key.first), key.second}] += v;
    for (size_t s = 0; s < samples.size(); ++s) {
      SCOPED_TRACE("round " + std::to_string(round) + " sample at " + std::to_string(samples[s].pc));
      for (uint16_t m : {uint16_t(0), uint16_t(1)}) {
        const double want = m == 0 ? weights[s] : 1.5;
        auto it = bySample.find({samples[s].pc, m});
        const double got = it == bySample.end() ? 0.0 : it->second;
        if (samples[s].ctx) EXPECT_EQ(got, 0.0);
        else EXPECT_NEAR(got, want, 1e-9 * (1 + want));
      }
    }
  }
}

}  // namespace
}  // namespace hpc::analysis

namespace hpc::analysis {
namespace {

// A chain of calls (each function calling the next), sampled at its end: no step recurses.
// 4,000 calls deep, the sample is placed below all of them; 200,000 deep, past
// kGpuMaxPaths (a context a call on the path), it stays below the kernel, whole.
TEST(GpuCalls, DeepChainWithoutRecursion) {
  for (const uint64_t depth : {uint64_t(4000), uint64_t(200000)}) {
    std::vector<CallSite> sites;
    for (uint64_t p = 0; p < depth; ++p) sites.push_back({0x100 * p + 0x10, 0x100 * p, 0x100 * (p + 1)});
    GpuCallGraph graph(sites);
    Module module{"/gpu/deep.gpubin", 0};
    GpuSample s;
    s.node = 1;
    s.op = reinterpret_cast<Context*>(uintptr_t(0x40));
    s.module = &module;
    s.graph = &graph;
    s.pc = 0x100 * depth + 0x20;
    s.proc = 0x100 * depth;
    const std::vector<GpuSample> samples{s};
    const std::vector<double> weights{0};
    const std::vector<GpuSampleValue> values{{0, 0, 5.0}};
    // Each context made one call site deeper than its parent (the operation at 0).
    std::map<uintptr_t, size_t> levels{{0x40, 0}};
    size_t placedAt = SIZE_MAX;
    double sum = 0;
    const size_t tooMany = reconstructGpuContexts(
        samples, weights, values,
        [&](Context* parent, const Module*, uint64_t addr) {
          const size_t d = levels.at(reinterpret_cast<uintptr_t>(parent));
          if (addr == s.pc) placedAt = d;
          const uintptr_t made = 0x1000 + 64 * levels.size();
          levels[made] = d + 1;
          return reinterpret_cast<Context*>(made);
        },
        [&](const Context*, uint16_t, double v) { sum += v; });
    EXPECT_EQ(tooMany, depth < kGpuMaxPaths ? 0u : 1u) << depth;
    EXPECT_EQ(placedAt, depth < kGpuMaxPaths ? depth : 0u) << depth;
    EXPECT_EQ(sum, 5.0) << depth;
  }
}

}  // namespace
}  // namespace hpc::analysis
