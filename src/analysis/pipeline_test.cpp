// The pipeline on hand-built inputs shaped like the conformance case "small": main calls
// spinsleep directly and through caller; samples fall in spinsleep's loop.
#include "analysis/fake_profile.hpp"
#include "analysis/pipeline.hpp"

#include <gtest/gtest.h>

#include "analysis/expand.hpp"
#include "analysis/io.hpp"
#include "analysis/memory_sink.hpp"
#include "analysis/stages.hpp"
#include "analysis/transpose.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <set>
#include <thread>
#include <map>
#include <tuple>

#include <tbb/task_arena.h>

namespace hpc::analysis {
namespace {


// spinsleep [0x1129,0x1176): line 1 at entry, loop (line 3, header 0x1169) over
// [0x1147,0x1172); caller [0x1176,0x118b) line 7; main [0x118b,0x11ae) line 11.
class FakeStructure final : public StructureSource {
public:
  bool lookup(const std::string& m, uint64_t a, std::vector<ScopeStep>& out) const override {
    out.clear();
    if (m != "/bin/small") return false;
    auto proc = [&](const char* n, uint32_t l, uint64_t e) {
      out.push_back({ScopeStep::Kind::Procedure, n, "small.c", l, e, 0});
    };
    auto line = [&](uint32_t l) { out.push_back({ScopeStep::Kind::Line, "", "small.c", l, 0, 0}); };
    if (a >= 0x1129 && a < 0x1176) {
      proc("spinsleep", 1, 0x1129);
      if (a >= 0x1147 && a < 0x1172) {
        out.push_back({ScopeStep::Kind::Loop, "", "small.c", 3, 0x1169, 0});
        line(3);
      } else {
        line(1);
      }
      return true;
    }
    if (a >= 0x1176 && a < 0x118b) return proc("caller", 6, 0x1176), line(7), true;
    if (a >= 0x118b && a < 0x11ae) return proc("main", 10, 0x118b), line(11), true;
    return false;
  }
};

ProfileTree smallTree() {
  ProfileTree t;
  t.idTuple = {{1, 1, 0x11ac0300, 0}, {7, 3, 0, 0}, {3, 3, 0, 0}};
  t.metrics = {"CPUTIME (sec)"};
  t.loadMap = {{1, "/bin/small"}};
  t.hasTrace = true;
  using P = Placeholder;
  t.nodes = {{12, 0, 0, P::Root, true, 0},       {19, 12, 0, P::NoActivity, true, 0},
             {20, 12, 0, P::MainThread, true, 0}, {22, 20, 1, P::None, true, 0x119c},
             {24, 22, 1, P::None, true, 0x1154}, {28, 22, 1, P::None, true, 0x114c},
             {27, 22, 1, P::None, true, 0x1129}, {30, 20, 1, P::None, true, 0x11a6},
             {32, 30, 1, P::None, true, 0x1187}, {38, 32, 1, P::None, true, 0x1154},
             {40, 32, 1, P::None, true, 0x1160}, {34, 32, 1, P::None, true, 0x114c},
             {37, 32, 1, P::None, true, 0x1129}};
  return t;
}

ProfileValues smallValues() {
  ProfileValues v;
  v.values = {{24, 0, 0.25}, {28, 0, 0.5}, {38, 0, 0.125}, {40, 0, 0.0625}, {34, 0, 1.0}};
  v.trace = {{100, 19}, {300, 37}, {200, 27}};
  return v;
}

const Context* find(const Context* at, LexType type, uint32_t line) {
  for (const Context* c : at->children())
    if (c->key().type == type && (c->key().line == line || type == LexType::Function)) return c;
  return nullptr;
}

TEST(Pipeline, SmallWithStructure) {
  FakeStructure structure;
  for (unsigned threads : {1u, 3u}) {
    std::vector<std::unique_ptr<ProfileSource>> in;
    in.push_back(std::make_unique<FakeProfile>("a", smallTree(), smallValues()));
    in.push_back(std::make_unique<FakeProfile>("b", smallTree(), smallValues()));
    MemorySink sink;
    PipelineOptions opt;
    opt.threads = threads;
    opt.transposeBudget = 64;  // force several transpose rounds
    auto r = runPipeline(in, &structure, sink, opt);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->profiles, 2u);
    ASSERT_TRUE(sink.finished);
    const Cct& cct = *sink.meta.cct;
    // root -> main thread -> main -> line 11 -> [call-site instructions] -> ...
    ASSERT_EQ(cct.root()->children().size(), 1u);
    const Context* entry = cct.root()->children()[0];
    EXPECT_EQ(entry->key().entry, EntryKind::MainThread);
    ASSERT_FALSE(entry->children().empty());
    const Context* mainFn = entry->children()[0];
    ASSERT_EQ(mainFn->key().function->name, "main");
    const Context* line11 = find(mainFn, LexType::Line, 11);
    ASSERT_NE(line11, nullptr);
    ASSERT_EQ(line11->children().size(), 2u);  // two hidden call-site instructions
    for (const Context* cs : line11->children()) EXPECT_TRUE(cs->key().hidden);

    const double total = 0.25 + 0.5 + 0.125 + 0.0625 + 1.0;
    EXPECT_DOUBLE_EQ(sink.value(1, 0, propId(0, kExecution)), total);
    EXPECT_DOUBLE_EQ(sink.value(1, mainFn->id(), propId(0, kExecution)), total);
    EXPECT_DOUBLE_EQ(sink.value(1, mainFn->id(), propId(0, kFunction)), 0);
    // Summary = sum over the two identical profiles.
    EXPECT_DOUBLE_EQ(sink.value(0, mainFn->id(), propId(0, kExecution)), 2 * total);
    EXPECT_DOUBLE_EQ(sink.contextValue(mainFn->id(), propId(0, kExecution), 2), total);

    // spinsleep called directly from main: loop gets 0.75 in function and lex_aware.
    const Context* cs = nullptr;
    for (const Context* c : line11->children())
      if (c->key().offset == 0x119c) cs = c;
    ASSERT_NE(cs, nullptr);
    ASSERT_FALSE(cs->children().empty());
    const Context* spin = cs->children()[0];
    EXPECT_EQ(spin->key().function->name, "spinsleep");
    const Context* loop = find(spin, LexType::Loop, 3);
    ASSERT_NE(loop, nullptr);
    EXPECT_DOUBLE_EQ(sink.value(1, loop->id(), propId(0, kFunction)), 0.75);
    EXPECT_DOUBLE_EQ(sink.value(1, loop->id(), propId(0, kLexAware)), 0.75);
    EXPECT_DOUBLE_EQ(sink.value(1, loop->id(), propId(0, kPoint)), 0);
    EXPECT_DOUBLE_EQ(sink.value(1, spin->id(), propId(0, kFunction)), 0.75);

    // Trace: sorted, idle -> 0, hidden instruction -> its listed line.
    ASSERT_EQ(sink.traceLines[1].size(), 3u);
    EXPECT_EQ(sink.traceLines[1][0].ctx, 0u);
    EXPECT_EQ(sink.traceLines[1][1].time, 200u);
    const Context* line1 = find(spin, LexType::Line, 1);
    ASSERT_NE(line1, nullptr);
    EXPECT_EQ(sink.traceLines[1][1].ctx, line1->id());
    EXPECT_EQ(sink.ids[1][0].logical, 0u);
    EXPECT_TRUE(sink.ids[1][0].isPhysical);
    EXPECT_FALSE(sink.ids[1][2].isPhysical);
  }
}

// Runs the pipeline into `sink`, which takes each trace streamed (a chunk at a time, into
// its placed line) or whole, at `threads`.
Expected<PipelineResult> runTraced(std::vector<std::unique_ptr<ProfileSource>>& in, const StructureSource& structure,
                                   MemorySink& sink, bool stream, unsigned threads = 1) {
  sink.streamTraces = stream;
  PipelineOptions opt;
  opt.threads = threads;
  return runPipeline(in, &structure, sink, opt);
}

// Long traces whose records name a few nodes again and again, an unknown node and the idle
// placeholder among them, each profile in its own order (the spill keeps a table of the
// distinct contexts and an index a record): every record gets its node's listed context, the
// same as a profile whose trace names that node once.
TEST(Pipeline, LongTracesNameTheirNodesContexts) {
  FakeStructure structure;
  const std::vector<uint32_t> named = {19, 37, 27, 999, 24, 40, 22, 34};
  for (auto [threads, stream] : {std::pair{1u, false}, {3u, false}, {1u, true}, {3u, true}}) {
    SCOPED_TRACE(stream ? "written a chunk at a time" : "written whole");
    std::vector<std::unique_ptr<ProfileSource>> in;
    // Profile 1: each node once, in `named` order (times 1..8); then five profiles of 4,001
    // records cycling through `named` from a profile's own start, the even ones in runs of
    // three records a node.
    auto nodeOf = [&](uint32_t p, uint32_t k) { return named[((p % 2 ? k : k / 3) + p) % named.size()]; };
    ProfileValues once = smallValues();
    once.trace.clear();
    for (size_t k = 0; k < named.size(); ++k) once.trace.push_back({uint64_t(k + 1), named[k]});
    in.push_back(std::make_unique<FakeProfile>("a0", smallTree(), once));
    for (int p = 1; p <= 5; ++p) {
      ProfileValues v = smallValues();
      v.trace.clear();
      for (uint32_t k = 0; k < 4001; ++k) v.trace.push_back({uint64_t(k + 1), nodeOf(uint32_t(p), k)});
      auto f = std::make_unique<FakeProfile>("a" + std::to_string(p), smallTree(), v);
      f->chunk = p % 2 ? 997 : 0;  // the odd ones read in chunks, the last one short
      f->allNodes = p >= 4;         // the last two converted by all of their tree's nodes
      in.push_back(std::move(f));
    }
    MemorySink sink;
    auto r = runTraced(in, structure, sink, stream, threads);
    ASSERT_TRUE(r.ok()) << r.status().message();
    ASSERT_EQ(sink.traceLines[1].size(), named.size());
    std::map<uint32_t, uint32_t> want;  // node -> its listed context, from profile 1
    for (size_t k = 0; k < named.size(); ++k) want[named[k]] = sink.traceLines[1][k].ctx;
    EXPECT_EQ(want[19], 0u);   // idle
    EXPECT_EQ(want[999], 0u);  // no such node
    EXPECT_NE(want[27], 0u);
    EXPECT_NE(want[37], want[27]);
    for (uint32_t p = 2; p <= 6; ++p) {
      ASSERT_EQ(sink.traceLines[p].size(), 4001u) << p;
      for (uint32_t k = 0; k < 4001; ++k) {
        const TracePoint& t = sink.traceLines[p][k];
        ASSERT_EQ(t.time, k + 1);
        ASSERT_EQ(t.ctx, want[nodeOf(p - 1, k)]) << "profile " << p << " record " << k;
      }
      if (stream) {
        EXPECT_EQ(sink.pieces[p], p % 2 == 0 ? 5u : 1u) << p;  // never held whole
      }
    }
  }
}

// The reference's threads number their nodes from one process-wide counter: a thread's ids
// go far beyond its node count. Such a profile's trace (ids past the first pass's index, and
// past the second's) names the same contexts as the small one's; ids of no node, the largest
// id included, name none.
TEST(Pipeline, TracesOfLargeNodeIdsNameTheirContexts) {
  FakeStructure structure;
  constexpr uint32_t kShift = 3000000;
  ProfileTree shifted = smallTree();
  for (TreeNode& n : shifted.nodes) {
    n.id += kShift;
    if (n.parent) n.parent += kShift;
  }
  ProfileValues far = smallValues();
  for (PointValue& p : far.values) p.node += kShift;
  const std::vector<uint32_t> named = {19, 37, 27, 24, 40, 22, 34};
  far.trace.clear();
  for (uint32_t k = 0; k < 3000; ++k) far.trace.push_back({uint64_t(k + 1), named[k % named.size()] + kShift});
  far.trace.push_back({3001, 70000});          // no node, past the first index
  far.trace.push_back({3002, ~uint32_t(0)});   // no node, the hash set's empty mark
  far.trace.push_back({3003, 37 + kShift});
  for (auto [threads, stream] : {std::pair{1u, false}, {3u, false}, {1u, true}, {3u, true}}) {
    std::vector<std::unique_ptr<ProfileSource>> in;
    ProfileValues once = smallValues();
    once.trace.clear();
    for (size_t k = 0; k < named.size(); ++k) once.trace.push_back({uint64_t(k + 1), named[k]});
    in.push_back(std::make_unique<FakeProfile>("small", smallTree(), once));
    in.push_back(std::make_unique<FakeProfile>("far", shifted, far));
    auto farAll = std::make_unique<FakeProfile>("far, all nodes", shifted, far);
    farAll->allNodes = true;
    in.push_back(std::move(farAll));
    MemorySink sink;
    auto r = runTraced(in, structure, sink, stream, threads);
    ASSERT_TRUE(r.ok()) << r.status().message();
    std::map<uint32_t, uint32_t> want;
    for (size_t k = 0; k < named.size(); ++k) want[named[k]] = sink.traceLines[1][k].ctx;
    EXPECT_NE(want[37], 0u);
    EXPECT_NE(want[37], want[27]);
    ASSERT_EQ(sink.traceLines[2].size(), 3003u);
    for (uint32_t k = 0; k < 3000; ++k) ASSERT_EQ(sink.traceLines[2][k].ctx, want[named[k % named.size()]]) << k;
    EXPECT_EQ(sink.traceLines[2][3000].ctx, 0u);
    EXPECT_EQ(sink.traceLines[2][3001].ctx, 0u);
    EXPECT_EQ(sink.traceLines[2][3002].ctx, want[37]);
    ASSERT_EQ(sink.traceLines[3].size(), 3003u);
    for (uint32_t k = 0; k < 3003; ++k) ASSERT_EQ(sink.traceLines[3][k].ctx, sink.traceLines[2][k].ctx) << k;
  }
}

// The trace is read twice (its nodes, then its records): one gone by the second read leaves
// its profile without a trace, its values and the other profiles' traces intact.
TEST(Pipeline, TraceGoneBeforeTheSecondPassLeavesTheProfileWithoutOne) {
  class GoneTrace final : public ProfileSource {
  public:
    const std::string& path() const override { return path_; }
    Expected<ProfileTree> readTree() override { return smallTree(); }
    Expected<ProfileValues> readValues() override { return smallValues(); }
    Status readTrace(const TraceChunk&) override { return Status::error("gone.hpctrace: no such file"); }

  private:
    std::string path_ = "gone";
  };
  FakeStructure structure;
  for (bool stream : {false, true}) {
    std::vector<std::unique_ptr<ProfileSource>> in;
    in.push_back(std::make_unique<FakeProfile>("a", smallTree(), smallValues()));
    in.push_back(std::make_unique<GoneTrace>());
    MemorySink sink;
    auto r = runTraced(in, structure, sink, stream);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->profiles, 2u);
    EXPECT_EQ(sink.traceLines[1].size(), 3u);
    EXPECT_TRUE(sink.traceLines[2].empty());
    const double total = 0.25 + 0.5 + 0.125 + 0.0625 + 1.0;
    EXPECT_DOUBLE_EQ(sink.value(2, 0, propId(0, kExecution)), total);
  }
}

