// Writes a measurement directory of GPU PC samples in a real cubin with device calls, as
// hpcrun writes one (the cubin copied under gpubins/, its load-map entry naming the copy):
// for tests of GPU calling-context reconstruction. The samples fall in the conformance kit's
// recursion-sm_75 cubin: kernmain() calls heart(), which calls top1() and top2(); those
// reach common1() and common2(), which call top1() and top2() again. Profile p samples
// heart()'s call of top1() 3 + p times and its call of top2() once, so each profile has its
// own shares (3 + p) / (4 + p) and 1 / (4 + p).
//   gen_gpu_calls DIR CUBIN [profiles=4]
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "formats/hpcrun/hpcrun.hpp"

namespace fs = std::filesystem;
using namespace hpc::hpcrun;


int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: gen_gpu_calls DIR CUBIN [profiles]\n");
    return 2;
  }
  const fs::path dir = argv[1], cubin = argv[2];
  const int profiles = argc > 3 ? std::atoi(argv[3]) : 4;
  std::error_code ec;
  fs::create_directories(dir / "gpubins", ec);
  const fs::path copy = fs::absolute(dir / "gpubins" / "0123456789abcdef0123456789abcdef.gpubin");
  if (ec || !fs::copy_file(cubin, copy, fs::copy_options::overwrite_existing, ec)) {
    std::fprintf(stderr, "gen_gpu_calls: cannot copy %s to %s\n", cubin.c_str(), copy.c_str());
    return 1;
  }
  for (int p = 0; p < profiles; ++p) {
    Profile prof;
    prof.header = {{"program-name", "recursion"}, {"process-id", "77"}, {"mpi-rank", "0"}};
    prof.load_modules = {{1, "/nonexistent/recursion", 1}, {2, copy.string(), 1}};
    MetricDesc gins;
    gins.name = "GINS";
    gins.description = "GPU instruction execution count";
    gins.flags.val_fmt = kValFmtInt;
    MetricDesc stalls = gins;
    stalls.name = "GINS:STL_ANY";
    stalls.description = "GPU instruction stalls: any";
    prof.metrics = {gins, stalls};
    prof.id_kinds = {{kIdThread, "THREAD"}};
    prof.id_tuple = {{kIdThread, uint64_t(p), uint64_t(p)}};
    prof.nodes = {{1, 0, 0, placeholder_tag("^Primary"), 1, {}},
                  {2, 1, 0, placeholder_tag("| Main  "), 1, {}},
                  {3, 2, 1, 0x1234, 1, {}},
                  {4, 3, 0, placeholder_tag("GPUKernl"), 1, {}}};
    struct Sample {
      uint64_t pc, gins, stalls;
    };
    const Sample samples[] = {
        {0x15530, 2, 0},                 // kernmain() calls heart()
        {0x14c30, 10, 4},                // heart(), line 43
        {0x15040, uint64_t(3 + p), 0},   // heart() calls top1()
        {0x150a0, 1, 0},                 // heart() calls top2()
        {0x13360, 40, 8},                // top1(), line 31
        {0x14920, 80, 16},               // common2(), line 21
        {0x14840, 1, 0},                 // common2() calls top1()
        {0x148d0, 1, 0},                 // common2() calls top2()
        {0x11590, 16, 0},                // the division slow path, called by top2()
    };
    uint32_t id = 10;
    for (const Sample& s : samples) {
      CctNode n{id++, 4, 2, s.pc, 0, {{0, s.gins}}};
      if (s.stalls) n.values.push_back({1, s.stalls});
      prof.nodes.push_back(n);
    }
    char name[96];
    std::snprintf(name, sizeof name, "recursion-000000-%03d-0000004d-77-0.hpcrun", p);
    if (hpc::Status st = write_profile(prof, dir / name); !st.ok()) {
      std::fprintf(stderr, "gen_gpu_calls: %s\n", st.message().c_str());
      return 1;
    }
  }
  return 0;
}
