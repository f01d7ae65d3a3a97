// Writes a large synthetic database v4 directly (through formats/db's writers), for the
// viewer benchmarks: a bushy calling-context tree of alternating function and call-site
// line contexts, per-profile values propagated in the point/function/lex_aware/execution
// scopes, a summary profile (sum, count, min, max), cct.db and a trace per profile.
//   gen_viewer_db DIR [contexts=1000000] [profiles=1000] [samples=10000] [leaves=100]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "common/file.hpp"
#include "formats/db/db.hpp"

namespace fs = std::filesystem;
using namespace hpc::db;

namespace {

struct Flat {
  std::vector<uint32_t> parent, first, next;  // child lists as linked siblings
  std::vector<uint8_t> isCall;               // 1: function context, 0: line context
  std::vector<uint32_t> attr;                // function index or line number
};

Context build(const Flat& f, uint32_t id, uint32_t nFiles, uint32_t nFns) {
  Context c;
  c.ctxId = id;
  if (f.isCall[id]) {
    c.relation = 1, c.lexicalType = 0, c.propagation = 0, c.function = f.attr[id];
  } else {
    c.relation = 0, c.lexicalType = 2, c.propagation = 1;
    c.file = f.attr[f.parent[id]] % nFiles;
    c.line = f.attr[id];
  }
  for (uint32_t k = f.first[id]; k != UINT32_MAX; k = f.next[k]) c.children.push_back(build(f, k, nFiles, nFns));
  return c;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

int fail(const hpc::Status& s) {
  std::fprintf(stderr, "gen_viewer_db: %s\n", s.message().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: gen_viewer_db DIR [contexts] [profiles] [samples per trace] [leaves per profile]\n");
    return 2;
  }
  fs::path dir = argv[1];
  const uint32_t nCtx = argc > 2 ? uint32_t(std::atol(argv[2])) : 1000000;
  const uint32_t nProf = argc > 3 ? uint32_t(std::atol(argv[3])) : 1000;
  const uint32_t nSamples = argc > 4 ? uint32_t(std::atol(argv[4])) : 10000;
  const uint32_t nLeaves = argc > 5 ? uint32_t(std::atol(argv[5])) : 100;
  const uint32_t nFns = 20000, nFiles = 500, nModules = 8;
  auto t0 = std::chrono::steady_clock::now();
  std::mt19937_64 rng(42);

  // Tree by breadth: ctxId 0 root, 1 the entry point, 2 main; then each function context
  // gets 1-4 line children and each line context 0-3 calls, until nCtx ids are used.
  Flat f;
  auto add = [&](uint32_t parent, bool call, uint32_t attr) {
    uint32_t id = uint32_t(f.parent.size());
    f.parent.push_back(parent), f.first.push_back(UINT32_MAX), f.next.push_back(UINT32_MAX);
    f.isCall.push_back(call), f.attr.push_back(attr);
    if (parent != UINT32_MAX) f.next[id] = f.first[parent], f.first[parent] = id;
    return id;
  };
  add(UINT32_MAX, 0, 0);  // root
  add(0, 0, 0);           // entry point
  add(1, 1, 0);           // main
  std::vector<uint32_t> frontier{2}, nextFrontier;
  while (f.parent.size() < nCtx && !frontier.empty()) {
    nextFrontier.clear();
    for (uint32_t p : frontier) {
      uint32_t kids = f.isCall[p] ? 1 + uint32_t(rng() % 4) : uint32_t(rng() % 4);
      for (uint32_t k = 0; k < kids && f.parent.size() < nCtx; ++k)
        nextFrontier.push_back(f.isCall[p] ? add(p, 0, 1 + uint32_t(rng() % 2000)) : add(p, 1, uint32_t(rng() % nFns)));
    }
    std::swap(frontier, nextFrontier);
  }
  const uint32_t n = uint32_t(f.parent.size());

  Meta meta;
  meta.general = {"synthetic viewer benchmark", "gen_viewer_db"};
  meta.idNames = {"SUMMARY", "NODE", "RANK", "THREAD", "GPUDEVICE", "GPUCONTEXT", "GPUSTREAM", "CORE"};
  meta.scopes = {{"point", 1, 255}, {"function", 3, 0}, {"lex_aware", 0, 255}, {"execution", 2, 255}};
  Metric m;
  m.name = "CPUTIME (sec)";
  for (uint16_t s = 0; s < 4; ++s) m.scopeInsts.push_back({s, s}), m.summaries.push_back({s, "$$", 0, s});
  m.summaries.push_back({3, "1", 0, 4});
  m.summaries.push_back({3, "$$", 1, 5});
  m.summaries.push_back({3, "$$", 2, 6});
  meta.metrics = {m};
  for (uint32_t i = 0; i < nModules; ++i) meta.modules.push_back({0, "/opt/synthetic/lib" + std::to_string(i) + ".so"});
  for (uint32_t i = 0; i < nFiles; ++i) meta.files.push_back({0, "/src/synthetic/file" + std::to_string(i) + ".c"});
  for (uint32_t i = 0; i < nFns; ++i)
    meta.functions.push_back({"fn_" + std::to_string(i), i % nModules, 0x1000 + 64ull * i, i % nFiles, 1 + i % 900, 0});
  meta.functions[0].name = "main";
  EntryPoint ep;
  ep.ctxId = 1, ep.entryPoint = 1, ep.prettyName = "main thread";
  ep.children.push_back(build(f, 2, nFiles, nFns));
  meta.entryPoints.push_back(std::move(ep));
  fs::create_directories(dir);
  if (auto s = write_meta(meta, dir / "meta.db"); !s) return fail(s);
  meta = Meta();
  std::printf("meta.db: %u contexts (%.1f s)\n", n, seconds_since(t0));

  // Hot contexts: leaves of each profile are drawn from a shared pool (SPMD-like).
  std::vector<uint32_t> pool(std::max<uint32_t>(nLeaves * 20, 1000));
  for (auto& c : pool) c = 2 + uint32_t(rng() % (n - 2));
  struct Tuple {
    uint32_t ctx;
    uint16_t metric;
    uint32_t prof;
    double v;
  };
  std::vector<Tuple> all;
  std::vector<double> sum(size_t(n) * 4, 0), mn(n, 1e300), mx(n, 0);
  std::vector<uint32_t> cnt(n, 0);
  std::vector<std::vector<uint32_t>> profLeaves(nProf + 1);
  ProfileDbWriter pw;
  if (auto s = pw.begin(dir / "profile.db", nProf + 1); !s) return fail(s);
  std::vector<double> acc(size_t(n) * 4, 0);
  std::vector<uint32_t> touched;
  for (uint32_t p = 1; p <= nProf; ++p) {
    touched.clear();
    auto bump = [&](uint32_t c, int metric, double v) {
      if (acc[size_t(c) * 4 + 0] == 0 && acc[size_t(c) * 4 + 1] == 0 && acc[size_t(c) * 4 + 3] == 0) touched.push_back(c);
      acc[size_t(c) * 4 + metric] += v;
    };
    for (uint32_t l = 0; l < nLeaves; ++l) {
      uint32_t leaf = pool[rng() % pool.size()];
      profLeaves[p].push_back(leaf);
      double v = 0.001 * double(1 + rng() % 100);
      bump(leaf, 0, v);
      // function and lex_aware: up through contexts whose propagation bit is set (lines).
      uint32_t c = leaf;
      bump(c, 1, v), acc[size_t(c) * 4 + 2] += v;
      while (!f.isCall[c] && c > 1) c = f.parent[c], bump(c, 1, v), acc[size_t(c) * 4 + 2] += v;
      for (c = leaf; c != UINT32_MAX; c = f.parent[c]) bump(c, 3, v);
    }
    std::sort(touched.begin(), touched.end());
    ProfileValues pv;
    for (uint32_t c : touched) {
      for (uint16_t k = 0; k < 4; ++k) {
        double v = acc[size_t(c) * 4 + k];
        if (v == 0) continue;
        pv.push(k, v);
        all.push_back({c, k, p, v});
        sum[size_t(c) * 4 + k] += v;
        if (k == 3) cnt[c]++, mn[c] = std::min(mn[c], v), mx[c] = std::max(mx[c], v);
        acc[size_t(c) * 4 + k] = 0;
      }
      pv.close(c);
    }
    std::vector<Identifier> id{{1, 1, 0, 0x5eed}, {3, 0, p - 1, p - 1}};
    if (auto s = pw.write(p, 0, id, pv); !s) return fail(s);
  }
  ProfileValues summary;
  for (uint32_t c = 0; c < n; ++c) {
    if (sum[size_t(c) * 4 + 3] == 0) continue;
    for (uint16_t k = 0; k < 4; ++k)
      if (double v = sum[size_t(c) * 4 + k]; v != 0) summary.push(k, v);
    summary.push(4, cnt[c]), summary.push(5, mn[c]), summary.push(6, mx[c]);
    summary.close(c);
  }
  if (auto s = pw.write(0, 1, std::nullopt, summary); !s) return fail(s);
  if (auto s = pw.finish(); !s) return fail(s);
  std::printf("profile.db: %u profiles, %zu values (%.1f s)\n", nProf, all.size(), seconds_since(t0));

  std::sort(all.begin(), all.end(), [](const Tuple& a, const Tuple& b) {
    return a.ctx != b.ctx ? a.ctx < b.ctx : a.metric != b.metric ? a.metric < b.metric : a.prof < b.prof;
  });
  CctDbWriter cw;
  if (auto s = cw.begin(dir / "cct.db", n); !s) return fail(s);
  for (size_t i = 0; i < all.size();) {
    uint32_t c = all[i].ctx;
    ContextValues cv;
    while (i < all.size() && all[i].ctx == c) {
      uint16_t k = all[i].metric;
      while (i < all.size() && all[i].ctx == c && all[i].metric == k) cv.push(all[i].prof, all[i].v), ++i;
      cv.close(k);
    }
    if (auto s = cw.write(c, cv); !s) return fail(s);
  }
  if (auto s = cw.finish(); !s) return fail(s);
  all = {};
  std::printf("cct.db written (%.1f s)\n", seconds_since(t0));

  // Traces: one line per profile, samples 1 ms apart with jitter, each at one of the
  // profile's leaves, with runs (a sample repeats the previous context half the time).
  TraceDbWriter tw;
  if (auto s = tw.begin(dir / "trace.db", nProf); !s) return fail(s);
  std::vector<TraceElem> line(nSamples);
  const uint64_t base = 1700000000000000000ull;
  for (uint32_t p = 1; p <= nProf; ++p) {
    uint64_t t = base + rng() % 1000000;
    uint32_t ctx = profLeaves[p][0];
    for (uint32_t i = 0; i < nSamples; ++i) {
      if (rng() % 2) ctx = profLeaves[p][rng() % profLeaves[p].size()];
      line[i] = {t, i + 1 == nSamples ? 0 : ctx};
      t += 900000 + rng() % 200000;
    }
    if (auto s = tw.write(p - 1, p, line); !s) return fail(s);
  }
  if (auto s = tw.finish(); !s) return fail(s);
  std::printf("trace.db: %u lines x %u samples = %llu records (%.1f s)\n", nProf, nSamples,
              (unsigned long long)nProf * nSamples, seconds_since(t0));
  return 0;
}
