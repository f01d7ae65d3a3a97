#include "structure/measdir.hpp"

#include <tbb/parallel_for_each.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <set>

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
    auto prof = hpcrun::read_profile(p);
    std::lock_guard lock(mu);
    if (!prof.ok()) {
      std::fprintf(stderr, "hpcstruct: warning: skipping %s\n", prof.status().message().c_str());
      return;
    }
    // The modules this profile uses: flagged 1 in its load map (the reference's hpcrun and
    // ours mark them) or named by one of its contexts (writers that do not mark them).
    std::set<uint16_t> referenced;
    for (const auto& n : prof->nodes)
      if (n.lm_id != 0) referenced.insert(n.lm_id);
    for (const auto& lm : prof->load_modules)
      if ((lm.flags & 1) || referenced.count(lm.id)) names.insert(lm.name);
  });
  std::vector<std::string> out;
  for (const std::string& n : names) {
    if (n.rfind("vdso/", 0) == 0 || n.empty() || n[0] == '[') continue;
    fs::path p = fs::path(n).is_absolute() ? fs::path(n) : dir / n;  // gpubins/ are relative
    // A GPU binary named by the path of the directory where it was measured: the copy in
    // this directory's gpubins/ (the directory was moved or copied since).
    if (!fs::is_regular_file(p, ec) && fs::path(n).parent_path().filename() == "gpubins")
      p = dir / "gpubins" / fs::path(n).filename();
    if (fs::is_regular_file(p, ec)) out.push_back(p.string());
  }
  return out;
}

}  // namespace hpc::structure
