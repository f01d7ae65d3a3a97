#include "common/file.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>
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

// BlockFile: every read equals the file's bytes, across blocks and past the cache's slots,
// with two files interleaved, from another thread at once, past the end (zeros), and after
// the thread's cache is dropped.
TEST(BlockFile, ReadsEqualTheFileAcrossBlocksFilesAndThreads) {
  fs::path dir = fs::temp_directory_path() / ("hpc-blockfile-test-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const size_t n = BlockFile::kBlock * BlockFile::kSlots * 3 + 123;  // thrice the cache, not whole blocks
  std::vector<uint8_t> a(n), b(n / 2);
  for (size_t i = 0; i < n; ++i) a[i] = uint8_t(i * 2654435761u >> 13);
  for (size_t i = 0; i < b.size(); ++i) b[i] = uint8_t(i * 40503u >> 7);
  std::ofstream(dir / "a", std::ios::binary).write(reinterpret_cast<const char*>(a.data()), std::streamsize(n));
  std::ofstream(dir / "b", std::ios::binary).write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  auto fa = BlockFile::open(dir / "a");
  auto fb = BlockFile::open(dir / "b");
  ASSERT_TRUE(fa.ok() && fb.ok());
  EXPECT_EQ(fa->size(), n);
  auto missing = BlockFile::open(dir / "none");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find((dir / "none").string()), std::string::npos);

  auto check = [&](uint64_t seed, int rounds) {
    uint64_t x = seed;
    for (int r = 0; r < rounds; ++r) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      const bool useA = (x >> 60) & 1;
      const std::vector<uint8_t>& want = useA ? a : b;
      const BlockFile& f = useA ? *fa : *fb;
      const uint64_t off = (x >> 20) % (want.size() + 64);  // sometimes past the end
      const size_t len = size_t((x >> 8) % (2 * BlockFile::kBlock + 9));  // sometimes over two block ends
      std::vector<uint8_t> got(len, 0xee);
      f.read(off, got.data(), len);
      for (size_t i = 0; i < len; ++i)
        if (got[i] != (off + i < want.size() ? want[off + i] : 0)) {
          ADD_FAILURE() << (useA ? "a" : "b") << " at " << off + i << " (read of " << len << " at " << off << ")";
          return;
        }
      uint64_t v = 0;
      std::memcpy(&v, want.data() + std::min<uint64_t>(off, want.size() - 8), 8);
      if (f.load<uint64_t>(std::min<uint64_t>(off, want.size() - 8)) != v) {
        ADD_FAILURE() << "load<uint64_t> at " << off;
        return;
      }
    }
  };
  std::thread other([&] { check(7, 3000); });
  check(1, 3000);
  BlockFile::drop_thread_cache();
  check(3, 500);
  other.join();
  // Moved: the same reads.
  BlockFile moved = std::move(*fa);
  uint32_t w = 0;
  std::memcpy(&w, a.data() + BlockFile::kBlock - 2, 4);  // across the first block's end
  EXPECT_EQ(moved.load<uint32_t>(BlockFile::kBlock - 2), w);
  fs::remove_all(dir);
}
