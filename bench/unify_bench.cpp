// hpcprof's unification of one profile's tree into the shared CCT (Expander::unify) alone,
// on trees shaped like gen_measurements' (each node below one of the 24 made before it, paths
// of about 800 contexts at 20,000 nodes; with `bushy`, below any node made before it, paths of
// about 10; 8 load modules, no structure), listed four ways: the node list byte-equal to the last one
// (not even compared), the same order in lists that are not byte-equal, each list lacking
// about 1 % of the leaves (`varied`), and each tree in an order of its own (`shuffled`).
// Prints nanoseconds per node, best of several repeats over 32 profiles (a whole hpcprof
// run varies too much on a virtual machine to see a change of a tenth in this step). The
// trees are decoded already: reading and decoding the files is not in these figures.
//
// usage: unify_bench [nodes=20000 [equal|same|varied|shuffled|all [deep|bushy]]]
//   (one listing, or all four; the default shape is deep)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "analysis/cct.hpp"
#include "analysis/expand.hpp"
#include "analysis/heap.hpp"
#include "analysis/model.hpp"

using namespace hpc::analysis;

namespace {

struct Shape {
  std::vector<uint32_t> parent;  // by position; position 0 is the root, 1 the main thread
  std::vector<uint16_t> module;
  std::vector<uint64_t> offset;
  std::vector<std::vector<uint32_t>> children;
};

Shape makeShape(uint32_t nodes, bool bushy, std::mt19937_64& rng) {
  Shape s;
  s.parent = {0, 0};
  s.module = {0, 0};
  s.offset = {0, 0};
  for (uint32_t i = 2; i < nodes; ++i) {
    s.parent.push_back(i == 2  ? 1
                       : bushy ? uint32_t(1 + rng() % uint64_t(i - 1))
                               : uint32_t(std::max<int64_t>(1, int64_t(i) - 1 - int64_t(rng() % 24))));
    s.module.push_back(uint16_t(1 + rng() % 8));
    s.offset.push_back(0x1000 + (rng() % 40000) * 4);
  }
  s.children.resize(nodes);
  for (uint32_t i = 1; i < nodes; ++i) s.children[s.parent[i]].push_back(i);
  return s;
}

enum class Kind { Equal, Same, Varied, Shuffled };

// One profile's node list: `order` lists shape positions; ids are positions + 1 (Same,
// Varied) or list positions + 1 (Shuffled, as a thread numbers the nodes it reaches).
std::vector<TreeNode> listing(const Shape& s, Kind kind, std::mt19937_64& rng) {
  const size_t n = s.parent.size();
  std::vector<uint32_t> order;
  std::vector<uint32_t> idOf(n);
  if (kind == Kind::Shuffled) {
    std::vector<uint32_t> stack{0};
    while (!stack.empty()) {
      const uint32_t at = stack.back();
      stack.pop_back();
      order.push_back(at);
      std::vector<uint32_t> kids = s.children[at];
      std::shuffle(kids.begin(), kids.end(), rng);
      stack.insert(stack.end(), kids.begin(), kids.end());
    }
    for (size_t k = 0; k < order.size(); ++k) idOf[order[k]] = uint32_t(k + 1);
  } else {
    for (uint32_t i = 0; i < n; ++i) {
      idOf[i] = i + 1;
      if (kind == Kind::Varied && i > 1 && s.children[i].empty() && rng() % 100 == 0) continue;
      order.push_back(i);
    }
  }
  std::vector<TreeNode> out;
  out.reserve(order.size());
  for (uint32_t at : order) {
    TreeNode t;
    t.id = idOf[at];
    t.parent = at == 0 ? 0 : idOf[s.parent[at]];
    t.module = s.module[at];
    t.offset = s.offset[at];
    t.placeholder = at == 0 ? Placeholder::Root : at == 1 ? Placeholder::MainThread : Placeholder::None;
    out.push_back(t);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  setUpHeap();  // as hpcprof: the heap on huge pages
  const uint32_t nodes = argc > 1 ? uint32_t(std::atoi(argv[1])) : 20000;
  const std::string only = argc > 2 && std::string(argv[2]) != "all" ? argv[2] : "";
  const bool bushy = argc > 3 && std::string(argv[3]) == "bushy";
  std::mt19937_64 rng(7);
  const Shape shape = makeShape(nodes, bushy, rng);
  constexpr size_t kProfiles = 32;
  constexpr int kRepeats = 15;
  std::vector<std::pair<uint16_t, std::string>> loadMap;
  for (uint16_t m = 1; m <= 8; ++m) loadMap.emplace_back(m, "/opt/synthetic/lib" + std::to_string(m) + ".so");
  const std::tuple<Kind, const char*, const char*> kinds[] = {
      {Kind::Equal, "equal", "byte-equal lists"},
      {Kind::Same, "same", "same order, not byte-equal"},
      {Kind::Varied, "varied", "varied (1 % of leaves left out)"},
      {Kind::Shuffled, "shuffled", "shuffled (own order each)"}};
  for (const auto& [kind, name, label] : kinds) {
    if (!only.empty() && only != name) continue;
    std::vector<std::vector<TreeNode>> lists;
    for (size_t p = 0; p < kProfiles; ++p)
      lists.push_back(listing(shape, kind == Kind::Equal ? Kind::Same : kind, rng));
    Cct cct;
    Names names;
    Expander expander(cct, names, nullptr);
    NodeContexts contexts;
    ProfileTree tree;
    tree.loadMap = loadMap;
    std::vector<uint32_t> maxIds;
    for (const auto& l : lists) {
      uint32_t most = 0;
      for (const TreeNode& t : l) most = std::max(most, t.id);
      maxIds.push_back(most);
    }
    uint64_t nextId = 0;
    size_t total = 0;
    for (const auto& l : lists) total += l.size();
    // As the reader fills one ProfileTree: a list byte-equal to the last keeps its nodes
    // and id; any other moves the last one to previousNodes (lists are moved, not copied:
    // the copy is the reader's decoding, not unification).
    int previousOwner = -1, owner = -1;
    // Returns the time of unify() alone; the list is read once first, as decoding it would
    // have left it in the caches.
    auto feed = [&](size_t p, bool& ok) {
      if (kind != Kind::Equal || tree.nodesId == 0) {
        if (previousOwner >= 0) lists[size_t(previousOwner)] = std::move(tree.previousNodes);
        tree.previousNodes = std::move(tree.nodes);
        tree.previousNodesId = tree.nodesId;
        previousOwner = owner;
        tree.nodes = std::move(lists[p]);
        owner = int(p);
        tree.nodesId = ++nextId;
        tree.maxId = maxIds[p];
        tree.maxIdOf = tree.nodesId;
      }
      uint64_t sum = 0;
      for (const TreeNode& t : tree.nodes) sum += t.id + t.offset;
      asm volatile("" : : "r"(sum));
      const auto t0 = std::chrono::steady_clock::now();
      ok = expander.unify(tree, contexts).ok();
      return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    };
    bool ok = true;
    for (size_t p = 0; p < kProfiles && ok; ++p) feed(p, ok);  // warm-up: makes the tree and the templates
    if (!ok) return std::fprintf(stderr, "unify failed\n"), 1;
    double best = 1e30;
    for (int rep = 0; rep < kRepeats; ++rep) {
      double ns = 0;
      for (size_t p = 0; p < kProfiles; ++p) ns += feed(p, ok);
      best = std::min(best, ns / double(total));
    }
    cct.finalize();
    std::printf("unify, %u nodes (%s), %-32s %6.2f ns per node (best of %d x %zu profiles), %u contexts\n", nodes,
                bushy ? "bushy" : "deep", label,
                best, kRepeats, kProfiles, cct.size());
  }
  return 0;
}
