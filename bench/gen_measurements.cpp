// Writes a synthetic but realistic measurement directory for benchmarking hpcprof:
// many thread profiles sharing one calling-context shape (as threads of one program
// do), a few percent of nodes with non-zero values, and a trace per thread. Each node hangs
// below one of the 24 before it, so paths are deep (about 800 on average at 20,000 nodes).
// With `shuffled`, each profile numbers and lists the same tree in its own order (a walk
// with the children taken at random), as hpcrun numbers nodes in the order a thread first
// reached them: no two profiles' node lists are alike. With `deep`, the tree is one call
// chain (deep recursion); with `bushy`, each node hangs below any node made before it, so
// paths are short (about 10 contexts at 20,000 nodes), as most programs' are; with
// `shuffled-bushy`, that tree in each profile's own order (most programs' threads). With `varied`,
// each profile lists the tree in the one order but leaves out about 1 % of its leaves, drawn
// for each profile, as threads of one program reach not quite the same code: no two
// profiles' node lists are byte-equal, yet they are mostly alike position by position.
// With metrics=N, each profile describes N metrics (the first measured, the others never: a
// GPU measurement's table of dozens), as hpcrun writes its whole table into every profile;
// with measured=K, each valued node's value is on one of the first K, drawn at random.
//   gen_measurements DIR [profiles=500] [nodes=20000] [percent=3] [trace=2000] [same|shuffled|deep|bushy|shuffled-bushy|varied] [metrics=1] [measured=1] [modules=8]
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <algorithm>
#include <random>
#include <vector>
#include <string>

#include "formats/hpcrun/hpcrun.hpp"

namespace fs = std::filesystem;
using namespace hpc::hpcrun;


