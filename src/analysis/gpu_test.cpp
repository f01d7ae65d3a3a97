// GPU operations: hpcrun's placeholder nodes below a CPU launch context become named
// function contexts (as the reference's loops-cuda-nvidia-t database shows), with the GPU
// code below them or, without a GPU binary (OpenCL), the values on them directly.
#include <gtest/gtest.h>

#include <map>

#include "analysis/fake_profile.hpp"
#include "analysis/memory_sink.hpp"
#include "analysis/pipeline.hpp"

namespace hpc::analysis {
namespace {

// kernmain() [0x2e00,0x2e60): line 19 at the entry, line 20 after it. The CPU binary has none.
class GpuStructure final : public StructureSource {
public:
  bool lookup(const std::string& m, uint64_t a, std::vector<ScopeStep>& out) const override {
    out.clear();
    if (m != "/gpu/k.gpubin" || a < 0x2e00 || a >= 0x2e60) return false;
    out.push_back({ScopeStep::Kind::Procedure, "kernmain()", "k.cu", 16, 0x2e00, 0});
    out.push_back({ScopeStep::Kind::Line, "", "k.cu", a < 0x2e10 ? 19u : 20u, 0, 0});
    return true;
  }
};

using P = Placeholder;
constexpr uint16_t kCpu = 1, kGpu = 2;

// Thread profile: main -> launch site 0x500 -> one placeholder per GPU operation kind.
// The kernel has its entry (launch metrics) and a PC sample (not unwound) below it; the others carry
// their values themselves; the trace path repeats the kernel entry without values.
ProfileTree threadTree() {
  ProfileTree t;
  t.idTuple = {{1, 1, 7, 0}, {3, 3, 0, 0}};
  t.metrics = {"GPUOP (sec)", "GKER:COUNT"};
  t.loadMap = {{kCpu, "/bin/app"}, {kGpu, "/gpu/k.gpubin"}};
  t.nodes = {{1, 0, 0, P::Root, true, 0},         {2, 1, 0, P::MainThread, true, 0},
             {3, 2, kCpu, P::None, true, 0x500},  {10, 3, 0, P::GpuKernel, true, 0},
             {11, 10, kGpu, P::None, true, 0x2e00}, {12, 10, kGpu, P::None, false, 0x2e20},
             {20, 3, 0, P::GpuCopy, true, 0},     {21, 3, 0, P::GpuMemset, true, 0},
             {22, 3, 0, P::GpuSync, true, 0},     {23, 3, 0, P::GpuAlloc, true, 0},
             {30, 3, 0, P::GpuTrace, true, 0},    {31, 30, kGpu, P::None, true, 0x2e00}};
  return t;
}

ProfileValues threadValues() {
  ProfileValues v;
  v.values = {{11, 0, 4.0}, {11, 1, 2.0}, {12, 0, 0.5}, {20, 0, 1.0},
              {21, 0, 0.25}, {22, 0, 0.125}, {23, 0, 0.0625}};
  return v;
}

// GPU stream profile (NODE / GPUDEVICE / GPUCONTEXT / GPUSTREAM): its trace path only. The
// CUDA record points at the kernel code, the OpenCL one (no GPU binary) at the placeholder.
ProfileTree streamTree() {
  ProfileTree t = threadTree();
  t.idTuple = {{1, 1, 7, 0}, {4, 3, 0, 0}, {5, 3, 1, 1}, {6, 3, 7, 7}};
  t.nodes = {{1, 0, 0, P::Root, true, 0},        {5, 1, 0, P::NoActivity, true, 0},
             {2, 1, 0, P::MainThread, true, 0},  {3, 2, kCpu, P::None, true, 0x500},
             {30, 3, 0, P::GpuTrace, true, 0},   {31, 30, kGpu, P::None, true, 0x2e00}};
  t.hasTrace = true;
  return t;
}

ProfileValues streamValues() {
  ProfileValues v;
  v.trace = {{100, 31}, {200, 5}, {300, 30}};
  return v;
}

struct GpuRun {
  MemorySink sink;
  PipelineResult result;  // owns the tree the sink's meta points into
  const Context* launch = nullptr;
  std::map<std::string, std::vector<const Context*>> ops;  // by name
};

void analyse(const StructureSource* structure, GpuRun& run) {
  std::vector<std::unique_ptr<ProfileSource>> in;
  in.push_back(std::make_unique<FakeProfile>("a-000", threadTree(), threadValues()));
  in.push_back(std::make_unique<FakeProfile>("a-500", streamTree(), streamValues()));
  auto r = runPipeline(in, structure, run.sink, PipelineOptions());
  ASSERT_TRUE(r.ok()) << r.status().message();
  run.result = std::move(*r);
  ASSERT_FALSE(run.sink.meta.cct->root()->children().empty());
  const Context* entry = run.sink.meta.cct->root()->children()[0];
  ASSERT_EQ(entry->children().size(), 1u);
  run.launch = entry->children()[0];
  for (const Context* c : run.launch->children()) {
    ASSERT_EQ(c->key().type, LexType::Function);
    EXPECT_EQ(c->key().relation, Relation::Call);
    EXPECT_EQ(c->key().function->module, nullptr);
    run.ops[c->key().function->name].push_back(c);
  }
}

double point(const GpuRun& r, const Context* c, uint16_t m = 0) {
  return r.sink.value(1, c->id(), propId(m, kPoint));
}

TEST(Gpu, PlaceholdersBecomeNamedFunctions) {
  GpuStructure structure;
  GpuRun run;
  analyse(&structure, run);
  ASSERT_EQ(run.launch->children().size(), 6u);
  for (const char* n : {"<gpu copy>", "<gpu memset>", "<gpu sync>", "<gpu alloc>"}) {
    ASSERT_EQ(run.ops[n].size(), 1u) << n;
    EXPECT_TRUE(run.ops[n][0]->children().empty()) << n;
  }
  // The kernel and the stream trace path: two functions of one name, as the reference has.
  ASSERT_EQ(run.ops["<gpu kernel>"].size(), 2u);
  EXPECT_NE(run.ops["<gpu kernel>"][0]->key().function, run.ops["<gpu kernel>"][1]->key().function);

  // Without GPU code the values sit on the operation itself, in every scope.
  const Context* copy = run.ops["<gpu copy>"][0];
  EXPECT_EQ(point(run, copy), 1.0);
  EXPECT_EQ(run.sink.value(1, copy->id(), propId(0, kFunction)), 1.0);
  EXPECT_EQ(run.sink.value(1, copy->id(), propId(0, kExecution)), 1.0);
  EXPECT_EQ(point(run, run.ops["<gpu alloc>"][0]), 0.0625);
  EXPECT_EQ(run.sink.value(1, run.launch->id(), propId(0, kExecution)), 4 + 0.5 + 1 + 0.25 + 0.125 + 0.0625);
  EXPECT_EQ(run.sink.value(0, copy->id(), propId(0, kExecution)), 1.0);  // summary
}

TEST(Gpu, KernelEntryValuesOnTheKernelFunction) {
  GpuStructure structure;
  GpuRun run;
  analyse(&structure, run);
  const Context* kernel = nullptr;
  const Context* trace = nullptr;
  for (const Context* k : run.ops["<gpu kernel>"])
    (run.sink.value(1, k->id(), propId(0, kExecution)) ? kernel : trace) = k;
  ASSERT_TRUE(kernel && trace);
  ASSERT_EQ(kernel->children().size(), 1u);
  const Context* fn = kernel->children()[0];
  EXPECT_EQ(fn->key().function->name, "kernmain()");
  // The launch metrics belong to the function; its entry line stays, empty.
  EXPECT_EQ(point(run, fn), 4.0);
  EXPECT_EQ(point(run, fn, 1), 2.0);
  EXPECT_EQ(run.sink.value(1, fn->id(), propId(0, kExecution)), 4.5);
  EXPECT_EQ(point(run, kernel), 0.0);
  const Context* line19 = nullptr;
  const Context* line20 = nullptr;
  for (const Context* c : fn->children()) (c->key().line == 19 ? line19 : line20) = c;
  ASSERT_TRUE(line19 && line20);
  EXPECT_EQ(run.sink.value(1, line19->id(), propId(0, kExecution)), 0.0);
  // A PC sample is an instruction like any other: on its hidden leaf below the line.
  EXPECT_EQ(run.sink.value(1, line20->id(), propId(0, kExecution)), 0.5);
  ASSERT_EQ(line20->children().size(), 1u);
  EXPECT_TRUE(line20->children()[0]->key().hidden);
  EXPECT_EQ(point(run, line20->children()[0]), 0.5);

  // Stream trace: kernel code -> the trace path's kernmain(), idle -> 0, and the OpenCL
  // record -> the trace placeholder's own context.
  const auto& line = run.sink.traceLines.at(2);
  ASSERT_EQ(line.size(), 3u);
  ASSERT_EQ(trace->children().size(), 1u);
  EXPECT_EQ(line[0].ctx, trace->children()[0]->id());
  EXPECT_EQ(trace->children()[0]->key().function->name, "kernmain()");
  EXPECT_EQ(line[1].ctx, 0u);
  EXPECT_EQ(line[2].ctx, trace->id());
  EXPECT_EQ(run.sink.ids.at(2).size(), 4u);
}

// Without structure the entry is an instruction; a PC sample's function is unknown: it
// hangs on an unnamed function context, as in the reference's nvidiapc .nostruct database.
TEST(Gpu, WithoutStructureTheKernelIsAnInstruction) {
  GpuRun run;
  analyse(nullptr, run);
  ASSERT_EQ(run.ops["<gpu kernel>"].size(), 2u);
  for (const Context* k : run.ops["<gpu kernel>"]) {
    if (run.sink.value(1, k->id(), propId(0, kExecution)) == 0) continue;
    ASSERT_EQ(k->children().size(), 2u);
    const Context* entry = nullptr;
    const Context* unknown = nullptr;
    for (const Context* c : k->children())
      (c->key().type == LexType::Instruction ? entry : unknown) = c;
    ASSERT_TRUE(entry && unknown);
    EXPECT_EQ(entry->key().relation, Relation::Call);
    EXPECT_EQ(entry->key().offset, 0x2e00u);
    EXPECT_EQ(point(run, entry), 4.0);
    EXPECT_EQ(unknown->key().type, LexType::Function);
    EXPECT_EQ(unknown->key().function, nullptr);
    EXPECT_EQ(run.sink.value(1, unknown->id(), propId(0, kExecution)), 0.5);
    EXPECT_EQ(run.sink.value(1, unknown->id(), propId(0, kFunction)), 0.0);
    ASSERT_EQ(unknown->children().size(), 1u);
    const Context* sample = unknown->children()[0];
    EXPECT_EQ(sample->key().relation, Relation::Call);
    EXPECT_EQ(sample->key().offset, 0x2e20u);
    EXPECT_EQ(point(run, sample), 0.5);
  }
  EXPECT_EQ(point(run, run.ops["<gpu sync>"][0]), 0.125);
}

}  // namespace
}  // namespace hpc::analysis