// A trace written a chunk at a time as it is read: one out of order in a later chunk is read
// again whole and sorted (stable: records of one time keep their order); one that changed
// since pass 1 counted it keeps what it has now, at most that count.
TEST(Pipeline, StreamedTracesSortedAndBoundedByTheirFirstCount) {
  // The first read (pass 1) sees `first`, the later ones (pass 2) `then`.
  class Changing final : public ProfileSource {
  public:
    Changing(std::string path, std::vector<TraceRecord> first, std::vector<TraceRecord> then)
        : path_(std::move(path)), first_(std::move(first)), then_(std::move(then)) {}
    const std::string& path() const override { return path_; }
    Expected<ProfileTree> readTree() override { return smallTree(); }
    Expected<ProfileValues> readValues() override {
      ProfileValues v = smallValues();
      v.trace = reads_++ ? then_ : first_;
      return v;
    }
    Status readTrace(const TraceChunk& each) override {
      for (size_t at = 0; at < then_.size(); at += 100) {
        HPC_ASSIGN_OR_RETURN(bool more, each(std::span(then_).subspan(at, std::min<size_t>(100, then_.size() - at))));
        if (!more) break;
      }
      return Status();
    }

  private:
    std::string path_;
    std::vector<TraceRecord> first_, then_;
    int reads_ = 0;
  };
  // 1000 records naming nodes 24 and 37 by turns, times 10, 20, ...; out of order: record 750
  // (in the eighth chunk) gets time 15, between the first two.
  std::vector<TraceRecord> ordered;
  for (uint32_t k = 0; k < 1000; ++k) ordered.push_back({10 * uint64_t(k + 1), k % 2 ? 37u : 24u});
  std::vector<TraceRecord> disordered = ordered;
  disordered[750].time = 15;
  std::vector<TraceRecord> shorter(ordered.begin(), ordered.begin() + 600);
  std::vector<TraceRecord> longer = ordered;
  longer.push_back({20000, 24});
  FakeStructure structure;
  for (bool stream : {false, true}) {
    SCOPED_TRACE(stream ? "written a chunk at a time" : "written whole");
    std::vector<std::unique_ptr<ProfileSource>> in;
    in.push_back(std::make_unique<Changing>("ordered", ordered, ordered));
    in.push_back(std::make_unique<Changing>("disordered", disordered, disordered));
    in.push_back(std::make_unique<Changing>("shrank", ordered, shorter));
    in.push_back(std::make_unique<Changing>("grew", ordered, longer));
    MemorySink sink;
    auto r = runTraced(in, structure, sink, stream);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const std::vector<TracePoint>& a = sink.traceLines[1];
    ASSERT_EQ(a.size(), 1000u);
    const uint32_t c24 = a[0].ctx, c37 = a[1].ctx;
    EXPECT_NE(c24, 0u);
    EXPECT_NE(c37, 0u);
    EXPECT_NE(c24, c37);
    const std::vector<TracePoint>& d = sink.traceLines[2];
    ASSERT_EQ(d.size(), 1000u);
    EXPECT_EQ(d[0].time, 10u);
    EXPECT_EQ(d[1].time, 15u);  // record 750, which named node 24
    EXPECT_EQ(d[1].ctx, c24);
    EXPECT_EQ(d[2].time, 20u);
    EXPECT_EQ(d[2].ctx, c37);
    for (size_t k = 1; k < d.size(); ++k) ASSERT_LE(d[k - 1].time, d[k].time) << k;
    EXPECT_EQ(sink.traceLines[3].size(), 600u);
    EXPECT_EQ(sink.traceLines[3].back().time, 6000u);
    // Whole, a trace keeps every record it has; in chunks, those pass 1 made room for.
    ASSERT_EQ(sink.traceLines[4].size(), stream ? 1000u : 1001u);
    EXPECT_EQ(sink.traceLines[4][999].ctx, c37);
    if (stream) {
      EXPECT_EQ(sink.pieces[1], 10u);
      EXPECT_EQ(sink.placed[4], 1000u);
    }
  }
}

TEST(Pipeline, NoStructureKeepsInstructions) {
  std::vector<std::unique_ptr<ProfileSource>> in;
  in.push_back(std::make_unique<FakeProfile>("a", smallTree(), smallValues()));
  MemorySink sink;
  auto r = runPipeline(in, nullptr, sink, PipelineOptions());
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_FALSE(sink.meta.cct->root()->children().empty());
  const Context* entry = sink.meta.cct->root()->children()[0];
  ASSERT_EQ(entry->children().size(), 2u);
  for (const Context* c : entry->children()) {
    EXPECT_EQ(c->key().type, LexType::Instruction);
    EXPECT_EQ(c->key().relation, Relation::Call);
    EXPECT_FALSE(c->key().hidden);
    EXPECT_EQ(sink.value(1, c->id(), propId(0, kFunction)), 0);
  }
}

// Function f with loop `outer` (line 1) holding loop `inner` (line 2) holding line 3; the
// tests add to it.
struct LoopNest {
  Cct cct;
  Names names;
  Context *f, *outer, *inner, *l3;
  static ContextKey function(Names& names, const char* name) {
    ContextKey k;
    k.relation = Relation::Call;
    k.function = names.function(name, nullptr, 0, nullptr, 0, 0);
    return k;
  }
  static ContextKey scope(LexType type, uint32_t line) {
    ContextKey k;
    k.type = type;
    k.line = line;
    return k;
  }
  LoopNest() {
    f = cct.root()->child(function(names, "f"));
    outer = f->child(scope(LexType::Loop, 1));
    inner = outer->child(scope(LexType::Loop, 2));
    l3 = inner->child(scope(LexType::Line, 3));
  }
};

TEST(Pipeline, LexAwareSkipsNestedLoops) {
  LoopNest t;
  Cct& cct = t.cct;
  Context *f = t.f, *outer = t.outer, *inner = t.inner, *l3 = t.l3;
  Context* l4 = outer->child(LoopNest::scope(LexType::Line, 3));
  cct.finalize();
  PropagationShape shape(cct);
  Propagator prop(shape, 1);
  std::vector<ContextValue> pts = {{l3->id(), 0, 1.0}, {l4->id(), 0, 2.0}};
  SparseRow row;
  prop.run(pts, row);
  MemorySink sink;
  ASSERT_TRUE(sink.begin(2, cct.size(), false).ok());
  ASSERT_TRUE(sink.writeProfile(1, {}, row).ok());
  // Per profile, lex_aware is function's value.
  EXPECT_EQ(sink.value(1, outer->id(), propId(0, kFunction)), 3.0);
  EXPECT_EQ(sink.value(1, outer->id(), propId(0, kLexAware)), 3.0);
  // In the summary a loop keeps only its own statements.
  MetricTable metrics({"m"}, false);
  TransposeOptions opt;
  opt.shape = &shape;
  ASSERT_TRUE(transpose(sink, metrics, 2, std::vector<uint64_t>(cct.size(), 4), opt).ok());
  EXPECT_EQ(sink.value(0, outer->id(), propId(0, kLexAware)), 2.0);
  EXPECT_EQ(sink.value(0, inner->id(), propId(0, kLexAware)), 1.0);
  EXPECT_EQ(sink.value(0, f->id(), propId(0, kLexAware)), 3.0);
  EXPECT_EQ(sink.value(0, f->id(), propId(0, kExecution)), 3.0);
  EXPECT_EQ(sink.value(0, l4->id(), propId(0, kLexAware)), 2.0);
}

// A loop whose only child is a loop has no statements of its own: its summary lex_aware is
// zero and leaves the row, which is rewritten in place; every other summary value must stay
// as it was (one profile: its own values).
TEST(Pipeline, LexAwareDropsALoopWithoutStatements) {
  LoopNest t;
  Cct& cct = t.cct;
  Context *outer = t.outer, *inner = t.inner, *l3 = t.l3;
  Context* inner2 = outer->child(LoopNest::scope(LexType::Loop, 5));
  Context* l6 = inner2->child(LoopNest::scope(LexType::Line, 6));
  Context* g = cct.root()->child(LoopNest::function(t.names, "g"));
  Context* l7 = g->child(LoopNest::scope(LexType::Line, 7));
  cct.finalize();
  ASSERT_LT(l3->id(), g->id());  // the loops' rows come before g's
  PropagationShape shape(cct);
  Propagator prop(shape, 2);
  std::vector<ContextValue> pts = {{l3->id(), 0, 1.0}, {l3->id(), 1, 4.0}, {l6->id(), 0, 2.0},
                                   {l6->id(), 1, 8.0}, {l7->id(), 0, 5.0}, {l7->id(), 1, 6.0}};
  SparseRow row;
  prop.run(pts, row);
  MemorySink sink;
  ASSERT_TRUE(sink.begin(2, cct.size(), false).ok());
  ASSERT_TRUE(sink.writeProfile(1, {}, row).ok());
  MetricTable metrics({"m", "n"}, false);
  TransposeOptions opt;
  opt.shape = &shape;
  ASSERT_TRUE(transpose(sink, metrics, 2, std::vector<uint64_t>(cct.size(), 8), opt).ok());
  for (uint32_t c = 0; c < cct.size(); ++c)
    for (uint32_t m = 0; m < 2; ++m)
      for (Scope s : {kPoint, kFunction, kLexAware, kExecution}) {
        const bool loopLexAware = s == kLexAware && (c == outer->id() || c == inner->id() || c == inner2->id());
        if (!loopLexAware) {
          EXPECT_EQ(sink.value(0, c, propId(m, s)), sink.value(1, c, propId(m, s))) << c << " " << m << " " << int(s);
        }
      }
  // The summary row stays a row: contexts ascending, metric ids ascending within each.
  const SparseRow& sum = sink.rows.at(0);
  ASSERT_EQ(sum.start.size(), sum.ctx.size() + 1);
  EXPECT_EQ(sum.start.back(), sum.value.size());
  for (size_t j = 0; j < sum.ctx.size(); ++j) {
    if (j > 0) {
      EXPECT_LT(sum.ctx[j - 1], sum.ctx[j]);
    }
    for (uint64_t k = sum.start[j] + 1; k < sum.start[j + 1]; ++k) EXPECT_LT(sum.metric[k - 1], sum.metric[k]) << "row of " << sum.ctx[j];
  }
  EXPECT_EQ(sink.value(0, outer->id(), propId(0, kLexAware)), 0.0);
  EXPECT_EQ(sink.value(0, outer->id(), propId(1, kLexAware)), 0.0);
  EXPECT_EQ(sink.value(0, outer->id(), propId(1, kFunction)), 12.0);
  EXPECT_EQ(sink.value(0, inner2->id(), propId(1, kLexAware)), 8.0);
  EXPECT_EQ(sink.value(0, inner->id(), propId(0, kLexAware)), 1.0);
  EXPECT_EQ(sink.value(0, inner->id(), propId(1, kLexAware)), 4.0);
  EXPECT_EQ(sink.value(0, l7->id(), propId(1, kExecution)), 6.0);
}

