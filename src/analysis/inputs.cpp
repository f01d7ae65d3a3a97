#include <algorithm>
#include <string>
#include <string_view>
#include <unordered_set>
#include <system_error>

#include "analysis/io.hpp"

namespace hpc::analysis {

namespace fs = std::filesystem;

namespace {

void addProfile(Inputs& in, const fs::path& p) {
  fs::path trace = p;
  trace.replace_extension(".hpctrace");
  std::error_code ec;
  in.profiles.push_back(p);
  in.traces.push_back(fs::is_regular_file(trace, ec) ? trace : fs::path());
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
    // File names as strings (a std::filesystem::path splits itself into components, and
    // comparing two compares those: thousands of allocations for a directory of profiles).
    std::vector<std::string> found;
    std::unordered_set<std::string> traces;
    auto endsWith = [](const std::string& s, std::string_view tail) {
      return s.size() > tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
    };
    for (const auto& e : fs::directory_iterator(m, ec)) {
      if (!e.is_regular_file()) continue;
      std::string name = e.path().filename().string();
      if (endsWith(name, ".hpcrun")) found.push_back(std::move(name));
      else if (endsWith(name, ".hpctrace")) traces.insert(std::move(name));
    }
    if (ec) return Status::error(m.string() + ": cannot list: " + ec.message());
    // Name order: the database's profile order must not depend on the file system.
    std::sort(found.begin(), found.end());
    for (const std::string& name : found) {
      const std::string trace = name.substr(0, name.size() - 7) + ".hpctrace";
      in.profiles.push_back(m / name);
      in.traces.push_back(traces.count(trace) ? m / trace : fs::path());
    }
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
