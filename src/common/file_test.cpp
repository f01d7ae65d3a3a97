#include "common/file.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <vector>

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

TEST(SpaceAhead, AllocatesAheadAndTrimsToTheBytesWritten) {
  fs::path dir = fs::temp_directory_path() / ("hpc-space-test-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::path file = dir / "f";
  int fd = ::open(file.c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  SpaceAhead space;
  // Written in 64 KiB pieces, as the database's writers do: 3 MiB and 1000 bytes in all, the
  // first piece last (a header written at the end).
  const size_t total = (size_t(3) << 20) + 1000, piece = size_t(64) << 10;
  std::vector<uint8_t> bytes(total);
  for (size_t i = 0; i < total; ++i) bytes[i] = uint8_t(i * 7 + 1);
  auto put = [&](size_t at) {
    const size_t n = std::min(piece, total - at);
    space.cover(fd, at + n);
    ASSERT_EQ(::pwrite(fd, bytes.data() + at, n, off_t(at)), ssize_t(n));
  };
  for (size_t at = piece; at < total; at += piece) put(at);
  put(0);
  struct stat st {};
  ASSERT_EQ(::fstat(fd, &st), 0);
  EXPECT_EQ(size_t(st.st_size), total);
  const bool allocates = uint64_t(st.st_blocks) * 512 > total + (uint64_t(256) << 10);
  ASSERT_TRUE(space.trim(fd, file).ok());
  ASSERT_EQ(::fstat(fd, &st), 0);
  EXPECT_EQ(size_t(st.st_size), total);
  // What was given ahead (about 1 MiB more here) is back, where the file system gives space
  // ahead at all; the slack is for the extent tree's own blocks (a file in many extents, on a
  // busy file system, gets one).
  EXPECT_LE(uint64_t(st.st_blocks) * 512, total + (uint64_t(64) << 10));
  if (!allocates) std::printf("note: this file system gave no space ahead\n");
  ::close(fd);
  auto back = read_text_file(file);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(std::vector<uint8_t>(back->begin(), back->end()), bytes);
  fs::remove_all(dir);
}
