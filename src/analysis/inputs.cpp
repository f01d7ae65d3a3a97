#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <unordered_set>

#include "analysis/io.hpp"

namespace hpc::analysis {

namespace fs = std::filesystem;

namespace {

int64_t mtimeNs(const struct stat& st) { return int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec; }

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
  // A profile named twice would count twice in every sum: each directory and profile is
  // taken once, by its canonical path, and a profile whose directory is named too comes with
  // its directory. A profile's path is its directory's, made canonical once for all the
  // profiles named in it (a shell's glob names thousands).
  std::unordered_map<std::string, std::string> canonicalDir;
  auto canonical = [&](const fs::path& p, bool file) -> std::string {
    std::error_code ec;
    const fs::path dir = file ? p.parent_path() : p;
    auto [at, fresh] = canonicalDir.try_emplace(dir.string());
    if (fresh) {
      fs::path c = fs::weakly_canonical(fs::absolute(dir.empty() ? fs::path(".") : dir, ec), ec);
      at->second = ec ? dir.lexically_normal().string() : c.string();
    }
    if (!file) return at->second;
    std::string c = at->second;
    if (c.empty() || c.back() != '/') c += '/';
    return c += p.filename().native();
  };
  // One stat a measurement named (a shell's glob names thousands).
  std::vector<fs::file_type> kinds(measurements.size());
  std::unordered_set<std::string> dirs, seen;
  for (size_t i = 0; i < measurements.size(); ++i) {
    std::error_code ec;
    kinds[i] = fs::status(measurements[i], ec).type();
    if (kinds[i] == fs::file_type::directory) dirs.insert(canonical(measurements[i], false));
  }
  for (size_t i = 0; i < measurements.size(); ++i) {
    const fs::path& m = measurements[i];
    std::error_code ec;
    const bool file = kinds[i] == fs::file_type::regular;
    if (file && m.extension() != ".hpcrun")
      return Status::error(m.string() + ": not a profile (.hpcrun) nor a measurement directory");
    std::string c = canonical(m, file);
    if ((file && dirs.count(canonical(m.parent_path(), false))) || !seen.insert(std::move(c)).second) {
      in.repeated.push_back(m);
      continue;
    }
    if (file) {
      addProfile(in, m);
      struct stat st;
      if (::stat(m.c_str(), &st) == 0) in.measuredUntilNs = std::max(in.measuredUntilNs, mtimeNs(st));
      continue;
    }
    if (kinds[i] != fs::file_type::directory)
      return Status::error(m.string() + ": no such measurement directory or profile");
    // File names as strings, listed with readdir (a std::filesystem::path splits itself into
    // components, and comparing two compares those: thousands of allocations for a directory
    // of profiles; 20,000 files: hpcprof's set-up 37 -> 33 ms, best of 15).
    std::vector<std::string> found, traces;
    DIR* dir = ::opendir(m.c_str());
    if (!dir) return Status::error(m.string() + ": cannot list: " + std::strerror(errno));
    constexpr std::string_view kProfile = ".hpcrun", kTrace = ".hpctrace";
    auto endsWith = [](std::string_view s, std::string_view tail) {
      return s.size() > tail.size() && s.substr(s.size() - tail.size()) == tail;
    };
    int listError = 0;
    // When this directory's last process ended, by its logs, else its profiles: the rule of
    // common/file.hpp's measurement_end_ns, kept in this one listing of the directory.
    int64_t lastLog = 0;
    for (;;) {
      errno = 0;  // readdir says an error only through errno
      const dirent* e = ::readdir(dir);
      if (!e) {
        listError = errno;
        break;
      }
      const std::string_view name(e->d_name);
      if (endsWith(name, ".log")) {
        struct stat st;
        if (::fstatat(::dirfd(dir), e->d_name, &st, 0) == 0) lastLog = std::max(lastLog, mtimeNs(st));
        continue;
      }
      const bool profile = endsWith(name, kProfile);
      if (!profile && !endsWith(name, kTrace)) continue;
      bool regular = e->d_type == DT_REG;
      if (e->d_type == DT_UNKNOWN || e->d_type == DT_LNK) regular = fs::is_regular_file(m / std::string(name), ec);
      if (!regular) continue;
      (profile ? found : traces).emplace_back(name);
    }
    ::closedir(dir);
    if (listError) return Status::error(m.string() + ": cannot list: " + std::strerror(listError));
    // Name order: the database's profile order must not depend on the file system. A trace
    // goes with the profile of its stem.
    // A directory given with no profile in it is a mistake to say (a wrong path, or a run
    // that wrote nothing), not a part of the analysis to leave out quietly.
    if (found.empty())
      return Status::error(m.string() +
                           ": no profiles (.hpcrun) in this measurement directory (hpcrun writes one a thread "
                           "as the measured program ends; it measures no statically linked program, and says so)");
    std::sort(found.begin(), found.end());
    std::sort(traces.begin(), traces.end());
    if (!lastLog) {  // no logs (copied without them): the profiles' own times
      for (const std::string& name : found) {
        struct stat st;
        if (::stat((m / name).c_str(), &st) == 0) lastLog = std::max(lastLog, mtimeNs(st));
      }
    }
    in.measuredUntilNs = std::max(in.measuredUntilNs, lastLog);
    std::string trace;
    for (const std::string& name : found) {
      trace.assign(name, 0, name.size() - kProfile.size());
      trace += kTrace;
      in.profiles.push_back(m / name);
      in.traces.push_back(std::binary_search(traces.begin(), traces.end(), trace) ? m / trace : fs::path());
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
