#include "common/file.hpp"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <system_error>

#include "common/interrupt.hpp"

namespace hpc {
namespace fs = std::filesystem;

static Status errno_status(const std::string& what, const std::string& p) {
  return Status::error(p + ": " + what + ": " + std::strerror(errno));
}
static Status errno_status(const std::string& what, const fs::path& p) { return errno_status(what, p.string()); }

namespace {

std::atomic<uint64_t> gReadBytes{0}, gReadNs{0}, gWriteBytes{0}, gWriteNs{0};

uint64_t nowNs() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return uint64_t(t.tv_sec) * 1000000000u + uint64_t(t.tv_nsec);
}

ssize_t tally(ssize_t n, uint64_t t0, std::atomic<uint64_t>& bytes, std::atomic<uint64_t>& ns) {
  ns.fetch_add(nowNs() - t0, std::memory_order_relaxed);
  if (n > 0) bytes.fetch_add(uint64_t(n), std::memory_order_relaxed);
  return n;
}

}  // namespace

IoCounts io_counts() {
  return IoCounts{gReadBytes.load(std::memory_order_relaxed), gReadNs.load(std::memory_order_relaxed),
                  gWriteBytes.load(std::memory_order_relaxed), gWriteNs.load(std::memory_order_relaxed)};
}

ssize_t counted_pread(int fd, void* to, size_t len, off_t at) {
  const uint64_t t0 = nowNs();
  return tally(::pread(fd, to, len, at), t0, gReadBytes, gReadNs);
}

ssize_t counted_pwrite(int fd, const void* from, size_t len, off_t at) {
  const uint64_t t0 = nowNs();
  return tally(::pwrite(fd, from, std::min(len, kMaxWriteBytes), at), t0, gWriteBytes, gWriteNs);
}

ssize_t counted_pwritev(int fd, const iovec* iov, int n, off_t at) {
  // The whole pieces that fit in kMaxWriteBytes, or the first kMaxWriteBytes of the first.
  size_t total = 0;
  int k = 0;
  for (; k < n && total + iov[k].iov_len <= kMaxWriteBytes; ++k) total += iov[k].iov_len;
  const uint64_t t0 = nowNs();
  if (k == n) return tally(::pwritev(fd, iov, n, at), t0, gWriteBytes, gWriteNs);
  if (k == 0) return tally(::pwrite(fd, iov[0].iov_base, kMaxWriteBytes, at), t0, gWriteBytes, gWriteNs);
  return tally(::pwritev(fd, iov, k, at), t0, gWriteBytes, gWriteNs);
}

ssize_t counted_write(int fd, const void* from, size_t len) {
  const uint64_t t0 = nowNs();
  return tally(::write(fd, from, std::min(len, kMaxWriteBytes)), t0, gWriteBytes, gWriteNs);
}

namespace {
// A regular file opened read-only: its descriptor and size; errors name the file.
Expected<std::pair<int, uint64_t>> open_regular(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_status("cannot open", path);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    Status s = errno_status("cannot stat", path);
    ::close(fd);
    return s;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::error(path.string() + ": not a regular file");
  }
  return std::pair<int, uint64_t>{fd, uint64_t(st.st_size)};
}
}  // namespace

Expected<MappedFile> MappedFile::open(const fs::path& path) {
  HPC_ASSIGN_OR_RETURN(auto opened, open_regular(path));
  const int fd = opened.first;
  MappedFile m;
  m.path_ = path.string();
  m.size_ = static_cast<size_t>(opened.second);
  if (m.size_ > 0) {
    void* p = mmap(nullptr, m.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      Status s = errno_status("cannot map", path);
      ::close(fd);
      return s;
    }
    m.data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return m;
}

namespace {
// The calling thread's blocks: a few slots, least recently used replaced.
struct BlockCache {
  struct Slot {
    uint64_t file = 0, block = UINT64_MAX, used = 0;
    uint32_t len = 0;
  };
  Slot slots[BlockFile::kSlots];
  uint8_t* data = nullptr;  // kSlots * kBlock bytes, taken on first use
  uint64_t tick = 0;
  size_t last = 0;  // the slot of the last hit
  ~BlockCache() { std::free(data); }
};
thread_local BlockCache t_blocks;
std::atomic<uint64_t> g_nextBlockFile{1};
}  // namespace

Expected<BlockFile> BlockFile::open(const fs::path& path) {
  HPC_ASSIGN_OR_RETURN(auto opened, open_regular(path));
  BlockFile f;
  f.fd_ = opened.first;
  f.id_ = g_nextBlockFile.fetch_add(1);
  f.size_ = opened.second;
  f.path_ = path.string();
  return f;
}

BlockFile::BlockFile(BlockFile&& o) noexcept : fd_(o.fd_), id_(o.id_), size_(o.size_), path_(std::move(o.path_)) {
  o.fd_ = -1, o.id_ = 0;
}

BlockFile& BlockFile::operator=(BlockFile&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_, id_ = o.id_, size_ = o.size_, path_ = std::move(o.path_);
    o.fd_ = -1, o.id_ = 0;
  }
  return *this;
}

