#include "structure/measdir.hpp"

#include <tbb/parallel_for_each.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <set>

#include "common/file.hpp"
#include "formats/hpcrun/hpcrun.hpp"

namespace hpc::structure {

namespace fs = std::filesystem;

Expected<std::vector<std::string>> measured_binaries(const fs::path& dir) {
  std::vector<fs::path> profiles;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().extension() == ".hpcrun") profiles.push_back(e.path());
  if (ec) return Status::error(dir.string() + ": cannot list: " + ec.message());
  if (profiles.empty()) return Status::error(dir.string() + ": no profiles (.hpcrun) in this directory");
  std::mutex mu;
  std::set<std::string> names;
  tbb::parallel_for_each(profiles.begin(), profiles.end(), [&](const fs::path& p) {
    // Its load map and nodes (not its values), and the modules it uses found outside the
    // lock: flagged 1 in its load map (the reference's hpcrun and ours mark them) or named by
    // one of its contexts (writers that do not mark them), the ids in a bitset (a set of
    // them, filled under the lock, took 0.6 s for 500 profiles of 20,000 nodes).
    auto prof = hpcrun::read_profile(p, {.nodes = true, .values = false});
    if (!prof.ok()) {
      std::lock_guard lock(mu);
      std::fprintf(stderr, "hpcstruct: warning: skipping %s\n", prof.status().message().c_str());
      return;
    }
    std::vector<uint64_t> referenced(65536 / 64, 0);
    for (const auto& n : prof->nodes) referenced[n.lm_id / 64] |= uint64_t(1) << (n.lm_id % 64);
    std::vector<const std::string*> used;
    for (const auto& lm : prof->load_modules)
      if ((lm.flags & 1) || (lm.id != 0 && (referenced[lm.id / 64] >> (lm.id % 64)) & 1)) used.push_back(&lm.name);
    std::lock_guard lock(mu);
    for (const std::string* n : used) names.insert(*n);
  });
  std::vector<std::string> out;
  const int64_t ended = measurement_end_ns(dir);
  for (const std::string& n : names) {
    // vdso/ copies, jit/ perf maps (code outside every module) and python/ tables of code
    // objects are hpcprof's to read.
    if (n.rfind("vdso/", 0) == 0 || n.rfind("jit/", 0) == 0 || n.rfind("python/", 0) == 0 || n.empty() ||
        n[0] == '[')
      continue;
    fs::path p = fs::path(n).is_absolute() ? fs::path(n) : dir / n;  // gpubins/ are relative
    // A GPU binary named by the path of the directory where it was measured: the copy in
    // this directory's gpubins/ (the directory was moved or copied since).
    if (!fs::is_regular_file(p, ec) && fs::path(n).parent_path().filename() == "gpubins")
      p = dir / "gpubins" / fs::path(n).filename();
    if (!fs::is_regular_file(p, ec)) continue;
    out.push_back(p.string());
    // A binary rebuilt or upgraded since the run: its structure is the new build's.
    if (std::string w = changed_since_measured(p.string(), ended); !w.empty())
      std::fprintf(stderr, "hpcstruct: warning: %s\n", w.c_str());
  }
  return out;
}

}  // namespace hpc::structure