// Propagation keeps values by context on trees up to a bound and by slot beyond it: both
// must give, profile after profile on the same scratch, the rows and counts of a plain walk
// up each point's ancestors (execution over every edge, function and lex_aware over lexical
// edges only), for one, two, three and 70 metrics (the widths compiled apart, and the masked
// path with one and two words of metric bits).
TEST(Propagation, ByContextAndBySlotAgreeWithWalkingUp) {
  std::mt19937_64 rng(7);
  Cct cct;
  std::vector<Context*> made = {cct.root()};
  for (uint32_t i = 1; i < 3000; ++i) {
    Context* parent = made[i <= 16 ? rng() % i : i - 1 - rng() % 16];
    ContextKey k;
    k.relation = rng() % 3 ? Relation::Lexical : (rng() % 2 ? Relation::Call : Relation::InlinedCall);
    k.type = k.relation == Relation::Lexical ? (rng() % 4 ? LexType::Line : LexType::Loop) : LexType::Function;
    k.offset = i;
    made.push_back(parent->child(k));
  }
  cct.finalize();
  PropagationShape shape(cct);
  for (uint32_t metrics : {1u, 2u, 3u, 70u}) {
    const uint32_t width = metrics * kNumScopes;
    Propagator byContext(shape, metrics), bySlot(shape, metrics, 0);
    std::vector<double> expect(size_t(cct.size()) * width);
    std::vector<uint32_t> expectCounts(size_t(cct.size()) * width, 0);
    for (int profile = 0; profile < 6; ++profile) {
      std::vector<ContextValue> pts;
      for (int k = 0; k < 200; ++k)  // repeats, a zero and a sum to zero included
        pts.push_back({uint32_t(rng() % cct.size()), uint32_t(rng() % metrics), double(int(rng() % 9) - 2)});
      std::fill(expect.begin(), expect.end(), 0.0);
      for (const ContextValue& p : pts) {
        if (p.value == 0) continue;
        double* v = &expect[size_t(p.ctx) * width + p.metric * kNumScopes];
        v[kPoint] += p.value;
        bool lexical = true;
        for (uint32_t c = p.ctx;; c = shape.parent(c)) {
          v = &expect[size_t(c) * width + p.metric * kNumScopes];
          v[kExecution] += p.value;
          if (lexical) v[kFunction] += p.value, v[kLexAware] += p.value;
          if (shape.parent(c) == c) break;
          lexical = lexical && shape.lexicalEdge(c);
        }
      }
      SparseRow a, b;
      byContext.run(pts, a);
      bySlot.run(pts, b);
      EXPECT_EQ(a.ctx, b.ctx);
      EXPECT_EQ(a.start, b.start);
      EXPECT_EQ(a.metric, b.metric);
      EXPECT_EQ(a.value, b.value);
      size_t seen = 0;
      std::vector<double> gotAll(expect.size(), 0.0);
      for (size_t j = 0; j < a.ctx.size(); ++j)
        for (uint64_t e = a.start[j]; e < a.start[j + 1]; ++e) gotAll[size_t(a.ctx[j]) * width + a.metric[e]] = a.value[e];
      for (uint32_t c = 0; c < cct.size(); ++c)
        for (uint32_t m = 0; m < width; ++m) {
          const double want = expect[size_t(c) * width + m];
          const double got = gotAll[size_t(c) * width + m];
          EXPECT_DOUBLE_EQ(got, want) << "context " << c << " metric " << m;
          seen += want != 0;
          expectCounts[size_t(c) * width + m] += want != 0;
        }
      EXPECT_EQ(seen, a.size());
      EXPECT_GT(seen, 200u);
    }
    // Counts by (context, metric) up to 8 metrics (four scopes each), by context beyond.
    if (width <= Propagator::kMaxCountedMetrics) {
      EXPECT_EQ(byContext.metricCounts(), expectCounts);
      EXPECT_EQ(bySlot.metricCounts(), expectCounts);
    } else {
      EXPECT_TRUE(byContext.metricCounts().empty());
      EXPECT_TRUE(bySlot.metricCounts().empty());
    }
    EXPECT_EQ(metrics <= 3, !byContext.metricCounts().empty());
    for (uint32_t c = 0; c < cct.size(); ++c) {
      uint64_t n = 0;
      for (uint32_t m = 0; m < width; ++m) n += expectCounts[size_t(c) * width + m];
      EXPECT_EQ(byContext.count(c), n) << "context " << c;
      EXPECT_EQ(bySlot.count(c), n) << "context " << c;
    }
  }
}

// Interning from many threads at once: one object per name, whoever asks first; finalize()
// numbers them in content order, whatever order they were asked in.
TEST(Names, OneObjectPerNameFromManyThreadsNumberedInContentOrder) {
  Names names;
  constexpr int kThreads = 4, kNames = 3000;
  std::vector<std::vector<const File*>> files(kThreads);
  std::vector<std::vector<const Function*>> functions(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      std::mt19937 rng{uint32_t(t)};
      std::vector<int> order(kNames);
      for (int i = 0; i < kNames; ++i) order[size_t(i)] = i;
      std::shuffle(order.begin(), order.end(), rng);
      files[size_t(t)].resize(kNames);
      functions[size_t(t)].resize(kNames);
      const Module* m = names.module("/lib/libm" + std::to_string(t % 2) + ".so");
      for (int i : order) {
        const File* f = names.file("/src/file" + std::to_string(i % 500) + ".c");
        files[size_t(t)][size_t(i)] = f;
        // Functions alike but for one field each are distinct.
        functions[size_t(t)][size_t(i)] =
            names.function("fn" + std::to_string(i / 3), t % 2 ? m : nullptr, uint64_t(i % 3), f, uint32_t(i % 7), 0);
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 1; t < kThreads; ++t) EXPECT_EQ(files[size_t(t)], files[0]);
  for (int t = 2; t < kThreads; ++t) EXPECT_EQ(functions[size_t(t)], functions[size_t(t % 2)]);
  EXPECT_NE(functions[0][0], functions[1][0]);  // another module
  EXPECT_EQ(names.file("/src/file7.c"), files[0][7]);
  EXPECT_EQ(files[0][7], files[0][507]);
  EXPECT_EQ(names.function("fn2", nullptr, 0, files[0][6], 6, 0), functions[0][6]);
  EXPECT_NE(names.function("fn2", nullptr, 0, files[0][6], 6, 1), functions[0][6]);  // another site
  names.finalize();
  ASSERT_EQ(names.modules().size(), 2u);
  EXPECT_EQ(names.modules()[0]->path, "/lib/libm0.so");
  ASSERT_EQ(names.files().size(), 500u);
  for (size_t i = 1; i < names.files().size(); ++i) {
    EXPECT_LT(names.files()[i - 1]->path, names.files()[i]->path);
    EXPECT_EQ(names.files()[i]->index, i);
  }
  ASSERT_EQ(names.functions().size(), size_t(2 * kNames + 1));
  for (size_t i = 1; i < names.functions().size(); ++i) {
    EXPECT_LT(compare(names.functions()[i - 1], names.functions()[i]), 0);
    EXPECT_EQ(names.functions()[i]->index, i);
  }
}

TEST(Pipeline, IdTuples) {
  std::vector<std::vector<IdIn>> in = {{{1, 1, 50, 0}, {3, 3, 0, 1}}, {{1, 1, 20, 0}, {3, 0, 9, 4}}};
  auto out = resolveIdTuples(in);
  EXPECT_EQ(out[0][0].logical, 1u);  // 50 ranks after 20
  EXPECT_EQ(out[1][0].logical, 0u);
  EXPECT_EQ(out[0][1].physical, 1u);
  EXPECT_FALSE(out[0][1].isPhysical);
  EXPECT_EQ(out[1][1].logical, 4u);
  EXPECT_EQ(out[1][1].physical, 9u);
}
}  // namespace
}  // namespace hpc::analysis

