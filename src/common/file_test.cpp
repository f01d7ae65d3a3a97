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

// Each counted write moves at most kMaxWriteBytes (a larger request is written in part, as
// the callers' loops expect of any write), and the bytes land where they were asked to.
TEST(CountedWrites, AtMostTheMostAWriteAndInPlace) {
  fs::path path = fs::temp_directory_path() / ("hpc-counted-" + std::to_string(getpid()));
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0);
  std::vector<uint8_t> big(kMaxWriteBytes * 3 + 100);
  for (size_t i = 0; i < big.size(); ++i) big[i] = uint8_t(i * 7 + i / 251);
  // pwrite: written in pieces of the most, on from where each stopped.
  size_t done = 0;
  int calls = 0;
  while (done < big.size()) {
    const ssize_t n = counted_pwrite(fd, big.data() + done, big.size() - done, off_t(done));
    ASSERT_GT(n, 0);
    ASSERT_LE(size_t(n), kMaxWriteBytes);
    done += size_t(n);
    ++calls;
  }
  EXPECT_EQ(calls, 4);
  // pwritev after it: pieces together up to the most, one larger than it cut short.
  std::vector<uint8_t> a(1000, 0xa1), b(kMaxWriteBytes, 0xb2), c(5000, 0xc3);
  iovec iov[3] = {{a.data(), a.size()}, {b.data(), b.size()}, {c.data(), c.size()}};
  const off_t at = off_t(big.size());
  EXPECT_EQ(counted_pwritev(fd, iov, 3, at), ssize_t(a.size()));  // a + b is more than the most
  EXPECT_EQ(counted_pwritev(fd, iov + 1, 2, at + off_t(a.size())), ssize_t(kMaxWriteBytes));
  EXPECT_EQ(counted_pwritev(fd, iov + 2, 1, at + off_t(a.size() + b.size())), ssize_t(c.size()));
  std::vector<uint8_t> back(big.size() + a.size() + b.size() + c.size());
  ASSERT_EQ(::pread(fd, back.data(), back.size(), 0), ssize_t(back.size()));
  std::vector<uint8_t> want = big;
  want.insert(want.end(), a.begin(), a.end());
  want.insert(want.end(), b.begin(), b.end());
  want.insert(want.end(), c.begin(), c.end());
  EXPECT_EQ(back, want);
  ::close(fd);
  fs::remove(path);
}