int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: gen_measurements DIR [profiles] [nodes] [percent] [trace] [same|shuffled|deep|bushy|shuffled-bushy|varied] [metrics] [measured] [modules]\n");
    return 2;
  }
  fs::path dir = argv[1];
  int profiles = argc > 2 ? std::atoi(argv[2]) : 500;
  int nodes = argc > 3 ? std::atoi(argv[3]) : 20000;
  int percent = argc > 4 ? std::atoi(argv[4]) : 3;
  int traceLen = argc > 5 ? std::atoi(argv[5]) : 2000;
  const std::string kind = argc > 6 ? argv[6] : "same";
  const bool shuffled = kind == "shuffled" || kind == "shuffled-bushy";
  const bool deep = kind == "deep";  // one call chain, as deep recursion makes
  // Each node below any node made before it, at random: paths of about ln(nodes) contexts
  // (10 at 20,000 nodes, at most about 30), as a program's calling contexts mostly are.
  const bool bushy = kind == "bushy" || kind == "shuffled-bushy";
  const bool varied = kind == "varied";
  fs::create_directories(dir);

  Profile shape;
  shape.header = {{"program-name", "synthetic"}, {"process-id", "4242"}, {"mpi-rank", "0"}};
  // The load map: 8 modules, or as many as a ninth argument says (a Python or ML program maps
  // thousands); the nodes are in the first 8 whatever their number.
  const int modules = argc > 9 ? std::clamp(std::atoi(argv[9]), 8, 60000) : 8;
  for (int m = 1; m <= modules; ++m)
    shape.load_modules.push_back({uint16_t(m), "/opt/synthetic/lib/python3.11/site-packages/module" + std::to_string(m) + ".cpython-311-x86_64-linux-gnu.so", 1});
  MetricDesc md;
  md.name = "CPUTIME (sec)";
  md.description = "CPUTIME (sec)";
  md.flags.val_fmt = kValFmtReal;
  md.period = 5000;
  shape.metrics = {md};
  const int numMetrics = argc > 7 ? std::max(1, std::atoi(argv[7])) : 1;
  // The first `measured` of them have values, each valued node's on one drawn at random.
  const int measured = argc > 8 ? std::clamp(std::atoi(argv[8]), 1, numMetrics) : 1;
  for (int m = 1; m < numMetrics; ++m) {
    MetricDesc more = md;
    more.name = "GPU:METRIC_" + std::to_string(m);
    more.description = "a metric this synthetic run describes but never measures, number " + std::to_string(m);
    shape.metrics.push_back(more);
  }
  shape.id_kinds = {{kIdSummary, "SUMMARY"}, {kIdNode, "NODE"}, {kIdRank, "RANK"}, {kIdThread, "THREAD"}};
  shape.nodes.push_back({1, 0, 0, placeholder_tag("^Primary"), 1, {}});
  shape.nodes.push_back({2, 1, 0, placeholder_tag("| Main  "), 1, {}});
  std::mt19937_64 rng(7);
  // Each new node's parent is a recent node, so depth grows with the node count.
  for (int i = 3; i <= nodes; ++i) {
    uint32_t parent = i <= 3 ? 2 : uint32_t(std::max<int64_t>(2, i - 1 - int64_t(rng() % 24)));
    if (deep) parent = uint32_t(i - 1);
    if (bushy) parent = uint32_t(2 + rng() % uint64_t(i - 2));
    shape.nodes.push_back({uint32_t(i), parent, uint16_t(1 + rng() % 8), 0x1000 + (rng() % 40000) * 4, 1, {}});
  }
  // children[i]: positions of node i's children, for the shuffled walks.
  std::vector<std::vector<uint32_t>> children(shape.nodes.size());
  for (size_t i = 1; i < shape.nodes.size(); ++i) children[shape.nodes[i].parent_id - 1].push_back(uint32_t(i));
  for (int p = 0; p < profiles; ++p) {
    Profile prof = shape;
    std::vector<uint32_t> idOf(shape.nodes.size());  // shape position -> this profile's id
    if (shuffled) {
      // A depth-first walk from the root, children in random order: parents come first.
      std::vector<uint32_t> stack{0}, order;
      while (!stack.empty()) {
        uint32_t at = stack.back();
        stack.pop_back();
        order.push_back(at);
        std::vector<uint32_t> kids = children[at];
        std::shuffle(kids.begin(), kids.end(), rng);
        stack.insert(stack.end(), kids.begin(), kids.end());
      }
      for (size_t k = 0; k < order.size(); ++k) idOf[order[k]] = uint32_t(k + 1);
      prof.nodes.clear();
      for (uint32_t at : order) {
        auto n = shape.nodes[at];
        n.id = idOf[at];
        n.parent_id = n.parent_id ? idOf[n.parent_id - 1] : 0;
        prof.nodes.push_back(n);
      }
    } else {
      for (size_t k = 0; k < idOf.size(); ++k) idOf[k] = uint32_t(k + 1);
    }
    std::vector<bool> present(shape.nodes.size(), true);
    if (varied) {
      prof.nodes.clear();
      for (size_t k = 0; k < shape.nodes.size(); ++k) {
        if (k > 1 && children[k].empty() && rng() % 100 == 0) present[k] = false;
        else prof.nodes.push_back(shape.nodes[k]);
      }
    }
    prof.id_tuple = {{uint16_t(kIdNode | (1u << 14)), 0x5eed, 0}, {kIdThread, uint64_t(p), uint64_t(p)}};
    for (auto& n : prof.nodes)
      if (n.lm_id && int(rng() % 100) < percent) {
        double v = 0.005 * double(1 + rng() % 50);
        n.values.push_back({uint16_t(measured > 1 ? rng() % uint64_t(measured) : 0), std::bit_cast<uint64_t>(v)});
      }
    char name[128];
    std::snprintf(name, sizeof name, "synthetic-000000-%03d-00005eed-4242-0", p);
    if (auto s = write_profile(prof, dir / (std::string(name) + ".hpcrun")); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.message().c_str());
      return 1;
    }
    Trace tr;
    uint64_t t = 1700000000000000000ull;
    for (int k = 0; k < traceLen; ++k) {
      t += 5000000 + rng() % 100000;
      size_t at = 2 + rng() % (nodes - 2);
      while (!present[at]) at = shape.nodes[at].parent_id - 1;  // a left-out leaf's parent
      tr.records.push_back({t, idOf[at], 0});
    }
    if (auto s = write_trace(tr, dir / (std::string(name) + ".hpctrace")); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.message().c_str());
      return 1;
    }
  }
  std::printf("wrote %d profiles of %d nodes to %s\n", profiles, nodes, dir.c_str());
  return 0;
}