namespace hpc::analysis {
namespace {

TEST(Inputs, ConformanceDirectory) {
  std::filesystem::path m = std::filesystem::path(HPC_SHARED_DIR) / "conformance/meas/loops-cputime-t.m";
  if (!std::filesystem::exists(m)) GTEST_SKIP() << "no conformance kit";
  auto in = discoverInputs({m}, false);
  ASSERT_TRUE(in.ok()) << in.status().message();
  EXPECT_EQ(in->profiles.size(), 4u);
  EXPECT_TRUE(std::is_sorted(in->profiles.begin(), in->profiles.end()));
  EXPECT_FALSE(in->traces[0].empty());
  EXPECT_EQ(in->structs.size(), 4u);
  auto none = discoverInputs({m}, true);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->structs.empty());
  EXPECT_FALSE(discoverInputs({m / "nonexistent"}, false).ok());
}

// Profiles in name order (of the whole name: "a-b.hpcrun" before "a.hpcrun"), each with the
// trace of its stem where there is one; links followed, a dangling link, a directory named
// like a profile and other files skipped.
TEST(Inputs, PairsTracesAndSkipsWhatIsNotAProfile) {
  namespace fs = std::filesystem;
  const fs::path m = fs::path(::testing::TempDir()) / "inputs-pairs.m";
  fs::remove_all(m);
  fs::create_directories(m / "dir.hpcrun");
  for (const char* f : {"a.hpcrun", "a.hpctrace", "a-b.hpcrun", "c.hpcrun", "c.hpctrace.old", "b.hpctrace", "notes.txt"})
    std::ofstream(m / f) << "x";
  fs::create_symlink(m / "c.hpcrun", m / "d.hpcrun");
  fs::create_symlink(m / "missing.hpcrun", m / "e.hpcrun");
  auto in = discoverInputs({m}, false);
  ASSERT_TRUE(in.ok()) << in.status().message();
  ASSERT_EQ(in->profiles.size(), 4u);
  EXPECT_EQ(in->profiles[0], m / "a-b.hpcrun");
  EXPECT_EQ(in->profiles[1], m / "a.hpcrun");
  EXPECT_EQ(in->profiles[2], m / "c.hpcrun");
  EXPECT_EQ(in->profiles[3], m / "d.hpcrun");
  EXPECT_EQ(in->traces[0], fs::path());
  EXPECT_EQ(in->traces[1], m / "a.hpctrace");
  EXPECT_EQ(in->traces[2], fs::path());
  EXPECT_EQ(in->traces[3], fs::path());
  fs::remove_all(m);
}

// A profile named twice (itself again, by another spelling, or with its directory, before or
// after it) and a directory named twice are taken once: each would count twice in every sum.
TEST(Inputs, EachProfileOnceHoweverOftenNamed) {
  namespace fs = std::filesystem;
  const fs::path base = fs::path(::testing::TempDir()) / "inputs-once";
  fs::remove_all(base);
  const fs::path m = base / "m", other = base / "other";
  fs::create_directories(m);
  fs::create_directories(other);
  for (const char* f : {"a.hpcrun", "b.hpcrun"}) std::ofstream(m / f) << "x";
  std::ofstream(other / "c.hpcrun") << "x";
  fs::create_directory_symlink(m, base / "link");
  struct Case {
    std::vector<fs::path> named;
    std::vector<fs::path> profiles;
    size_t repeated;
  };
  const Case cases[] = {
      {{m, m}, {m / "a.hpcrun", m / "b.hpcrun"}, 1},
      {{m, base / "link", m / "." / ""}, {m / "a.hpcrun", m / "b.hpcrun"}, 2},
      {{m / "a.hpcrun", m}, {m / "a.hpcrun", m / "b.hpcrun"}, 1},
      {{m, base / "link" / "b.hpcrun"}, {m / "a.hpcrun", m / "b.hpcrun"}, 1},
      {{m / "a.hpcrun", base / "m" / ".." / "m" / "a.hpcrun", other / "c.hpcrun"}, {m / "a.hpcrun", other / "c.hpcrun"}, 1},
      {{other, m / "b.hpcrun"}, {other / "c.hpcrun", m / "b.hpcrun"}, 0},
  };
  for (const Case& c : cases) {
    auto in = discoverInputs(c.named, false);
    ASSERT_TRUE(in.ok()) << in.status().message();
    std::vector<fs::path> got = in->profiles;
    std::vector<fs::path> want = c.profiles;
    // The directory's profiles as the directory lists them, a lone profile as named.
    EXPECT_EQ(got.size(), want.size()) << c.named[0] << " ... (" << c.named.size() << " named)";
    for (size_t k = 0; k < std::min(got.size(), want.size()); ++k)
      EXPECT_EQ(fs::weakly_canonical(got[k]), fs::weakly_canonical(want[k]));
    EXPECT_EQ(in->repeated.size(), c.repeated) << c.named[0];
  }
  fs::remove_all(base);
}

TEST(Transpose, StatsInProfileOrder) {
  MemorySink sink;
  ASSERT_TRUE(sink.begin(4, 3, false).ok());
  auto row = [](std::vector<std::pair<uint32_t, double>> cv) {
    SparseRow r;
    for (auto [c, v] : cv) {
      r.ctx.push_back(c);
      r.metric.push_back(propId(0, kExecution));
      r.value.push_back(v);
      r.start.push_back(r.value.size());
    }
    return r;
  };
  ASSERT_TRUE(sink.writeProfile(1, {}, row({{0, 1.0}, {2, 4.0}})).ok());
  ASSERT_TRUE(sink.writeProfile(2, {}, row({{0, 3.0}})).ok());
  ASSERT_TRUE(sink.writeProfile(3, {}, row({{0, 2.0}, {2, 1.0}})).ok());
  MetricTable metrics({"m"}, true);
  TransposeOptions opt;
  opt.budgetBytes = 1;  // one context per round
  ASSERT_TRUE(transpose(sink, metrics, 4, {3, 0, 2}, opt).ok());
  uint16_t p = propId(0, kExecution);
  EXPECT_EQ(sink.value(0, 0, metrics.statId(p, 0)), 6.0);   // sum
  EXPECT_EQ(sink.value(0, 0, metrics.statId(p, 1)), 3.0);   // count
  EXPECT_EQ(sink.value(0, 0, metrics.statId(p, 2)), 14.0);  // sum of squares
  EXPECT_EQ(sink.value(0, 0, metrics.statId(p, 3)), 1.0);   // min
  EXPECT_EQ(sink.value(0, 2, metrics.statId(p, 4)), 4.0);   // max
  EXPECT_EQ(sink.contextValue(2, p, 3), 1.0);
  ASSERT_EQ(sink.columns.size(), 2u);
  EXPECT_EQ(sink.columns[0].profile, (std::vector<uint32_t>{1, 2, 3}));
}

// The transpose from RowBuckets (hpcprof) and from rows read back from the sink
// (hpcprof-mpi) gives the same columns and summary: random rows with three metrics, bucket
// buffers small enough that chunks are written out and that some pieces are larger than a
// buffer, rounds of several buckets, of one bucket and of part of one, at 1 and 2 threads
// (at 2, two lanes of buckets, one with two runs, and rounds filled side by side and
// written in order), with values sorted by metric in each column and placed by counts.
TEST(Transpose, BucketsGiveTheSameColumns) {
  const uint32_t contexts = 20000, profiles = 40;
  MetricTable metrics({"a", "b", "c"}, true);
  std::mt19937 rng(5);
  std::vector<SparseRow> rows(profiles + 1);
  std::vector<uint64_t> counts(contexts, 0);
  for (uint32_t p = 1; p <= profiles; ++p) {
    SparseRow& r = rows[p];
    const bool dense = p % 8 == 0;  // every context, every metric: pieces larger than a buffer
    for (uint32_t c = 0; c < contexts; ++c) {
      if (!dense && rng() % 9) continue;
      for (uint16_t m = 0; m < metrics.numProp(); ++m)
        if (dense || rng() % 3 == 0) r.metric.push_back(m), r.value.push_back(double(1 + rng() % 100));
      if (r.value.size() == r.start.back()) continue;
      r.ctx.push_back(c);
      r.start.push_back(r.value.size());
      counts[c] += r.start.back() - r.start[r.start.size() - 2];
    }
  }
  // By (context, metric) too, as the propagators count them: the transpose then puts each
  // value straight at its place, with no sort by metric.
  std::vector<uint32_t> byMetric(size_t(contexts) * metrics.numProp(), 0);
  for (uint32_t p = 1; p <= profiles; ++p)
    for (size_t j = 0; j < rows[p].ctx.size(); ++j)
      for (uint64_t k = rows[p].start[j]; k < rows[p].start[j + 1]; ++k)
        ++byMetric[size_t(rows[p].ctx[j]) * metrics.numProp() + rows[p].metric[k]];
  // 64 buckets of 313 contexts, about 0.65 MB of a round each: rounds of 4 MiB (the most
  // there are) take six buckets, of 2 MiB three, of 1 MiB one, of 512 KiB part of one; at 2
  // threads (two lanes of 64 buckets; rounds filled side by side, each in half the budget)
  // the budgets of 2 MiB and less give rounds half as large.
  for (uint64_t budget : {uint64_t(8) << 20, uint64_t(2) << 20, uint64_t(1) << 20, uint64_t(512) << 10}) {
    for (unsigned threads : {1u, 2u}) {
      MemorySink plain, bucketed, direct;
      ASSERT_TRUE(plain.begin(profiles + 1, contexts, false).ok());
      ASSERT_TRUE(bucketed.begin(profiles + 1, contexts, false).ok());
      ASSERT_TRUE(direct.begin(profiles + 1, contexts, false).ok());
      // A lane per thread, as hpcprof keeps them: at 2, odd and even profiles apart, and
      // lane 1 given profile 23 before 21 (a second run, merged like a lane of its own).
      auto buckets = RowBuckets::create(contexts, uint64_t(threads) << 21, "", threads);
      ASSERT_TRUE(buckets.ok()) << buckets.status().message();
      for (uint32_t q = 1; q <= profiles; ++q) {
        const uint32_t p = threads == 2 && (q == 21 || q == 23) ? 44 - q : q;
        ASSERT_TRUE(plain.writeProfile(p, {}, rows[p]).ok());
        ASSERT_TRUE(bucketed.writeProfile(p, {}, rows[p]).ok());
        ASSERT_TRUE(direct.writeProfile(p, {}, rows[p]).ok());
        ASSERT_TRUE((*buckets)->add(threads == 2 ? p % 2 : 0, p, rows[p]).ok());
      }
      ASSERT_TRUE((*buckets)->finish().ok());
      TransposeOptions opt;
      opt.budgetBytes = budget;
      opt.threads = threads;
      ASSERT_TRUE(transpose(plain, metrics, profiles + 1, counts, opt).ok());
      opt.buckets = buckets->get();
      std::unique_ptr<uint8_t[]> workspace = (*buckets)->releaseMemory(opt.workspaceBytes);
      opt.workspace = workspace.get();
      ASSERT_TRUE(transpose(bucketed, metrics, profiles + 1, counts, opt).ok());
      opt.metricCounts = &byMetric;
      ASSERT_TRUE(transpose(direct, metrics, profiles + 1, counts, opt).ok());
      ASSERT_GT(plain.columns.size(), 2000u);
      for (const MemorySink* other : {&bucketed, &direct}) {
        const bool placed = other == &direct;
        ASSERT_EQ(plain.columns.size(), other->columns.size()) << budget << " " << placed;
        for (size_t i = 0; i < plain.columns.size(); ++i) {
          EXPECT_EQ(plain.columns[i].ctx, other->columns[i].ctx) << budget << " " << placed << " " << i;
          EXPECT_EQ(plain.columns[i].metric, other->columns[i].metric) << budget << " " << placed << " " << i;
          EXPECT_EQ(plain.columns[i].start, other->columns[i].start) << budget << " " << placed << " " << i;
          EXPECT_EQ(plain.columns[i].profile, other->columns[i].profile) << budget << " " << placed << " " << i;
          EXPECT_EQ(plain.columns[i].value, other->columns[i].value) << budget << " " << placed << " " << i;
        }
        EXPECT_EQ(plain.rows[0].ctx, other->rows[0].ctx);
        EXPECT_EQ(plain.rows[0].value, other->rows[0].value);
      }
    }
  }
}

// A piece gives its contexts as 16-bit offsets from its bucket's first context: a tree of
// 20M contexts gets buckets of at most 65,536 (more of them, with smaller buffers, than the
// memory alone would make), and every value comes back with its profile, context and metric.
TEST(Transpose, BucketsOfAHugeTreeKeepTheirContexts) {
  const uint32_t contexts = 20000000;
  auto buckets = RowBuckets::create(contexts, uint64_t(4) << 20, "", 1);
  ASSERT_TRUE(buckets.ok()) << buckets.status().message();
  RowBuckets& bk = **buckets;
  ASSERT_GE(bk.buckets(), (contexts + 65535) / 65536);
  for (uint32_t b = 0; b + 1 < bk.buckets(); ++b) ASSERT_LE(bk.firstContext(b + 1) - bk.firstContext(b), 65536u);
  using Value = std::tuple<uint32_t, uint32_t, uint16_t, double>;  // profile, context, metric, value
  std::vector<Value> in;
  for (uint32_t p = 1; p <= 3; ++p) {
    SparseRow r;
    for (uint32_t c : {0u, 1u, 65535u, 65536u, 65537u, 12345678u, contexts - 2, contexts - 1}) {
      if ((c + p) % 3 == 0) continue;
      for (uint16_t m = 0; m < 1 + (c + p) % 4; ++m) {
        r.metric.push_back(uint16_t(m * 3));
        r.value.push_back(double(p) * 1000 + m + c % 97);
        in.emplace_back(p, c, r.metric.back(), r.value.back());
      }
      r.ctx.push_back(c);
      r.start.push_back(r.value.size());
    }
    ASSERT_TRUE(bk.add(0, p, r).ok());
  }
  ASSERT_TRUE(bk.finish().ok());
  std::vector<Value> out;
  for (uint32_t b = 0; b < bk.buckets(); ++b)
    for (const RowBuckets::Chunk& chunk : bk.chunks(0, b)) {
      std::vector<uint8_t> bytes(chunk.bytes);
      ASSERT_TRUE(bk.readChunk(chunk, bytes.data()).ok());
      for (size_t at = 0; at < bytes.size();) {
        auto piece = RowBuckets::pieceAt({bytes.data() + at, bytes.size() - at});
        ASSERT_TRUE(piece.ok()) << piece.status().message();
        const RowBuckets::Piece& pc = piece->first;
        EXPECT_EQ(pc.base, bk.firstContext(b));
        for (uint32_t e = 0, v = 0; e < pc.entries; ++e)
          for (uint32_t k = 0; k < pc.count[e]; ++k, ++v) {
            ASSERT_LT(v, pc.values);
            out.emplace_back(pc.profile, pc.base + pc.offset[e], pc.metric[v], pc.value[v]);
          }
        at += piece->second;
      }
    }
  std::sort(in.begin(), in.end());
  std::sort(out.begin(), out.end());
  EXPECT_EQ(in, out);
  EXPECT_GT(in.size(), 20u);
}

// hpcprof-mpi: a rank's context range [lo, hi), its part of every row kept in buckets of that
// range only, gives the columns and summary part the rows give.
TEST(Transpose, RangeBucketsGiveTheSameColumns) {
  const uint32_t contexts = 12000, profiles = 30, lo = 4001, hi = 9500;
  MetricTable metrics({"a", "b"}, true);
  std::mt19937 rng(11);
  std::vector<SparseRow> rows(profiles + 1), parts(profiles + 1);
  std::vector<uint64_t> counts(contexts, 0);
  for (uint32_t p = 1; p <= profiles; ++p) {
    for (uint32_t c = 0; c < contexts; ++c) {
      if (rng() % 5) continue;
      for (SparseRow* r : {&rows[p], &parts[p]}) {
        if (r == &parts[p] && (c < lo || c >= hi)) continue;
        for (uint16_t m = 0; m < metrics.numProp(); ++m)
          if ((c + m + p) % 3 == 0) r->metric.push_back(m), r->value.push_back(double(c % 97 + p));
        if (r->value.size() == r->start.back()) continue;
        r->ctx.push_back(c);
        r->start.push_back(r->value.size());
        if (r == &rows[p]) counts[c] += r->start.back() - r->start[r->start.size() - 2];
      }
    }
  }
  for (unsigned threads : {1u, 2u}) {
    MemorySink fromRows, fromBuckets;
    ASSERT_TRUE(fromRows.begin(profiles + 1, contexts, false).ok());
    ASSERT_TRUE(fromBuckets.begin(profiles + 1, contexts, false).ok());
    auto buckets = RowBuckets::create(hi, uint64_t(threads) << 20, "", threads, lo);
    ASSERT_TRUE(buckets.ok()) << buckets.status().message();
    EXPECT_EQ((*buckets)->bucketOf(lo), 0u);
    EXPECT_EQ((*buckets)->firstContext(0), lo);
    // A context below the range is refused, not filed in a wrong bucket.
    SparseRow below;
    below.ctx = {lo - 1};
    below.start = {0, 1};
    below.metric = {0};
    below.value = {1.0};
    EXPECT_FALSE((*buckets)->add(0, 1, below).ok());
    for (uint32_t p = 1; p <= profiles; ++p) {
      ASSERT_TRUE(fromRows.writeProfile(p, {}, rows[p]).ok());
      ASSERT_TRUE((*buckets)->add(p * threads / (profiles + 1), p, parts[p]).ok());
    }
    ASSERT_TRUE((*buckets)->finish().ok());
    TransposeOptions opt;
    opt.budgetBytes = uint64_t(256) << 10;  // several rounds
    opt.threads = threads;
    SparseRow summaryRows, summaryBuckets;
    ASSERT_TRUE(transposeRange(fromRows, metrics, profiles + 1, counts, lo, hi, opt, summaryRows).ok());
    opt.buckets = buckets->get();
    std::unique_ptr<uint8_t[]> workspace = (*buckets)->releaseMemory(opt.workspaceBytes);
    opt.workspace = workspace.get();
    ASSERT_TRUE(transposeRange(fromBuckets, metrics, profiles + 1, counts, lo, hi, opt, summaryBuckets).ok());
    ASSERT_GT(fromRows.columns.size(), 1000u);
    ASSERT_EQ(fromRows.columns.size(), fromBuckets.columns.size()) << threads;
    EXPECT_EQ(fromRows.columns.front().ctx, lo);
    for (size_t i = 0; i < fromRows.columns.size(); ++i) {
      EXPECT_EQ(fromRows.columns[i].ctx, fromBuckets.columns[i].ctx) << threads << " " << i;
      EXPECT_EQ(fromRows.columns[i].metric, fromBuckets.columns[i].metric) << threads << " " << i;
      EXPECT_EQ(fromRows.columns[i].profile, fromBuckets.columns[i].profile) << threads << " " << i;
      EXPECT_EQ(fromRows.columns[i].value, fromBuckets.columns[i].value) << threads << " " << i;
    }
    EXPECT_EQ(summaryRows.ctx, summaryBuckets.ctx);
    EXPECT_EQ(summaryRows.value, summaryBuckets.value);
  }
}

// A sink that fails the n-th write of columns or the reads of one profile's row from a given
// context on; everything else goes to a MemorySink.
class FailingSink final : public DatabaseSink {
public:
  MemorySink inner;
  int failWriteAt = -1;  // the failing writeContexts call (0-based), or never
  uint32_t failProfile = 0, failFrom = UINT32_MAX;  // readProfile(failProfile, lo >= failFrom) fails
  std::atomic<int> writes{0};
  Status begin(uint32_t numProfiles, uint32_t numContexts, bool traces) override {
    return inner.begin(numProfiles, numContexts, traces);
  }
  Status writeProfile(uint32_t index, const std::vector<IdOut>& idTuple, const SparseRow& row) override {
    return inner.writeProfile(index, idTuple, row);
  }
  Status writeTrace(uint32_t index, std::span<const TracePoint> trace) override { return inner.writeTrace(index, trace); }
  Status readProfile(uint32_t index, uint32_t lo, uint32_t hi, SparseRow& out) override {
    if (index == failProfile && lo >= failFrom) return Status::error("profile.db unreadable at profile " + std::to_string(index));
    return inner.readProfile(index, lo, hi, out);
  }
  Status writeContexts(const ColumnBatch& columns) override {
    if (writes++ == failWriteAt) return Status::error("cct.db write failed");
    return inner.writeContexts(columns);
  }
  Status writeSummary(const SparseRow& row) override { return inner.writeSummary(row); }
  Status finish(const MetaInput& meta) override { return inner.finish(meta); }
};

// Rounds read back from rows, at any thread count (with threads a round's columns are written
// while the next round is read): a failed write or read stops the transpose with that error,
// the columns before it written in order, and nothing after the failed write.
TEST(Transpose, RowRoundsStopAtTheFirstFailureAtAnyThreadCount) {
  const uint32_t contexts = 6000, profiles = 12;
  MetricTable metrics({"a"}, true);
  std::vector<SparseRow> rows(profiles + 1);
  std::vector<uint64_t> counts(contexts, 0);
  for (uint32_t p = 1; p <= profiles; ++p)
    for (uint32_t c = 0; c < contexts; ++c) {
      if ((c + p) % 3) continue;
      rows[p].ctx.push_back(c);
      rows[p].metric.push_back(uint16_t(c % metrics.numProp()));
      rows[p].value.push_back(double(c + p));
      rows[p].start.push_back(rows[p].value.size());
      ++counts[c];
    }
  for (unsigned threads : {1u, 2u, 3u}) {
    for (int failing : {0, 1}) {
      FailingSink sink;
      ASSERT_TRUE(sink.begin(profiles + 1, contexts, false).ok());
      for (uint32_t p = 1; p <= profiles; ++p) ASSERT_TRUE(sink.writeProfile(p, {}, rows[p]).ok());
      if (failing == 0) sink.failWriteAt = 3;
      else sink.failProfile = 7, sink.failFrom = contexts / 2;
      TransposeOptions opt;
      opt.budgetBytes = uint64_t(32) << 10;  // many rounds
      opt.threads = threads;
      SparseRow summary;
      const Status st = transposeRange(sink, metrics, profiles + 1, counts, 0, contexts, opt, summary);
      ASSERT_FALSE(st.ok()) << threads << " " << failing;
      EXPECT_NE(st.message().find(failing == 0 ? "cct.db write failed" : "profile.db unreadable at profile 7"),
                std::string::npos)
          << st.message();
      const auto& cols = sink.inner.columns;
      ASSERT_FALSE(cols.empty()) << threads << " " << failing;
      for (size_t i = 1; i < cols.size(); ++i) ASSERT_LT(cols[i - 1].ctx, cols[i].ctx);
      if (failing == 0) {
        EXPECT_EQ(sink.writes.load(), 4) << threads;  // no write after the failed one
      } else {
        EXPECT_LT(cols.back().ctx, contexts / 2 + contexts / 8) << threads;
      }
      for (const ContextColumn& col : cols)
        for (size_t k = 0; k < col.profile.size(); ++k)
          ASSERT_EQ(col.value[k], double(col.ctx + col.profile[k]));
    }
  }
}
}  // namespace
}  // namespace hpc::analysis