BlockFile::~BlockFile() {
  if (fd_ >= 0) ::close(fd_);
}

void BlockFile::read(uint64_t off, void* dst, size_t n) const {
  BlockCache& c = t_blocks;
  uint8_t* out = static_cast<uint8_t*>(dst);
  while (n > 0) {
    const uint64_t block = off / kBlock, in = off % kBlock;
    const size_t take = std::min<uint64_t>(n, kBlock - in);
    size_t s = c.last;
    if (c.slots[s].file != id_ || c.slots[s].block != block) {
      s = kSlots;
      size_t oldest = 0;
      for (size_t i = 0; i < kSlots; ++i) {
        if (c.slots[i].file == id_ && c.slots[i].block == block) {
          s = i;
          break;
        }
        if (c.slots[i].used < c.slots[oldest].used) oldest = i;
      }
      if (s == kSlots) {  // a miss: the least recently used slot reads the block
        if (!c.data) c.data = static_cast<uint8_t*>(std::malloc(kSlots * kBlock));
        s = oldest;
        BlockCache::Slot& x = c.slots[s];
        x.file = 0;  // empty until read
        ssize_t got = -1;
        if (c.data && fd_ >= 0 && block * kBlock < size_) {
          do got = ::pread(fd_, c.data + s * kBlock, std::min<uint64_t>(kBlock, size_ - block * kBlock), off_t(block * kBlock));
          while (got < 0 && errno == EINTR);
        }
        if (got < 0) {  // unreadable or past the end: zeros, not cached
          std::memset(out, 0, take);
          out += take, off += take, n -= take;
          continue;
        }
        x.file = id_, x.block = block, x.len = uint32_t(got);
      }
      c.last = s;
    }
    BlockCache::Slot& x = c.slots[s];
    x.used = ++c.tick;
    t_hot = {id_, block * kBlock, x.len, c.data + s * kBlock};
    const size_t have = in < x.len ? std::min<size_t>(take, x.len - in) : 0;
    std::memcpy(out, c.data + s * kBlock + in, have);
    if (have < take) std::memset(out + have, 0, take - have);
    out += take, off += take, n -= take;
  }
}

void BlockFile::drop_thread_cache() {
  BlockCache& c = t_blocks;
  std::free(c.data);
  c.data = nullptr;
  for (auto& x : c.slots) x = {};
  t_hot = {0, 0, 0, nullptr};
}

void SpaceAhead::cover(int fd, uint64_t end) {
  std::lock_guard lock(mu_);
  end_ = std::max(end_, end);
  if (end <= allocated_ || off_) return;
  if (!checked_) {
    // Only where it was measured to pay: on tmpfs, for one, fallocate() fills the pages with
    // zeros ahead of the writes that fill them again.
    checked_ = true;
    struct statfs fs {};
    constexpr decltype(fs.f_type) kExt4 = 0xEF53;
    if (::fstatfs(fd, &fs) != 0 || fs.f_type != kExt4) {
      off_ = true;
      return;
    }
  }
  const uint64_t kMiB = uint64_t(1) << 20;
  const uint64_t step = std::max(std::min(std::max(kMiB / 4, allocated_), 8 * kMiB), allocated_ / 8);
  const uint64_t to = std::max(end, allocated_ + step);
  tried_ = true;
  if (::fallocate(fd, FALLOC_FL_KEEP_SIZE, off_t(allocated_), off_t(to - allocated_)) != 0) {
    off_ = true;  // (a call that failed, on a full disk say, may have allocated part: trim() frees it)
    return;
  }
  allocated_ = to;
}

Status SpaceAhead::trim(int fd, const fs::path& name) {
  std::lock_guard lock(mu_);
  if (!tried_ || (allocated_ <= end_ && !off_)) return Status();
  if (::ftruncate(fd, off_t(end_)) != 0) return errno_status("cannot truncate", name);
  allocated_ = end_;
  tried_ = false;
  return Status();
}

Status read_file_into(const fs::path& path, std::vector<uint8_t>& into) { return read_file_into(path.string(), into); }

Status read_file_into(const std::string& path, std::vector<uint8_t>& into) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_status("cannot open", path);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    Status s = errno_status("cannot stat", path);
    ::close(fd);
    return s;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::error(path + ": not a regular file");
  }
  const size_t size = static_cast<size_t>(st.st_size);
  if (into.capacity() < size) {
    // Grown without moving the old bytes over (they are read over anyway).
    std::vector<uint8_t>().swap(into);
    into.reserve(size);
  }
  into.resize(size);
  size_t done = 0;
  while (done < into.size()) {
    ssize_t n = counted_pread(fd, into.data() + done, into.size() - done, off_t(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Status s = n < 0 ? errno_status("cannot read", path)
                       : Status::error(path + ": file shrank while being read");
      ::close(fd);
      return s;
    }
    done += size_t(n);
  }
  ::close(fd);
  return Status();
}

