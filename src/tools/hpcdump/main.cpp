// hpcdump: prints any of the project's file formats readably, for debugging.
// Picks the format from the file's leading bytes (or a directory's contents).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "formats/db/db.hpp"
#include "formats/hpcrun/hpcrun.hpp"
#include "formats/structfile/structfile.hpp"

namespace fs = std::filesystem;

static const char kUsage[] =
    "Usage: hpcdump [-h] PATH...\n"
    "Prints the content of HPCToolkit files readably.\n"
    "  PATH  a measurement profile (.hpcrun) or trace (.hpctrace), a structure file\n"
    "        (.hpcstruct), a database file (meta.db, profile.db, cct.db, trace.db),\n"
    "        a database directory, or a measurement directory (every file in it).\n";

static std::string leading_bytes(const fs::path& p, size_t n) {
  std::ifstream f(p, std::ios::binary);
  std::string s(n, '\0');
  f.read(s.data(), static_cast<std::streamsize>(n));
  s.resize(static_cast<size_t>(f.gcount()));
  return s;
}

static hpc::Status dump_one(const fs::path& p) {
  std::error_code ec;
  if (fs::is_directory(p, ec)) {
    if (fs::exists(p / "meta.db")) return hpc::db::dump(p, std::cout);
    hpc::Status first;
    bool any = false;
    std::vector<fs::path> files;
    for (auto& e : fs::directory_iterator(p, ec))
      if (e.is_regular_file()) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (auto& f : files) {
      auto ext = f.extension().string();
      if (ext != ".hpcrun" && ext != ".hpctrace") continue;
      any = true;
      std::cout << "== " << f.string() << "\n";
      auto s = dump_one(f);
      if (!s.ok() && first.ok()) first = s;
      if (!s.ok()) std::cerr << "hpcdump: " << s.message() << "\n";
    }
    if (!any) return hpc::Status::error(p.string() + ": neither a database nor a measurement directory");
    return first;
  }
  if (!fs::exists(p, ec)) return hpc::Status::error(p.string() + ": no such file or directory");
  std::string head = leading_bytes(p, 64);
  if (head.rfind("HPCRUN-", 0) == 0) return hpc::hpcrun::dump(p, std::cout);
  if (head.rfind("HPCTOOLKIT", 0) == 0) return hpc::db::dump(p, std::cout);
  if (head.find("<?xml") != std::string::npos || head.find("<HPCToolkitStructure") != std::string::npos)
    return hpc::structfile::dump(p, std::cout);
  return hpc::Status::error(p.string() + ": unknown format (expected HPCRUN-, HPCTOOLKIT or XML structure)");
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  int rc = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "-h") || !std::strcmp(argv[i], "--help")) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    auto s = dump_one(argv[i]);
    if (!s.ok()) {
      std::cerr << "hpcdump: " << s.message() << "\n";
      rc = 1;
    }
  }
  return rc;
}