namespace hpc::analysis {
namespace {

// Many profiles whose trees overlap partially: the database must be bit-identical
// whatever the thread count.
// The same database at any thread count, with the transpose's values kept in row buckets
// or read back from the profiles' rows (few profiles).
TEST(Pipeline, IdenticalAtAnyThreadCount) {
  FakeStructure structure;
  auto run = [&](unsigned threads, MemorySink& sink, uint32_t rowBucketsAbove, uint64_t scratchBudget = 1 << 30) {
    std::vector<std::unique_ptr<ProfileSource>> in;
    for (uint32_t p = 0; p < 24; ++p) {
      ProfileTree t = smallTree();
      t.idTuple = {{1, 1, 7, 0}, {3, 3, 0, p}};
      ProfileValues v = smallValues();
      // Extra leaves that only some profiles have, with values that round differently.
      t.nodes.push_back({100 + p, 22, 1, Placeholder::None, true, 0x1140 + (p % 7) * 4});
      v.values.push_back({100 + p, 0, 0.1 * (p + 1) / 3.0});
      for (auto& x : v.values) x.value *= 1.0 + p / 7.0;
      in.push_back(std::make_unique<FakeProfile>("p" + std::to_string(100 + p), t, v));
    }
    PipelineOptions opt;
    opt.threads = threads;
    opt.transposeBudget = 200;
    opt.rowBucketsAbove = rowBucketsAbove;
    opt.scratchBudget = scratchBudget;
    auto r = runPipeline(in, &structure, sink, opt);
    EXPECT_TRUE(r.ok());
    return r;
  };
  MemorySink a;
  auto ra = run(1, a, 0);
  ASSERT_FALSE(a.columns.empty());
  EXPECT_EQ(ra->propagateThreads, 1u);
  EXPECT_EQ(ra->unifyThreads, 1u);
  // The last: 4 threads, passes 1 (after the first profile) and 2 on 2 of them (the scratch
  // bound allows none; 2 at least).
  struct Case {
    unsigned threads;
    uint32_t above;
    uint64_t budget;
    uint32_t passTwo;
  };
  for (const Case& c : {Case{3, 0, 1 << 30, 3}, Case{1, 24, 1 << 30, 1}, Case{3, 24, 1 << 30, 3}, Case{4, 0, 1, 2}}) {
    const unsigned threads = c.threads;
    const uint32_t above = c.above;
    MemorySink b;
    auto rb = run(threads, b, above, c.budget);
    ASSERT_TRUE(rb.ok());
    EXPECT_EQ(rb->propagateThreads, c.passTwo) << threads << " threads, budget " << c.budget;
    EXPECT_EQ(rb->unifyThreads, c.passTwo) << threads << " threads, budget " << c.budget;
    ASSERT_EQ(a.rows.size(), b.rows.size());
    for (size_t p = 0; p < a.rows.size(); ++p) {
      EXPECT_EQ(a.rows[p].ctx, b.rows[p].ctx) << p;
      EXPECT_EQ(a.rows[p].metric, b.rows[p].metric) << p;
      EXPECT_EQ(a.rows[p].value, b.rows[p].value) << p;  // bitwise
      EXPECT_EQ(a.ids[p], b.ids[p]);
    }
    ASSERT_EQ(a.columns.size(), b.columns.size()) << threads << " threads, buckets above " << above;
    for (size_t i = 0; i < a.columns.size(); ++i) {
      EXPECT_EQ(a.columns[i].ctx, b.columns[i].ctx);
      EXPECT_EQ(a.columns[i].metric, b.columns[i].metric);
      EXPECT_EQ(a.columns[i].start, b.columns[i].start);
      EXPECT_EQ(a.columns[i].profile, b.columns[i].profile);
      EXPECT_EQ(a.columns[i].value, b.columns[i].value);
    }
  }
  EXPECT_EQ(a.ids[3][1].logical, 2u);
}

// Profiles whose metric tables (and program) are equal share one HeaderShared where a
// thread meets them in a row, and the plan maps each table's local metric ids once; a table
// of its own (another order, one more metric) gets its own map, and its values their metrics.
TEST(Pipeline, ProfilesShareEqualMetricTables) {
  auto profile = [](std::string name, std::vector<std::string> metrics, double value) {
    ProfileTree t = smallTree();
    t.programName = "small";
    t.metrics = metrics;
    for (const std::string& m : metrics) t.descs.push_back({m, m + " described", "", "", 1, 1});
    ProfileValues v = smallValues();
    for (PointValue& x : v.values) x.value = value;  // on local metric 0
    return std::make_unique<FakeProfile>(name, t, v);
  };
  std::vector<std::unique_ptr<ProfileSource>> in;
  in.push_back(profile("a", {"CPUTIME (sec)"}, 1));
  in.push_back(profile("b", {"CPUTIME (sec)"}, 2));
  in.push_back(profile("c", {"REALTIME (sec)", "CPUTIME (sec)"}, 4));
  in.push_back(profile("d", {"CPUTIME (sec)"}, 8));

  Cct cct;
  Names names;
  Expander expander(cct, names, nullptr);
  PipelineOptions opt;
  auto spill = Spill::create(std::filesystem::temp_directory_path());
  ASSERT_TRUE(spill.ok()) << spill.status().message();
  tbb::task_arena arena(1);
  std::vector<Unified> unified;
  ASSERT_TRUE(unifyProfiles(in, expander, **spill, opt, arena, unified).ok());
  ASSERT_EQ(unified.size(), 4u);
  for (const Unified& u : unified) ASSERT_TRUE(u.header.shared);
  EXPECT_EQ(unified[0].header.shared, unified[1].header.shared);  // one table, not two
  EXPECT_NE(unified[1].header.shared, unified[2].header.shared);
  EXPECT_EQ(unified[2].header.shared->metrics, (std::vector<std::string>{"REALTIME (sec)", "CPUTIME (sec)"}));
  EXPECT_EQ(unified[3].header.shared->program, "small");
  EXPECT_EQ(*unified[3].header.shared, *unified[0].header.shared);

  std::vector<const ProfileHeader*> headers;
  for (const Unified& u : unified) headers.push_back(&u.header);
  auto plan = makePlan(headers, opt);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->metricNames, (std::vector<std::string>{"CPUTIME (sec)", "REALTIME (sec)"}));
  EXPECT_EQ(plan->localToGlobal(0), std::vector<uint32_t>{0});
  EXPECT_EQ(plan->mapOf[0], plan->mapOf[1]);
  EXPECT_EQ(plan->localToGlobal(2), (std::vector<uint32_t>{1, 0}));
  EXPECT_EQ(plan->localToGlobal(3), std::vector<uint32_t>{0});
  ASSERT_EQ(plan->metricDescs.size(), 2u);
  EXPECT_EQ(plan->metricDescs[1].description, "REALTIME (sec) described");
  EXPECT_EQ(plan->title, "small");

  // Through the whole pipeline: c's values are REALTIME's, the others' CPUTIME's.
  MemorySink sink;
  auto r = runPipeline(in, nullptr, sink, opt);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const double points = double(smallValues().values.size());
  EXPECT_DOUBLE_EQ(sink.value(0, 0, propId(0, kExecution)), (1 + 2 + 8) * points);  // summary
  EXPECT_DOUBLE_EQ(sink.value(3, 0, propId(1, kExecution)), 4 * points);
  EXPECT_DOUBLE_EQ(sink.value(3, 0, propId(0, kExecution)), 0);

