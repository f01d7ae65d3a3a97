#include <algorithm>
#include <set>
#include <system_error>

#include "analysis/io.hpp"

namespace hpc::analysis {

namespace fs = std::filesystem;

namespace {

// `traces`: the directory's .hpctrace files, when it was listed (no stat per profile).
void addProfile(Inputs& in, const fs::path& p, const std::set<fs::path>* traces = nullptr) {
  fs::path trace = p;
  trace.replace_extension(".hpctrace");
  std::error_code ec;
  in.profiles.push_back(p);
  const bool found = traces ? traces->count(trace) != 0 : fs::is_regular_file(trace, ec);
  in.traces.push_back(found ? trace : fs::path());
}

}  // namespace

Expected<Inputs> discoverInputs(const std::vector<fs::path>& measurements, bool ignoreStructs) {
  Inputs in;
  for (const fs::path& m : measurements) {
    std::error_code ec;
    if (fs::is_regular_file(m, ec)) {
      if (m.extension() != ".hpcrun")
        return Status::error(m.string() + ": not a profile (.hpcrun) nor a measurement directory");
      addProfile(in, m);
      continue;
    }
    if (!fs::is_directory(m, ec))
      return Status::error(m.string() + ": no such measurement directory or profile");
    std::vector<fs::path> found;
    std::set<fs::path> traces;
    for (const auto& e : fs::directory_iterator(m, ec)) {
      if (!e.is_regular_file()) continue;
      if (e.path().extension() == ".hpcrun") found.push_back(e.path());
      else if (e.path().extension() == ".hpctrace") traces.insert(e.path());
    }
    if (ec) return Status::error(m.string() + ": cannot list: " + ec.message());
    // Name order: the database's profile order must not depend on the file system.
    std::sort(found.begin(), found.end());
    for (const fs::path& p : found) addProfile(in, p, &traces);
    if (ignoreStructs) continue;
    fs::path sdir = m / "structs";
    std::vector<fs::path> structs;
    if (fs::is_directory(sdir, ec))
      for (const auto& e : fs::directory_iterator(sdir, ec))
        if (e.is_regular_file() && e.path().extension() == ".hpcstruct") structs.push_back(e.path());
    std::sort(structs.begin(), structs.end());
    in.structs.insert(in.structs.end(), structs.begin(), structs.end());
  }
  if (in.profiles.empty()) return Status::error("no profiles (.hpcrun) in the measurements given");
  return in;
}

}  // namespace hpc::analysis
