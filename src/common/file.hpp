// Files in and out. Inputs are memory-mapped read-only; outputs are written under a
// temporary name beside the target and renamed into place on commit, so a failed or
// interrupted writer never leaves a half-written file (or directory) behind.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <filesystem>
#include <mutex>
#include <vector>
#include <span>
#include <string>

#include "common/bytes.hpp"
#include "common/status.hpp"

namespace hpc {

class MappedFile {
public:
  static Expected<MappedFile> open(const std::filesystem::path& path);
  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }
  ByteView view() const { return ByteView(bytes(), path_); }

private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// A read-only file read by pread through a small cache of blocks per thread, for readers
// that visit a file in small pieces over and over (a viewer's walk over meta.db's contexts
// and the summary's values). Unlike a mapping, what it reads is never resident in the
// process beyond the cache: a read fault on a mapped file maps pages around the one asked
// for (64 KiB, and since Linux 6.18 the page cache's whole large folio, up to 2 MiB), which
// a bounded-memory server cannot control.
// MT: const methods are thread-safe (each thread has its own cache).
class BlockFile {
public:
  static constexpr size_t kBlock = 16u << 10, kSlots = 32;  // 512 KiB a thread at most
  static Expected<BlockFile> open(const std::filesystem::path& path);
  BlockFile(BlockFile&& o) noexcept;
  BlockFile& operator=(BlockFile&& o) noexcept;
  BlockFile(const BlockFile&) = delete;
  BlockFile& operator=(const BlockFile&) = delete;
  ~BlockFile();

  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Copies [off, off + n) into dst; bytes past the end of the file (or that cannot be read)
  // read as zero: callers check offsets against the file's size when they open it.
  void read(uint64_t off, void* dst, size_t n) const;
  template <typename T> T load(uint64_t off) const {
    T v;
    const Hot& h = t_hot;  // the block of this thread's last read, without a call
    if (h.file == id_ && off >= h.base && off - h.base + sizeof(T) <= h.len) std::memcpy(&v, h.data + (off - h.base), sizeof v);
    else read(off, &v, sizeof v);
    if constexpr (std::endian::native != std::endian::little && sizeof(T) > 1) {
      using U = std::conditional_t<sizeof(T) == 8, uint64_t, std::conditional_t<sizeof(T) == 4, uint32_t, uint16_t>>;
      U u;
      std::memcpy(&u, &v, sizeof u);
      if constexpr (sizeof(T) == 8) u = __builtin_bswap64(u);
      else if constexpr (sizeof(T) == 4) u = __builtin_bswap32(u);
      else u = __builtin_bswap16(u);
      std::memcpy(&v, &u, sizeof u);
    }
    return v;
  }
  // Frees the calling thread's cache (a server thread at the end of a request).
  static void drop_thread_cache();

private:
  struct Hot {  // a thread's last block read: its file, offset and bytes (zero at thread start)
    uint64_t file, base, len;
    const uint8_t* data;
  };
  static inline thread_local Hot t_hot;
  BlockFile() = default;
  int fd_ = -1;
  uint64_t id_ = 0;  // tells files apart in the caches (never reused)
  uint64_t size_ = 0;
  std::string path_;
};

// Writes to "<target>.tmp-<pid>" and renames onto <target> in commit(); if destroyed
// without commit() the temporary is removed, and so it is if SIGINT, SIGTERM or SIGHUP ends
// a tool that called remove_temporaries_on_signal() (common/interrupt.hpp). Works for a file
// or a directory.
class AtomicOutput {
public:
  enum class Kind { File, Directory };
  AtomicOutput(std::filesystem::path target, Kind kind);
  AtomicOutput(const AtomicOutput&) = delete;
  AtomicOutput& operator=(const AtomicOutput&) = delete;
  ~AtomicOutput();