  // Tables the reader named (metricsGen, as hpcrun_source names a table it met before): one
  // met again right after is the last header, uncompared, but only for the same program; one
  // met again after another is interned as before.
  auto named = [&](std::string name, std::string program, std::vector<std::string> metrics, uint64_t gen) {
    auto f = profile(std::move(name), std::move(metrics), 1);
    ProfileTree t = *f->readTree();
    t.programName = std::move(program);
    t.metricsGen = gen;
    return std::make_unique<FakeProfile>(f->path(), t, smallValues());
  };
  in.clear();
  in.push_back(named("a", "small", {"CPUTIME (sec)"}, 7));
  in.push_back(named("b", "small", {"CPUTIME (sec)"}, 7));
  in.push_back(named("c", "small", {"REALTIME (sec)", "CPUTIME (sec)"}, 9));
  in.push_back(named("d", "small", {"CPUTIME (sec)"}, 7));
  in.push_back(named("e", "other", {"CPUTIME (sec)"}, 7));
  ASSERT_TRUE(unifyProfiles(in, expander, **spill, opt, arena, unified).ok());
  ASSERT_EQ(unified.size(), 5u);
  for (const Unified& u : unified) ASSERT_TRUE(u.header.shared);
  EXPECT_EQ(unified[0].header.shared, unified[1].header.shared);
  EXPECT_EQ(unified[2].header.shared->metrics, (std::vector<std::string>{"REALTIME (sec)", "CPUTIME (sec)"}));
  EXPECT_EQ(unified[3].header.shared->metrics, std::vector<std::string>{"CPUTIME (sec)"});
  EXPECT_EQ(unified[3].header.shared->program, "small");
  EXPECT_NE(unified[4].header.shared, unified[3].header.shared);
  EXPECT_EQ(unified[4].header.shared->program, "other");
  EXPECT_EQ(unified[4].header.shared->metrics, std::vector<std::string>{"CPUTIME (sec)"});
}

// Profiles describing 40 metrics (two programs' tables, in different orders) with values on
// a few: pass 2 propagates only those, and every row and column comes out as where all 40
// are propagated (a last profile with a value on each makes every metric measured there; rows
// and columns are compared without it). Also at 3 threads, and with stats.
TEST(Pipeline, PropagatesOnlyMeasuredMetricsAsIfAll) {
  std::vector<std::string> table;
  for (int m = 0; m < 40; ++m) table.push_back("M" + std::to_string(m));
  std::vector<std::string> reversed(table.rbegin(), table.rend());
  // name, table, (local metric, value) put on each of smallValues' points in turn
  auto profile = [](std::string name, const std::vector<std::string>& metrics,
                    std::vector<std::pair<uint16_t, double>> on) {
    ProfileTree t = smallTree();
    t.programName = name.substr(0, 1) == "b" ? "other" : "small";
    t.metrics = metrics;
    ProfileValues v = smallValues();
    std::vector<PointValue> values;
    for (size_t k = 0; k < v.values.size(); ++k)
      for (auto [m, x] : on) values.push_back({v.values[k].node, m, x * double(k + 1)});
    v.values = values;
    return std::make_unique<FakeProfile>(name, t, v);
  };
  auto inputs = [&](bool everyMetric) {
    std::vector<std::unique_ptr<ProfileSource>> in;
    in.push_back(profile("a1", table, {{5, 1}, {17, 0.5}}));
    in.push_back(profile("a2", table, {{17, 2}}));
    in.push_back(profile("b1", reversed, {{39 - 5, 4}, {39 - 30, 3}}));  // M5 and M30
    in.push_back(profile("b2", reversed, {}));
    if (everyMetric) {
      std::vector<std::pair<uint16_t, double>> all;
      for (uint16_t m = 0; m < 40; ++m) all.push_back({m, 0.25});
      in.push_back(profile("z", table, all));
    }
    return in;
  };
  {
    // The plan propagates M5, M17 and M30 alone, as the database's ids 5 x 4 + s, ...
    auto in = inputs(false);
    Cct cct;
    Names names;
    Expander expander(cct, names, nullptr);
    PipelineOptions opt;
    auto spill = Spill::create(std::filesystem::temp_directory_path());
    ASSERT_TRUE(spill.ok());
    tbb::task_arena arena(1);
    std::vector<Unified> unified;
    ASSERT_TRUE(unifyProfiles(in, expander, **spill, opt, arena, unified).ok());
    std::vector<const ProfileHeader*> headers;
    for (const Unified& u : unified) headers.push_back(&u.header);
    auto plan = makePlan(headers, opt);
    ASSERT_TRUE(plan.ok());
    EXPECT_EQ(plan->metricNames.size(), 40u);
    EXPECT_EQ(plan->propagated, 3u);
    ASSERT_EQ(plan->propIds.size(), 12u);
    EXPECT_EQ(plan->propIds[0], propId(5, kPoint));
    EXPECT_EQ(plan->propIds[4 + kExecution], propId(17, kExecution));
    EXPECT_EQ(plan->propIds[11], propId(30, Scope(3)));
    EXPECT_EQ(plan->localToPropagated(0)[17], 1u);
    EXPECT_EQ(plan->localToPropagated(0)[6], Plan::kNotPropagated);
    EXPECT_EQ(plan->localToPropagated(2)[39 - 30], 2u);
  }
  for (unsigned threads : {1u, 3u})
    for (bool stats : {false, true}) {
      PipelineOptions opt;
      opt.threads = threads;
      opt.stats = stats;
      opt.rowBucketsAbove = 1;  // the transpose from row buckets, as with many profiles
      MemorySink few, all;
      auto a = inputs(false), b = inputs(true);
      auto r1 = runPipeline(a, nullptr, few, opt);
      auto r2 = runPipeline(b, nullptr, all, opt);
      ASSERT_TRUE(r1.ok() && r2.ok());
      ASSERT_EQ(few.numContexts, all.numContexts);
      // Each live profile's row: b2 (no values) has an empty one.
      for (uint32_t p = 1; p <= 4; ++p) {
        const SparseRow &x = few.rows[p], &y = all.rows[p];
        EXPECT_EQ(x.ctx, y.ctx) << p;
        EXPECT_EQ(x.start, y.start) << p;
        EXPECT_EQ(x.metric, y.metric) << p;
        EXPECT_EQ(x.value, y.value) << p;
      }
      EXPECT_TRUE(few.rows[4].value.empty());
      // M5 (a1's local 5 and b1's local 34) has values from both programs; M17 from a1 and a2.
      size_t m5 = 0, m17 = 0, m30 = 0;
      for (const SparseRow* row : {&few.rows[1], &few.rows[2], &few.rows[3]})
        for (uint16_t m : row->metric) {
          m5 += m / kNumScopes == 5;
          m17 += m / kNumScopes == 17;
          m30 += m / kNumScopes == 30;
        }
      EXPECT_GT(m5, 0u);
      EXPECT_GT(m17, 0u);
      EXPECT_GT(m30, 0u);
      // The columns, without profile 5 (z).
      std::map<std::tuple<uint32_t, uint16_t, uint32_t>, double> cx, cy;
      for (auto [sink, into] : {std::pair{&few, &cx}, std::pair{&all, &cy}})
        for (const ContextColumn& c : sink->columns)
          for (size_t i = 0; i < c.metric.size(); ++i)
            for (uint64_t k = c.start[i]; k < c.start[i + 1]; ++k)
              if (c.profile[k] <= 4) (*into)[{c.ctx, c.metric[i], c.profile[k]}] = c.value[k];
      EXPECT_EQ(cx, cy);
      EXPECT_GT(cx.size(), 20u);
    }
}

// An expander over a fresh tree, with FakeStructure's structure.
struct Unifier {
  FakeStructure structure;
  Cct cct;
  Names names;
  Expander expander{cct, names, &structure};
};

// Unifies `trees` in order into one NodeContexts, as a reader fills one ProfileTree (new
// nodes get a new id, the old ones become previousNodes; the same nodes again keep theirs),
// and expects every node's context to be the one a fresh unification gives it.
void expectContextsOfFreshUnifications(const Expander& expander, const std::vector<ProfileTree>& trees) {
  auto sameNodes = [](const ProfileTree& a, const ProfileTree& b) {
    return a.nodes.size() == b.nodes.size() &&
           std::equal(a.nodes.begin(), a.nodes.end(), b.nodes.begin(), [](const TreeNode& x, const TreeNode& y) {
             return x.id == y.id && x.parent == y.parent && x.offset == y.offset && x.module == y.module &&
                    x.placeholder == y.placeholder && x.unwound == y.unwound;
           });
  };
  NodeContexts reused;
  ProfileTree read;
  for (size_t i = 0; i < trees.size(); ++i) {
    read.loadMap = trees[i].loadMap;
    if (i == 0 || !sameNodes(trees[i], trees[i - 1])) {
      read.previousNodes = read.nodes;
      read.previousNodesId = read.nodesId;
      read.nodes = trees[i].nodes;
      read.nodesId = i + 1;
    }
    NodeContexts alone;
    ASSERT_TRUE(expander.unify(trees[i], alone).ok());
    ASSERT_TRUE(expander.unify(read, reused).ok());
    for (const TreeNode& n : trees[i].nodes)
      EXPECT_EQ(reused.find(n.id), alone.find(n.id)) << "profile " << i << " node " << n.id;
  }
}

// A thread unifies each profile against the previous one it saw (the template); every
// node must get the context a fresh unification gives it, whatever differs between the two.
// holds(): whether a tree read ahead (its nodes not decoded, only named) may take its
// contexts from this NodeContexts: only while the template is that very tree, in that binary.
TEST(Expander, HoldsOnlyTheTreeUnifiedLast) {
  Unifier u;
  NodeContexts nc;
  ProfileTree a = smallTree();
  a.nodesId = 101;
  ProfileTree b = smallTree();
  b.nodes.pop_back();
  b.nodesId = 102;
  EXPECT_FALSE(nc.holds(101, a.loadMap));  // nothing unified yet
  ASSERT_TRUE(u.expander.unify(a, nc).ok());
  EXPECT_TRUE(nc.holds(101, a.loadMap));
  EXPECT_FALSE(nc.holds(101, {{1, "/bin/other"}}));  // the same nodes in another binary
  EXPECT_FALSE(nc.holds(0, a.loadMap));              // an unnamed tree
  ASSERT_TRUE(u.expander.unify(b, nc).ok());
  EXPECT_FALSE(nc.holds(101, a.loadMap));
  EXPECT_TRUE(nc.holds(102, b.loadMap));
  NodeContexts seeded;
  seeded.seedFrom(nc);  // a thread's first profile starts from another's template
  EXPECT_TRUE(seeded.holds(102, b.loadMap));
}

TEST(Expander, TemplateGivesTheContextsOfAFreshUnification) {
  Unifier u;
  Expander& expander = u.expander;
  using P = Placeholder;
  std::vector<ProfileTree> trees;
  trees.push_back(smallTree());
  trees.push_back(smallTree());  // identical: all from the template
  trees.push_back(smallTree());
  trees.back().loadMap = {{1, "/bin/other"}};  // the same nodes in another binary
  trees.push_back(smallTree());
  trees.back().nodes[3].offset = 0x11a6;  // a call site moved: its subtree differs
  trees.push_back(smallTree());
  trees.back().nodes[8].parent = 22;  // a node moved to another parent
  trees.push_back(smallTree());
  trees.back().loadMap = {{1, "/bin/other"}};  // same ids, another binary
  trees.push_back(smallTree());
  trees.back().nodes.insert(trees.back().nodes.begin() + 4, TreeNode{50, 22, 1, P::None, true, 0x1160});  // shifted
  trees.push_back(smallTree());
  std::swap(trees.back().nodes[4], trees.back().nodes[9]);  // reordered
  trees.push_back(smallTree());
  std::swap(trees.back().nodes[3], trees.back().nodes[12]);  // a child listed before its parent
  trees.push_back(smallTree());
  trees.back().nodes[2].placeholder = P::Thread;  // another entry: everything below differs
  trees.push_back(smallTree());
  trees.back().nodes.resize(7);  // shorter
  trees.push_back(smallTree());

  expectContextsOfFreshUnifications(expander, trees);
  // A different binary under the same load-map id is a different context.
  NodeContexts a, b;
  ProfileTree t0 = trees[0], t4 = trees[2];
  ASSERT_TRUE(expander.unify(t0, a).ok());
  ASSERT_TRUE(expander.unify(t4, b).ok());
  EXPECT_NE(a.find(24), b.find(24));
  EXPECT_EQ(a.find(20), b.find(20));
}

// A tree by node: parent, offset, module and kind (node 0 the root, node 1 the main thread).
struct TreeShape {
  std::vector<uint32_t> parent = {};
  std::vector<uint64_t> offset = {};
  std::vector<uint16_t> module = {};   // empty: 1 for every node but the first two (0)
  std::vector<Placeholder> kind = {};  // empty: the root, the main thread, then instructions
  std::vector<bool> unwound = {};      // empty: all
  std::vector<bool> present = {};      // empty: all; a node left out has no children present
};

// The tree listed depth first from the root, each node's children in the shape's order
// (seed 0) or in an order drawn from `seed`; ids in list order (as a thread numbers its
// nodes) or, with idsByShape, the node's place in the shape plus one (stable across
// profiles that leave nodes out), times idScale (sparse ids).
ProfileTree listedDepthFirst(const TreeShape& shape, unsigned seed, bool idsByShape = false, uint32_t idScale = 1) {
  using P = Placeholder;
  const size_t size = shape.parent.size();
  auto present = [&](uint32_t i) { return shape.present.empty() || shape.present[i]; };
  std::vector<std::vector<uint32_t>> kids(size);
  for (uint32_t i = 1; i < size; ++i)
    if (present(i)) kids[shape.parent[i]].push_back(i);
  std::mt19937 order(seed);
  std::vector<uint32_t> stack{0}, seq, idOf(size);
  while (!stack.empty()) {
    const uint32_t at = stack.back();
    stack.pop_back();
    seq.push_back(at);
    std::vector<uint32_t> k = kids[at];
    if (seed) {
      std::shuffle(k.begin(), k.end(), order);
      stack.insert(stack.end(), k.begin(), k.end());
    } else {
      stack.insert(stack.end(), k.rbegin(), k.rend());  // the first child on top
    }
  }
  for (size_t k = 0; k < seq.size(); ++k) idOf[seq[k]] = uint32_t(idsByShape ? seq[k] + 1 : k + 1) * idScale;
  ProfileTree t;
  t.loadMap = {{1, "/bin/small"}};
  for (uint32_t at : seq) {
    TreeNode n;
    n.id = idOf[at];
    n.parent = at ? idOf[shape.parent[at]] : 0;
    n.placeholder = !shape.kind.empty() ? shape.kind[at] : at == 0 ? P::Root : at == 1 ? P::MainThread : P::None;
    n.module = !shape.module.empty() ? shape.module[at] : at > 1 ? 1 : 0;
    n.offset = n.placeholder == P::None ? shape.offset[at] : 0;
    n.unwound = shape.unwound.empty() || shape.unwound[at];
    t.nodes.push_back(n);
  }
  return t;
}

// One tree of 600 nodes (root, main thread, then instructions below recent nodes), listed
// depth first with each node's children in an order drawn from `seed`, and numbered in that
// order (as a thread numbers its nodes); `changedOffset`, where not 0, moves node 300's call
// site. Offsets are drawn from `offsets` values: few make many nodes share a key.
ProfileTree shuffledTree(unsigned seed, uint64_t changedOffset, uint32_t offsets = 0x80) {
  std::mt19937 rng(11);
  std::vector<uint32_t> parentOf(600, 0);
  for (uint32_t i = 2; i < 600; ++i) parentOf[i] = i == 2 ? 1 : i - 1 - rng() % std::min<uint32_t>(i - 1, 8);
  std::vector<uint64_t> offsetOf(600);
  for (auto& o : offsetOf) o = 0x1129 + rng() % offsets;
  if (changedOffset) offsetOf[300] = changedOffset;
  return listedDepthFirst({.parent = parentOf, .offset = offsetOf}, seed);
}

// Profiles listing one tree each in an order of its own (ids as a thread numbers its nodes)
// go through the keyed template; every node must still get a fresh unification's context.
TEST(Expander, KeyedTemplateGivesTheContextsOfAFreshUnification) {
  Unifier u;
  Expander& expander = u.expander;
  auto profile = [](unsigned seed, uint64_t changedOffset) { return shuffledTree(seed, changedOffset); };
  std::vector<ProfileTree> trees;
  for (unsigned k = 0; k < 6; ++k) trees.push_back(profile(100 + k, k == 3 ? 0x1190 : 0));

  expectContextsOfFreshUnifications(expander, trees);
  // The changed call site moved its subtree elsewhere.
  NodeContexts a, b;
  ASSERT_TRUE(expander.unify(trees[0], a).ok());
  ASSERT_TRUE(expander.unify(trees[3], b).ok());
  size_t differ = 0;
  for (size_t k = 0; k < trees[0].nodes.size(); ++k) differ += a.find(trees[0].nodes[k].id) != b.find(trees[3].nodes[k].id);
  EXPECT_GT(differ, 0u);
}

// A node with more children than are compared at once (they are searched by halves in the
// keyed template), among them equal keys, keys too large to pack (never matched in the
// keyed template) and nodes placed without an unwind (another key): every node must still
// get a fresh unification's context, in any order.
TEST(Expander, KeyedTemplateSearchesWideNodesByHalves) {
  Unifier u;
  Expander& expander = u.expander;
  // Shape: 0 root, 1 main thread, 2 a call below it with 300 children, each with 2 below.
  std::vector<uint32_t> parentOf{0, 0, 1};
  std::vector<uint64_t> offsetOf{0, 0, 0x1200};
  std::vector<bool> unwoundOf{true, true, true};
  for (uint32_t i = 0; i < 300; ++i) {
    parentOf.push_back(2);
    offsetOf.push_back(i % 7 == 0 ? (uint64_t(1) << 43) + i % 3 : 0x1300 + (i % 90) * 4);
    unwoundOf.push_back(i % 5 != 0);
  }
  for (uint32_t i = 3; i < 303; ++i)
    for (uint32_t k = 0; k < 2; ++k) {
      parentOf.push_back(i);
      offsetOf.push_back(0x1129 + k);
      unwoundOf.push_back(true);
    }
  std::vector<ProfileTree> trees;
  for (unsigned k = 0; k < 5; ++k) trees.push_back(listedDepthFirst({.parent = parentOf, .offset = offsetOf, .unwound = unwoundOf}, 200 + k));
  expectContextsOfFreshUnifications(expander, trees);
  // Equal keys below one parent are one context (the unwind matters below GPU operations only).
  NodeContexts a;
  ASSERT_TRUE(expander.unify(trees[0], a).ok());
  uint32_t call = 0;
  for (const TreeNode& n : trees[0].nodes)
    if (n.offset == 0x1200) call = n.id;
  std::set<Context*> wide;
  for (const TreeNode& n : trees[0].nodes)
    if (n.parent == call) wide.insert(a.find(n.id));
  EXPECT_EQ(wide.size(), 93u);  // 90 offsets and 3 large ones
}

// Blocks of up to 16 siblings are placed by a perfect hash (a size and rotation under which
// the top bits of their keys' hashes differ), of every size from 1 to 16 here, 16 the
// hardest to place (some such blocks take 64 slots); keys a profile has that the template
// lacks land on empty slots or on others' (their keys then differ). Every node must still
// get a fresh unification's context, in any order.
TEST(Expander, KeyedTemplatePlacesSiblingBlocksApart) {
  Unifier u;
  Expander& expander = u.expander;
  // Shape: 0 root, 1 main thread, 2..41 calls below it (a block of 40: sorted), call c with
  // 1 + c % 16 children, each child with a child of its own.
  auto shape = [](unsigned changed) {
    std::mt19937_64 rng(7);
    std::vector<uint32_t> parentOf{0, 0};
    std::vector<uint64_t> offsetOf{0, 0};
    for (uint32_t c = 0; c < 40; ++c) {
      parentOf.push_back(1);
      offsetOf.push_back(0x1000 + c * 8);
    }
    for (uint32_t c = 0; c < 40; ++c) {
      const uint32_t kids = 1 + c % 16;
      for (uint32_t k = 0; k < kids; ++k) {
        parentOf.push_back(2 + c);
        uint64_t off = 0x10000 + (rng() % (uint64_t(1) << 30));
        if (changed && (k + c) % 5 == changed % 5) off += 4;  // not in the template
        offsetOf.push_back(off);
        parentOf.push_back(uint32_t(parentOf.size() - 1));
        offsetOf.push_back(0x1129);
      }
    }
    return TreeShape{.parent = parentOf, .offset = offsetOf};
  };
  std::vector<ProfileTree> trees;
  for (unsigned k = 0; k < 8; ++k) trees.push_back(listedDepthFirst(shape(k % 4 == 3 ? k : 0), 300 + k));
  expectContextsOfFreshUnifications(expander, trees);
  // Each call site below the 40 calls its own context.
  NodeContexts a;
  ASSERT_TRUE(expander.unify(trees[0], a).ok());
  std::set<Context*> sites;
  size_t listed = 0;
  for (const TreeNode& n : trees[0].nodes)
    if (n.offset >= 0x10000) {
      sites.insert(a.find(n.id));
      ++listed;
    }
  EXPECT_EQ(listed, 2u * (16 * 17 / 2) + 8 * 9 / 2);
  EXPECT_EQ(sites.size(), listed);
}

// Sixteen sibling keys that no block size (up to 64 slots) and rotation part (found by a
// search over random offsets, with the hash and placement of expand.cpp): their block falls
// back to sorted keys, searched by halves. Some profiles lack one of the sixteen, or have
// children of theirs that the others lack (keys their blocks lack); every node must still
// get a fresh unification's context, in any order.
TEST(Expander, KeyedTemplateSortsSiblingsNoRotationParts) {
  Unifier u;
  Expander& expander = u.expander;
  const std::vector<uint64_t> unplaced{0x5a7e4, 0x52d70, 0x3f9c0, 0x3cdb4, 0x50670, 0x3a10c, 0x5ae3c, 0x3a5d4,
                                       0x5b3e4, 0x2f674, 0xe3c0,  0x1f19c, 0x5a948, 0x596a0, 0x412cc, 0x5eda4};
  auto shape = [&](unsigned changed) {
    // 0 root, 1 main thread, 2 a call below it whose 16 children are `unplaced`, each
    // with two children.
    std::vector<uint32_t> parentOf{0, 0, 1};
    std::vector<uint64_t> offsetOf{0, 0, 0x1200};
    for (uint64_t off : unplaced) {
      parentOf.push_back(2);
      offsetOf.push_back(off);
    }
    for (uint32_t c = 3; c < 19; ++c)
      for (uint32_t k = 0; k < 2; ++k) {
        parentOf.push_back(c);
        offsetOf.push_back(0x1129 + 4 * k + (changed && c % 4 == changed % 4 ? 0x100 : 0));
      }
    std::vector<bool> present(parentOf.size(), true);
    if (changed % 2) present[3 + changed % 16] = false;  // one of the sixteen, its children with it
    return TreeShape{.parent = parentOf, .offset = offsetOf, .present = present};
  };
  std::vector<ProfileTree> trees;
  // Enough nodes for a keyed template (256 and more): the shape 16 times under 16 calls.
  for (unsigned k = 0; k < 8; ++k) {
    // The first lacks one of the sixteen: the keyed template, made from it, lacks that key.
    TreeShape one = shape(k == 0 ? 1 : k % 3 == 2 || k % 4 == 3 ? k : 0);
    TreeShape many{.parent = {0, 0}, .offset = {0, 0}, .present = {true, true}};
    for (uint32_t r = 0; r < 16; ++r) {
      const uint32_t base = uint32_t(many.parent.size());
      for (size_t i = 2; i < one.parent.size(); ++i) {
        many.parent.push_back(one.parent[i] < 2 ? 1 : one.parent[i] - 2 + base);
        many.offset.push_back(i == 2 ? 0x1200 + 8 * r : one.offset[i]);
        many.present.push_back(one.present[i]);
      }
    }
    trees.push_back(listedDepthFirst(many, 400 + k));
  }
  ASSERT_GE(trees[0].nodes.size(), 256u);
  expectContextsOfFreshUnifications(expander, trees);
  // The sixteen below each call: sixteen contexts, each call's its own.
  NodeContexts a;
  ASSERT_TRUE(expander.unify(trees[1], a).ok());
  std::set<Context*> sites;
  for (const TreeNode& n : trees[1].nodes)
    if (std::find(unplaced.begin(), unplaced.end(), n.offset) != unplaced.end()) sites.insert(a.find(n.id));
  EXPECT_EQ(sites.size(), 16u * 16);  // trees[1] lacks none of them
}

// Profiles listing one tree in one order, each without its own few dozen leaves (threads
// that reach not quite the same code): the positional template serves, and leaves the nodes
// its profile lacked to the shared table, until a keyed template is made from a profile with
// many such; the later profiles then find those nodes in it. Every node must still get a
// fresh unification's context.
TEST(Expander, ProfilesWithLeavesTheirTemplateLacksMakeAKeyedTemplate) {
  Unifier u;
  Expander& expander = u.expander;
  std::mt19937 rng(5);
  std::vector<uint32_t> parentOf(1200, 0);
  std::vector<uint64_t> offsetOf(1200, 0);
  for (uint32_t i = 2; i < 1200; ++i) {
    parentOf[i] = i == 2 ? 1 : i - 1 - rng() % std::min<uint32_t>(i - 2, 6);
    offsetOf[i] = 0x1000 + 4 * (rng() % 5000);
  }
  std::vector<bool> leaf(1200, true);
  for (uint32_t i = 1; i < 1200; ++i) leaf[parentOf[i]] = false;
  std::vector<ProfileTree> trees;
  for (unsigned k = 0; k < 10; ++k) {
    std::vector<bool> present(1200, true);
    size_t left = 0;
    for (uint32_t i = 2; i < 1200; ++i)
      if (leaf[i] && rng() % 8 == 0) {
        present[i] = false;
        ++left;
      }
    ASSERT_GT(left, 40u);  // more than the shared table is left before a keyed template is made
    trees.push_back(listedDepthFirst({.parent = parentOf, .offset = offsetOf, .present = present}, 0, true));
  }
  trees.push_back(trees[3]);  // the same nodes again
  expectContextsOfFreshUnifications(expander, trees);
}

// Nodes matched by position (or, where the lists differ, by id) take their template node's
// keyed match (no search); the nodes that both miss are then searched below those matches. Every node
// must still get a fresh unification's context, through rebuilt keyed templates too.
TEST(Expander, PositionalMatchesKeepTheirKeyedMatches) {
  Unifier u;
  Expander& expander = u.expander;
  auto swapped = [](ProfileTree t, size_t a, size_t b) {
    std::swap(t.nodes[a], t.nodes[b]);
    return t;
  };
  // Few offsets: a node searched below the wrong template node would mostly find a child
  // with its key there, and so a wrong context.
  auto tree = [](unsigned seed, uint64_t changedOffset) { return shuffledTree(seed, changedOffset, 3); };
  std::vector<ProfileTree> trees;
  trees.push_back(tree(100, 0));                     // the keyed template is made from it
  trees.push_back(swapped(trees[0], 40, 41));        // by position, two nodes searched
  trees.push_back(tree(100, 0x1190));                // one call site moved
  trees.push_back(tree(100, 0));                     // by position again, from the last
  trees.push_back(swapped(tree(100, 0), 300, 310));
  trees.push_back(tree(101, 0));                     // another order: the keyed template
  trees.push_back(swapped(tree(101, 0), 7, 500));    // by position from its matches
  trees.push_back(tree(102, 0x1190));
  trees.push_back(swapped(tree(102, 0x1190), 20, 21));
  trees.push_back(tree(100, 0));
  for (size_t at : {30u, 31u, 200u, 450u}) {         // nodes left out: the rest found by id
    ProfileTree t = tree(100, 0);
    t.nodes.erase(t.nodes.begin() + at);
    trees.push_back(std::move(t));
  }
  {
    ProfileTree t = tree(100, 0x1190);                 // a node more, and by id the others
    t.nodes.insert(t.nodes.begin() + 120, TreeNode{900, t.nodes[119].id, 1, Placeholder::None, true, 0x1129});
    trees.push_back(std::move(t));
    ProfileTree u = tree(100, 0);
    u.nodes[60].parent = u.nodes[10].id;               // a node moved, its id kept
    trees.push_back(std::move(u));
  }
  {
    // Sparse ids (no id table): by position only, where the lists differ.
    auto sparse = [](ProfileTree t) {
      for (TreeNode& n : t.nodes) {
        n.id *= 10007;
        n.parent *= 10007;
      }
      return t;
    };
    ProfileTree t = sparse(tree(100, 0));
    trees.push_back(t);
    t.nodes.erase(t.nodes.begin() + 100);
    trees.push_back(t);
    trees.push_back(sparse(tree(100, 0)));
  }
  for (unsigned k = 0; k < 4; ++k) {                 // nodes moved down the list, by position before them
    ProfileTree t = tree(100, 0);
    std::rotate(t.nodes.begin() + 50 + 100 * k, t.nodes.begin() + 51 + 100 * k, t.nodes.begin() + 90 + 100 * k);
    trees.push_back(std::move(t));
  }
  expectContextsOfFreshUnifications(expander, trees);
}

// Many profiles of one program in a drawn sequence of the ways they differ (each thread's
// order of its own or the shape's, ids by list or by shape and sparse, leaves left out, a
// node more, a call site or module changed, another binary, GPU operations with and without
// an unwind, a node with many children, a node before its parent, an orphan, the same list
// again), unified one after the other into one NodeContexts: every node must get a fresh
// unification's context, whichever of the templates (by position, by id, keyed) serves it.
TEST(Expander, AnySequenceOfProfilesGetsFreshContexts) {
  Unifier u;
  Expander& expander = u.expander;
  using P = Placeholder;
  std::mt19937 rng(2026);
  TreeShape base;
  base.parent = {0, 0, 1};
  base.kind = {P::Root, P::MainThread, P::None};
  for (uint32_t i = 3; i < 700; ++i) {
    const uint32_t r = uint32_t(rng() % 100);
    base.parent.push_back(r < 6 ? 2 : r < 70 ? i - 1 - uint32_t(rng() % std::min<uint32_t>(i - 2, 12)) : 2 + uint32_t(rng() % (i - 2)));
    base.kind.push_back(i % 97 == 0 ? P::GpuKernel : P::None);
  }
  for (uint32_t i = 0; i < base.parent.size(); ++i) {
    const bool instruction = base.kind[i] == P::None && i > 1;
    base.offset.push_back(instruction ? 0x1129 + rng() % 6 * 0x11 : 0);  // few keys: a search below the wrong node mostly finds one
    base.module.push_back(instruction ? uint16_t(1 + rng() % 3) : 0);
    base.unwound.push_back(!(base.kind[base.parent[i]] == P::GpuKernel && rng() % 2));
  }
  std::vector<bool> leaf(base.parent.size(), true);
  for (uint32_t i = 1; i < base.parent.size(); ++i) leaf[base.parent[i]] = false;
  const std::vector<std::pair<uint16_t, std::string>> maps[2] = {
      {{1, "/bin/small"}, {2, "/lib/a.so"}, {3, "/lib/b.so"}},
      {{1, "/bin/small"}, {2, "/lib/c.so"}, {3, "/lib/b.so"}}};
  std::vector<ProfileTree> trees;
  for (unsigned p = 0; p < 80; ++p) {
    if (p > 0 && rng() % 8 == 0) {
      trees.push_back(trees.back());  // the same list again
      continue;
    }
    TreeShape shape = base;
    const unsigned leftOut = unsigned(rng() % 3) * 2;  // percent of the leaves
    shape.present.assign(shape.parent.size(), true);
    for (uint32_t i = 2; i < shape.parent.size(); ++i)
      if (leaf[i] && rng() % 100 < leftOut) shape.present[i] = false;
    if (rng() % 4 == 0) shape.offset[3 + rng() % 600] ^= 0x4;  // a call site moved: its subtree too
    if (rng() % 5 == 0) {
      const uint32_t at = 3 + uint32_t(rng() % 600);
      if (shape.module[at]) shape.module[at] = uint16_t(1 + shape.module[at] % 3);
    }
    if (rng() % 4 == 0) {  // a node more, below any
      shape.parent.push_back(2 + uint32_t(rng() % 600));
      shape.offset.push_back(0x1129 + rng() % 6 * 0x11);
      shape.module.push_back(1);
      shape.kind.push_back(P::None);
      shape.unwound.push_back(true);
      shape.present.push_back(true);
    }
    const bool ownOrder = rng() % 2;
    const bool idsByShape = !ownOrder && rng() % 2;
    const uint32_t idScale = rng() % 10 == 0 ? 10007 : 1;
    ProfileTree t = listedDepthFirst(shape, ownOrder ? 1 + unsigned(rng() % 1000) : 0, idsByShape, idScale);
    t.loadMap = maps[rng() % 10 == 0 ? 1 : 0];
    if (rng() % 8 == 0) {  // a node listed before its parent
      const size_t at = 3 + rng() % (t.nodes.size() - 3);
      for (size_t k = 0; k < at; ++k)
        if (t.nodes[k].id == t.nodes[at].parent) {
          std::swap(t.nodes[k], t.nodes[at]);
          break;
        }
    }
    if (rng() % 8 == 0) t.nodes[3 + rng() % (t.nodes.size() - 3)].parent = 999999;  // an orphan
    trees.push_back(std::move(t));
  }
  expectContextsOfFreshUnifications(expander, trees);
}

// Profiles whose node ids are sparse (up to about 2^31) at two threads: the seed made ahead
// of the first profile's copy sizes nothing by the ids (a table of them would be 8 GB), and
// the database is the one thread's.
TEST(Pipeline, SparseIdsAtTwoThreadsMakeNoTableOfThem) {
  auto run = [](unsigned threads, MemorySink& sink) {
    std::vector<std::unique_ptr<ProfileSource>> in;
    for (uint32_t p = 0; p < 3; ++p) {
      ProfileTree t;
      t.idTuple = {{1, 1, 7, 0}, {3, 3, 0, p}};
      t.metrics = {"m"};
      t.loadMap = {{1, "/bin/sparse"}};
      constexpr uint32_t kStride = 107000;  // 20,002 nodes: ids up to about 2.14e9
      t.nodes.push_back({1, 0, 0, Placeholder::Root, true, 0});
      t.nodes.push_back({1 + kStride, 1, 0, Placeholder::MainThread, true, 0});
      for (uint32_t i = 2; i < 20002; ++i)
        t.nodes.push_back({1 + i * kStride, 1 + (i - 1 - (i % 5 == 0 ? 0 : i % 3 == 0)) * kStride, 1,
                           Placeholder::None, true, 0x1000 + 4 * uint64_t(i)});
      ProfileValues v;
      v.values = {{1 + 20001 * kStride, 0, 1.0 + p}, {1 + 7 * kStride, 0, 0.5}};
      in.push_back(std::make_unique<FakeProfile>("p" + std::to_string(p), t, v));
    }
    PipelineOptions opt;
    opt.threads = threads;
    auto r = runPipeline(in, nullptr, sink, opt);
    EXPECT_TRUE(r.ok());
  };
  MemorySink one, two;
  run(1, one);
  rusage before{};
  getrusage(RUSAGE_SELF, &before);
  run(2, two);
  rusage after{};
  getrusage(RUSAGE_SELF, &after);
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 512 * 1024) << "KiB more at the peak";
  ASSERT_EQ(one.rows.size(), two.rows.size());
  for (size_t p = 0; p < one.rows.size(); ++p) {
    EXPECT_EQ(one.rows[p].ctx, two.rows[p].ctx) << p;
    EXPECT_EQ(one.rows[p].value, two.rows[p].value) << p;
  }
  EXPECT_GT(one.rows.size(), 1u);
}

