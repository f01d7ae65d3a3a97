// The database adapter's handling of -R OLD=NEW for source files: meta.db names the file
// at its rewritten path, and the file is copied from there into the database's src/.
#include <gtest/gtest.h>

#include <fstream>

#include "analysis/io.hpp"
#include "common/file.hpp"
#include "formats/db/db.hpp"

namespace hpc::analysis {
namespace {

namespace fs = std::filesystem;

TEST(ReplacePath, FirstMatchingPrefix) {
  std::vector<PathReplacement> r{{"/a/", "/x/"}, {"/a/b/", "/y/"}};
  EXPECT_EQ(replacePath("/a/b/c.c", r), "/x/b/c.c");
  EXPECT_EQ(replacePath("/b/c.c", r), "/b/c.c");
}

TEST(WriteMeta, SourcesFollowReplacePath) {
  fs::path tmp = fs::temp_directory_path() / ("hpc-io-test-" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp / "now" / "src");
  std::ofstream(tmp / "now" / "src" / "small.c") << "int main() {}\n";

  Names names;
  names.file("/measured/src/small.c");
  names.file("/elsewhere/gone.c");
  names.finalize();
  Cct cct;
  cct.finalize();
  MetricTable metrics({"CPUTIME (sec)"}, false);
  std::vector<PathReplacement> replace{{"/measured/", (tmp / "now").string() + "/"}};
  MetaInput meta{"t", &cct, &names, &metrics, 0, &replace};
  fs::create_directories(tmp / "db");
  ASSERT_TRUE(writeMeta(tmp / "db", meta).ok());

  const std::string moved = (tmp / "now" / "src" / "small.c").string();
  EXPECT_TRUE(fs::is_regular_file(tmp / "db" / "src" / fs::path(moved).relative_path()));
  auto file = MappedFile::open(tmp / "db" / "meta.db");
  ASSERT_TRUE(file.ok());
  auto m = db::read_meta(file->view());
  ASSERT_TRUE(m.ok()) << m.status().message();
  std::vector<std::string> paths;
  for (const db::File& f : m->files) paths.push_back(f.path);
  EXPECT_NE(std::find(paths.begin(), paths.end(), moved), paths.end());
  EXPECT_NE(std::find(paths.begin(), paths.end(), "/elsewhere/gone.c"), paths.end());
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace hpc::analysis