  // Creates the temporary (an empty file or directory).
  Status begin();
  const std::filesystem::path& temp_path() const { return tmp_; }
  const std::filesystem::path& target() const { return target_; }
  // Replaces the target (a directory target is replaced whole).
  Status commit();

private:
  Status rename_into_place();
  std::filesystem::path target_, tmp_;
  Kind kind_;
  bool begun_ = false;  // tmp_ registered with common/interrupt.hpp
  bool committed_ = false;
};

// A measured binary changed since: the warning for `binary` when it was modified after the
// measurement ended (endNs, ns since the epoch), or "" where it was not or either time is
// unknown (endNs 0). Modification within 2 s of the end counts as before it (coarse file
// system clocks). measurement_end_ns: when the measurement in `dir` ended, as its files tell:
// the latest modification of a process's log (written as each process ends), else of a
// profile; 0 if neither.
std::string changed_since_measured(const std::string& binary, int64_t endNs);
int64_t measurement_end_ns(const std::filesystem::path& dir);

// Whole-file helpers built on AtomicOutput.
Status write_file_atomically(const std::filesystem::path& target, std::span<const uint8_t> bytes);
Status write_file_atomically(const std::filesystem::path& target, std::string_view text);
Expected<std::string> read_text_file(const std::filesystem::path& path);
// The whole file into `into` (resized to the file's size; its capacity is reused): for
// files read whole and often, where mapping costs page faults and a TLB flush per unmap.
Status read_file_into(const std::filesystem::path& path, std::vector<uint8_t>& into);
// The same by a path as a string (no std::filesystem::path made: a reader that keeps many
// files' names keeps them as strings, a tenth of the memory).
Status read_file_into(const std::string& path, std::vector<uint8_t>& into);

// Reads and writes that count what they move and the wall time spent in them, for the whole
// process: `hpcprof -v` shows each phase's share, so that a run can be told I/O-bound (the
// time to write a database into fresh page-cache pages varies fivefold on a VM) from
// compute-bound. Each is the system call of the same name; a call costs two clock reads,
// nothing next to the tens of KiB a call moves. MT: thread-safe (relaxed atomic sums).
struct IoCounts {
  uint64_t readBytes = 0, readNs = 0, writeBytes = 0, writeNs = 0;
};
IoCounts io_counts();
ssize_t counted_pread(int fd, void* to, size_t len, off_t at);
// Writes of at most kMaxWriteBytes each (a larger request is written in part, as a write
// may be: callers write on from where it stopped). The kernel gives a file's page cache folios
// as large as the write, and on the benchmark's VM a folio of 1 MiB comes from the huge blocks
// the guest handed back to its host (free page reporting): 128 MiB written in 1 MiB writes took
// 0.19-0.26 s after a pause, against 0.03 s at once after; in 256 KiB writes 0.03 s either way.
inline constexpr size_t kMaxWriteBytes = size_t(256) << 10;
ssize_t counted_pwrite(int fd, const void* from, size_t len, off_t at);
ssize_t counted_pwritev(int fd, const iovec* iov, int count, off_t at);
ssize_t counted_write(int fd, const void* from, size_t len);

// A file's blocks, given ahead of the writes that fill it, past its end (fallocate with
// FALLOC_FL_KEEP_SIZE): ext4 then maps each page written to a block the file holds, where a
// write past the allocated end reserves space page by page (64 MB in 512 KiB writes: 15-17 ->
// 11-12 ms on the benchmark's VM). 256 KiB first, doubling up to 8 MiB, then an eighth of
// what the file holds. Only on ext4 (where it was measured); elsewhere, or where the file system
// refuses, nothing changes. MT: thread-safe.
class SpaceAhead {
public:
  // Before writing [at, end) of fd.
  void cover(int fd, uint64_t end);
  // Gives back what was allocated past the file's end (the end of the last byte written):
  // a truncation to the file's own size frees the blocks beyond it. Not needed for a file
  // that is removed.
  Status trim(int fd, const std::filesystem::path& name);

private:
  std::mutex mu_;
  uint64_t allocated_ = 0;  // [0, allocated_) allocated
  uint64_t end_ = 0;        // the end of the last byte covered
  bool checked_ = false;    // the file system's type
  bool tried_ = false;      // fallocate() called since the last trim
  bool off_ = false;        // not ext4, or the file system refused
};

}  // namespace hpc