// The distinct nodes a trace names, listed once each across add() calls, small ids by index
// and large ones (and the hash set's empty mark) by hash; begin() forgets the last trace's
// (a node listed there is listed again here).
TEST(TraceNodeLister, ListsEachNodeOnceAndForgetsTheLastTrace) {
  TraceNodeLister lister;
  auto run = [&](const std::vector<uint32_t>& ids, size_t split) {
    auto at = [&](size_t base) { return [&ids, base](uint64_t k) { return ids[base + k]; }; };
    lister.add(split, at(0));
    lister.add(ids.size() - split, at(split));
    std::vector<uint32_t> got = lister.list();
    std::sort(got.begin(), got.end());
    return got;
  };
  lister.begin(100);
  EXPECT_EQ(run({5, 5, 7, 5, 401, 7, 63, 64, 4000000000u, 4000000000u, ~0u, 63, ~0u, 9}, 5),
            (std::vector<uint32_t>{5, 7, 9, 63, 64, 401, 4000000000u, ~0u}));
  lister.begin(100);
  EXPECT_EQ(run({7, 9, 9, 64, 4000000000u}, 2), (std::vector<uint32_t>{7, 9, 64, 4000000000u}));
  lister.begin(20000);  // grown
  std::vector<uint32_t> many;
  for (uint32_t k = 0; k < 50000; ++k) many.push_back((k * 7919u) % 80000u);
  std::vector<uint32_t> want(many);
  std::sort(want.begin(), want.end());
  want.erase(std::unique(want.begin(), want.end()), want.end());
  EXPECT_EQ(run(many, 12345), want);
}

