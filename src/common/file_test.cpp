#include "common/file.hpp"

#include <gtest/gtest.h>

#include <fstream>

using namespace hpc;
namespace fs = std::filesystem;

TEST(AtomicOutput, UncommittedLeavesNothingAndCommitReplaces) {
  fs::path dir = fs::temp_directory_path() / ("hpc-file-test-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::path target = dir / "out.db";
  {
    AtomicOutput out(target, AtomicOutput::Kind::File);
    ASSERT_TRUE(out.begin().ok());
    std::ofstream(out.temp_path()) << "partial";
  }
  EXPECT_FALSE(fs::exists(target));
  EXPECT_TRUE(fs::is_empty(dir));

  ASSERT_TRUE(write_file_atomically(target, std::string_view("one")).ok());
  ASSERT_TRUE(write_file_atomically(target, std::string_view("two")).ok());
  EXPECT_EQ(*read_text_file(target), "two");

  fs::path ddir = dir / "db.d";
  for (int i = 0; i < 2; ++i) {
    AtomicOutput out(ddir, AtomicOutput::Kind::Directory);
    ASSERT_TRUE(out.begin().ok());
    std::ofstream(out.temp_path() / "f") << i;
    ASSERT_TRUE(out.commit().ok());
  }
  EXPECT_EQ(*read_text_file(ddir / "f"), "1");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 2);

  auto m = MappedFile::open(target);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->bytes().size(), 3u);
  auto missing = MappedFile::open(dir / "nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("nope: cannot open"), std::string::npos);
  fs::remove_all(dir);
}
