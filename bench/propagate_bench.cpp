// hpcprof's per-profile propagation (Propagator::run) alone, on a tree shaped like
// gen_measurements' (20,000 contexts, each hung below one of the 24 made before it, so the
// tree is deep) with 600 measured contexts per profile: microseconds per profile, best of
// several repeats (a whole hpcprof run varies too much on a virtual machine to see a change
// of a tenth in this step).
//
// With metrics=N and measured=K, each point's value is on one of the first K of N metrics,
// drawn at random (a GPU measurement's 25 of 93: Propagator::runMasked).
//
// usage: propagate_bench [contexts [points [lexical-percent [metrics [measured]]]]]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "analysis/cct.hpp"
#include "analysis/propagate.hpp"

using namespace hpc::analysis;

int main(int argc, char** argv) {
  const uint32_t contexts = argc > 1 ? uint32_t(std::atoi(argv[1])) : 20000;
  const uint32_t points = argc > 2 ? uint32_t(std::atoi(argv[2])) : 600;
  const uint32_t lexicalPercent = argc > 3 ? uint32_t(std::atoi(argv[3])) : 0;
  const uint32_t metrics = argc > 4 ? std::max(1, std::atoi(argv[4])) : 1;
  const uint32_t measured = argc > 5 ? std::clamp(uint32_t(std::atoi(argv[5])), 1u, metrics) : 1;
  std::mt19937_64 rng(42);
  Cct cct;
  std::vector<Context*> made = {cct.root()};
  for (uint32_t i = 1; i < contexts; ++i) {
    Context* parent = made[i <= 24 ? rng() % i : i - 1 - rng() % 24];
    ContextKey k;
    k.relation = rng() % 100 < lexicalPercent ? Relation::Lexical : Relation::Call;
    k.type = k.relation == Relation::Lexical ? LexType::Line : LexType::Function;
    k.offset = i;
    made.push_back(parent->child(k));
  }
  cct.finalize();
  PropagationShape shape(cct);
  constexpr size_t kProfiles = 64;
  std::vector<std::vector<ContextValue>> profiles(kProfiles);
  for (auto& p : profiles)
    for (uint32_t k = 0; k < points; ++k)
      p.push_back({uint32_t(1 + rng() % (cct.size() - 1)), uint32_t(rng() % measured), double(1 + rng() % 100)});
  Propagator prop(shape, metrics);
  SparseRow row;
  uint64_t values = 0;
  for (const auto& p : profiles) {  // warm-up; sizes the scratch
    prop.run(p, row);
    values += row.size();
  }
  double best = 1e30;
  for (int rep = 0; rep < 30; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (const auto& p : profiles) prop.run(p, row);
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, us / kProfiles);
  }
  std::printf("propagation: %u contexts, %u points, %u%% lexical edges, %u of %u metrics measured: %.1f us per "
              "profile (best of 30 x %zu profiles), %.0f values per profile\n",
              cct.size(), points, lexicalPercent, measured, metrics, best, kProfiles, double(values) / kProfiles);
  return 0;
}