// A tree large enough that finalize() runs its passes on the arena's threads, made by four
// threads racing (its contexts spread over their arenas) and again by one: the same ids,
// parents, listed contexts and sorted children.
TEST(Cct, LargeTreeFinalizedOnThreadsAsOnOne) {
  constexpr uint32_t kNodes = 150000;
  std::mt19937_64 rng(11);
  std::vector<uint32_t> parent(kNodes);
  std::vector<ContextKey> keys(kNodes);
  std::vector<uint64_t> offsets(kNodes);
  for (uint32_t i = 0; i < kNodes; ++i) offsets[i] = 0x1000 + 4 * uint64_t(i);
  std::shuffle(offsets.begin(), offsets.end(), rng);
  for (uint32_t i = 0; i < kNodes; ++i) {
    // Node 0 hangs on the root; a few nodes have hundreds of children, most have one or two.
    parent[i] = i == 0 ? kNodes : (rng() % 50 == 0 ? uint32_t(rng() % std::min<uint32_t>(i, 20)) : i - 1 - uint32_t(rng() % std::min<uint32_t>(i, 30)));
    keys[i].type = LexType::Instruction;
    keys[i].offset = offsets[i];
    keys[i].hidden = rng() % 10 == 0;
  }
  auto build = [&](Cct& cct, int threads) {
    std::vector<std::atomic<Context*>> made(kNodes);
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t)
      workers.emplace_back([&, t] {
        // Each thread finds or makes every context, starting at its own place.
        for (uint32_t k = 0; k < kNodes; ++k) {
          const uint32_t i = (k + uint32_t(t) * 997) % kNodes;
          const uint32_t p = parent[i];
          Context* at = p == kNodes ? cct.root() : made[p].load();
          if (!at) {  // its parent not made yet: make the chain from the last one made
            std::vector<uint32_t> chain{i};
            for (uint32_t q = p; q != kNodes && !made[q].load(); q = parent[q]) chain.push_back(q);
            const uint32_t top = parent[chain.back()];
            at = top == kNodes ? cct.root() : made[top].load();
            for (size_t c = chain.size(); c-- > 1;) made[chain[c]].store(at = at->child(keys[chain[c]]));
          }
          made[i].store(at->child(keys[i]));
        }
      });
    for (std::thread& w : workers) w.join();
    tbb::task_arena arena(threads);
    arena.execute([&] { cct.finalize(); });
  };
  Cct many, one;
  build(many, 4);
  build(one, 1);
  ASSERT_EQ(many.size(), kNodes + 1);
  ASSERT_EQ(one.size(), kNodes + 1);
  ASSERT_EQ(many.parents(), one.parents());
  size_t hiddenSeen = 0;
  for (uint32_t id = 0; id < many.size(); ++id) {
    const Context* a = many.byId(id);
    const Context* b = one.byId(id);
    ASSERT_EQ(a->id(), id);
    ASSERT_EQ(b->id(), id);
    ASSERT_TRUE(a->key() == b->key()) << id;
    ASSERT_EQ(a->listedId(), b->listedId()) << id;
    ASSERT_EQ(a->listed()->id(), a->listedId());
    // Listed: the nearest ancestor-or-self that is not hidden.
    const Context* want = a;
    while (want->key().hidden && want->parent()) want = want->parent();
    ASSERT_EQ(a->listed(), want) << id;
    hiddenSeen += a->key().hidden ? 1 : 0;
    if (id) {
      ASSERT_EQ(many.parents()[id], a->parent()->id());
    }
    ASSERT_EQ(a->children().size(), b->children().size()) << id;
    const Context* elder = nullptr;
    for (size_t k = 0; k < a->children().size(); ++k) {
      const Context* kid = a->children()[k];
      ASSERT_EQ(kid->parent(), a);
      ASSERT_EQ(kid->id(), b->children()[k]->id());
      if (elder) {
        ASSERT_LT(compare(elder->key(), kid->key()), 0);  // siblings in content order
      }
      elder = kid;
    }
  }
  EXPECT_GT(hiddenSeen, kNodes / 20);
  // Ids in pre-order.
  uint32_t expect = 0;
  std::vector<const Context*> stack{many.root()};
  while (!stack.empty()) {
    const Context* c = stack.back();
    stack.pop_back();
    ASSERT_EQ(c->id(), expect++);
    for (size_t k = c->children().size(); k-- > 0;) stack.push_back(c->children()[k]);
  }
  EXPECT_EQ(expect, many.size());

  // Ids and listed ids by where the contexts lie (ContextIds) are the contexts' own, also in
  // a tree whose region holds only its first few hundred contexts (the rest from the heap).
  Cct cramped(500 * sizeof(Context));
  build(cramped, 4);
  ASSERT_EQ(cramped.size(), kNodes + 1);
  ASSERT_EQ(cramped.parents(), one.parents());
  for (const Cct* t : {&many, &one, &cramped}) {
    const ContextIds ids = t->ids();
    for (uint32_t id = 0; id < t->size(); ++id) {
      const Context* c = t->byId(id);
      ASSERT_EQ(ids.id(c), id);
      ASSERT_EQ(ids.listedId(c), c->listedId()) << id;
    }
  }

  // The lookup table released and made again on demand: the same contexts are found, and a
  // new one is made once.
  many.releaseLookup();
  for (uint32_t id = 1; id < many.size(); id += 997) {
    Context* c = const_cast<Context*>(many.byId(id));
    ASSERT_EQ(many.findChild(c->parent(), c->key()), c) << id;
  }
  many.releaseLookup();
  Context* top = const_cast<Context*>(many.byId(1));
  ContextKey fresh = top->key();
  fresh.offset = 0x7;
  Context* made = many.child(top, fresh);
  EXPECT_EQ(many.child(top, fresh), made);
  EXPECT_EQ(many.child(top->parent(), top->key()), top);
  many.finalize();
  EXPECT_EQ(many.size(), kNodes + 2);
}

}  // namespace
}  // namespace hpc::analysis
