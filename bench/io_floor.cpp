// The I/O floor the hpcprof benchmarks hold hpcprof against, measured by compiled code so that
// the floor is the system's, not an interpreter's:
//   io_floor read DIR          reads every regular file of DIR (not below) to its end, in
//                              1 MiB reads into one page-aligned buffer; prints "SECONDS BYTES"
//   io_floor write DIR BYTES   writes BYTES into a new file of DIR in 1 MiB writes from a
//                              page-aligned buffer (fresh page-cache pages, no fsync, as a
//                              database's files are written), removes it; prints "SECONDS"
//   io_floor design DIR OUT J DB TEMP
//                              the I/O of hpcprof's design alone, on J threads: each thread
//                              reads its share of DIR's files (every J-th) as `read` does and,
//                              after each, writes its part of DB bytes into a new file of OUT
//                              and of TEMP bytes into an unnamed temporary file of OUT (256 KiB
//                              writes, as hpcprof's), then reads its temporary file back and
//                              closes it; the files removed; prints "SECONDS". With hpcprof -v's
//                              figures (database bytes; the spill's and row buckets' bytes)
//                              it is what no analysis of that design can go below at -jJ.
// The buffer's alignment matters: on the benchmark's VM, reads from the page cache into a
// buffer 16 bytes off a page boundary took 1.6 times as long, 8 bytes off 3.5 times, as
// into an aligned one (Python's bytearray lies 16 or 32 bytes off: the floor the benchmarks
// took through it before was about twice the system's).
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr size_t kChunk = size_t{1} << 20;

char* alignedBuffer() {
  void* p = mmap(nullptr, kChunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    std::perror("io_floor: mmap");
    std::exit(1);
  }
  std::memset(p, 0x5a, kChunk);  // touched before the clock starts
  return static_cast<char*>(p);
}

double seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int readDir(const std::string& dir) {
  char* buf = alignedBuffer();
  auto t0 = std::chrono::steady_clock::now();
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    std::fprintf(stderr, "io_floor: %s: %s\n", dir.c_str(), std::strerror(errno));
    return 1;
  }
  int dfd = dirfd(d);
  unsigned long long total = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    int fd = openat(dfd, e->d_name, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
      ssize_t k;
      while ((k = read(fd, buf, kChunk)) > 0) total += static_cast<unsigned long long>(k);
    }
    close(fd);
  }
  closedir(d);
  std::printf("%.6f %llu\n", seconds(t0), total);
  return 0;
}

int writeNew(const std::string& dir, unsigned long long bytes) {
  char* buf = alignedBuffer();
  std::string path = dir + "/io-floor-write";
  auto t0 = std::chrono::steady_clock::now();
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::fprintf(stderr, "io_floor: %s: %s\n", path.c_str(), std::strerror(errno));
    return 1;
  }
  while (bytes > 0) {
    size_t n = bytes < kChunk ? static_cast<size_t>(bytes) : kChunk;
    ssize_t k = write(fd, buf, n);
    if (k <= 0) {
      std::fprintf(stderr, "io_floor: %s: %s\n", path.c_str(), std::strerror(errno));
      close(fd);
      unlink(path.c_str());
      return 1;
    }
    bytes -= static_cast<unsigned long long>(k);
  }
  close(fd);
  double t = seconds(t0);
  unlink(path.c_str());
  std::printf("%.6f\n", t);
  return 0;
}

int design(const std::string& dir, const std::string& out, unsigned threads, unsigned long long db,
           unsigned long long temp) {
  std::vector<std::string> files;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') files.push_back(dir + "/" + e->d_name);
    closedir(d);
  } else {
    std::fprintf(stderr, "io_floor: %s: %s\n", dir.c_str(), std::strerror(errno));
    return 1;
  }
  std::vector<char*> bufs;
  for (unsigned t = 0; t < threads; ++t) bufs.push_back(alignedBuffer());
  unsigned long long inputBytes = 0;
  for (const auto& f : files) {
    struct stat st;
    if (stat(f.c_str(), &st) == 0 && S_ISREG(st.st_mode)) inputBytes += static_cast<unsigned long long>(st.st_size);
  }
  if (inputBytes == 0) inputBytes = 1;
  const double dbShare = double(db) / double(inputBytes), tempShare = double(temp) / double(inputBytes);
  constexpr size_t kWrite = size_t{256} << 10;
  std::atomic<bool> failed{false};  // set from the threads
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      char* buf = bufs[t];
      std::string path = out + "/io-floor-db-" + std::to_string(t);
      int o = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      int tf = open(out.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
      if (o < 0 || tf < 0) {
        failed = true;
        return;
      }
      unsigned long long in = 0, wrote = 0, tempWrote = 0;
      auto put = [&](int fd, unsigned long long& done, double target) {
        while (double(done) < target) {
          if (write(fd, buf, kWrite) != ssize_t(kWrite)) {
            failed = true;
            return;
          }
          done += kWrite;
        }
      };
      for (size_t i = t; i < files.size(); i += threads) {
        int fd = open(files[i].c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ssize_t k;
        while ((k = read(fd, buf, kChunk)) > 0) in += static_cast<unsigned long long>(k);
        close(fd);
        put(o, wrote, double(in) * dbShare);
        put(tf, tempWrote, double(in) * tempShare);
      }
      for (unsigned long long at = 0; at < tempWrote; at += kChunk)
        if (pread(tf, buf, kChunk, off_t(at)) < 0) failed = true;
      close(tf);
      close(o);
    });
  for (auto& th : pool) th.join();
  double s = seconds(t0);
  for (unsigned t = 0; t < threads; ++t) unlink((out + "/io-floor-db-" + std::to_string(t)).c_str());
  if (failed) {
    std::fprintf(stderr, "io_floor: design: a read or write in %s failed\n", out.c_str());
    return 1;
  }
  std::printf("%.6f\n", s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "read") == 0) return readDir(argv[2]);
  if (argc == 4 && std::strcmp(argv[1], "write") == 0) return writeNew(argv[2], std::strtoull(argv[3], nullptr, 10));
  if (argc == 7 && std::strcmp(argv[1], "design") == 0)
    return design(argv[2], argv[3], unsigned(std::max(1L, std::strtol(argv[4], nullptr, 10))),
                  std::strtoull(argv[5], nullptr, 10), std::strtoull(argv[6], nullptr, 10));
  std::fprintf(stderr, "usage: io_floor read DIR | io_floor write DIR BYTES | io_floor design DIR OUT J DB TEMP\n");
  return 2;
}