MappedFile::MappedFile(MappedFile&& o) noexcept { *this = std::move(o); }

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    if (data_) munmap(const_cast<uint8_t*>(data_), size_);
    data_ = o.data_;
    size_ = o.size_;
    path_ = std::move(o.path_);
    o.data_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (data_) munmap(const_cast<uint8_t*>(data_), size_);
}

AtomicOutput::AtomicOutput(fs::path target, Kind kind) : target_(std::move(target)), kind_(kind) {
  fs::path name = target_.filename();
  if (name.empty()) name = target_.parent_path().filename();  // "dir/" spelled with a slash
  tmp_ = target_.parent_path() / ("." + name.string() + ".tmp-" + std::to_string(getpid()));
}

AtomicOutput::~AtomicOutput() {
  if (!committed_) {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
    if (begun_) drop_temporary(tmp_);
  }
}

Status AtomicOutput::begin() {
  std::error_code ec;
  fs::remove_all(tmp_, ec);
  if (!begun_) add_temporary(tmp_);  // removed if a signal ends the process from now on
  begun_ = true;
  if (kind_ == Kind::Directory) {
    if (!fs::create_directories(tmp_, ec) || ec)
      return Status::error(target_.string() + ": cannot create (as " + tmp_.filename().string() +
                           " first): " + ec.message());
  } else {
    std::ofstream f(tmp_, std::ios::binary | std::ios::trunc);
    if (!f)
      return Status::error(target_.string() + ": cannot create (as " + tmp_.filename().string() +
                           " first): " + std::strerror(errno));
  }
  return Status();
}

Status AtomicOutput::commit() {
  Status st = rename_into_place();
  if (st.ok() && begun_) drop_temporary(tmp_);
  return st;
}

Status AtomicOutput::rename_into_place() {
  // Renamed whole or not at all before an ending signal's removal of the temporaries.
  auto lock = lock_temporaries();
  std::error_code ec;
  if (kind_ == Kind::Directory && fs::exists(target_, ec) && !fs::is_directory(target_, ec))
    return Status::error(target_.string() + ": exists and is not a directory; it is left as it is");
  if (kind_ == Kind::Directory && fs::exists(target_, ec)) {
    // rename(2) cannot replace a non-empty directory: move the old one aside first.
    fs::path old = tmp_;
    old += ".old";
    fs::remove_all(old, ec);
    fs::rename(target_, old, ec);
    if (ec) return Status::error(target_.string() + ": cannot replace: " + ec.message());
    fs::rename(tmp_, target_, ec);
    if (ec) {
      fs::rename(old, target_);
      return Status::error(target_.string() + ": cannot rename into place: " + ec.message());
    }
    fs::remove_all(old, ec);
  } else {
    fs::rename(tmp_, target_, ec);
    if (ec) return Status::error(target_.string() + ": cannot rename into place: " + ec.message());
  }
  committed_ = true;
  return Status();
}

Status write_file_atomically(const fs::path& target, std::span<const uint8_t> bytes) {
  AtomicOutput out(target, AtomicOutput::Kind::File);
  HPC_RETURN_IF_ERROR(out.begin());
  // begin() made the file, empty: it is written without truncating it again, since on ext4
  // truncating a file marks it to be written back when it is closed (auto_da_alloc), which
  // made closing meta.db wait for its block allocation.
  const int fd = ::open(out.temp_path().c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno_status("cannot open", out.temp_path());
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n = counted_write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Status s = errno_status("write failed", out.temp_path());
      ::close(fd);
      return s;
    }
    done += size_t(n);
  }
  if (::close(fd) != 0) return errno_status("write failed", out.temp_path());
  return out.commit();
}

Status write_file_atomically(const fs::path& target, std::string_view text) {
  return write_file_atomically(
      target, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

Expected<std::string> read_text_file(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return errno_status("cannot open", path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string changed_since_measured(const std::string& binary, int64_t endNs) {
  struct stat st;
  if (endNs <= 0 || ::stat(binary.c_str(), &st) != 0) return "";
  const int64_t modified = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  constexpr int64_t kSlack = 2000000000;
  if (modified <= endNs + kSlack) return "";
  auto when = [](int64_t ns) {
    const time_t t = time_t(ns / 1000000000);
    struct tm tm;
    char buf[32];
    localtime_r(&t, &tm);
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
    return std::string(buf);
  };
  return binary + ": modified " + when(modified) + ", after the measurement ended (" + when(endNs) +
         "): if it was rebuilt or upgraded since, its code is attributed by the new build's addresses, which may "
         "name the wrong functions and lines; analyse with the binary that ran";
}

int64_t measurement_end_ns(const std::filesystem::path& dir) {
  int64_t logs = 0, profiles = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const auto ext = e.path().extension();
    if (ext != ".log" && ext != ".hpcrun") continue;
    struct stat st;
    if (::stat(e.path().c_str(), &st) != 0) continue;
    const int64_t t = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    int64_t& latest = ext == ".log" ? logs : profiles;
    latest = std::max(latest, t);
  }
  return logs ? logs : profiles;
}

}  // namespace hpc
