// Files in and out. Inputs are memory-mapped read-only; outputs are written under a
// temporary name beside the target and renamed into place on commit, so a failed or
// interrupted writer never leaves a half-written file (or directory) behind.
#pragma once

#include <cstdint>
#include <filesystem>
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

// Writes to "<target>.tmp-<pid>" and renames onto <target> in commit(); if destroyed
// without commit() the temporary is removed. Works for a file or a directory.
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
  std::filesystem::path target_, tmp_;
  Kind kind_;
  bool committed_ = false;
};

// Whole-file helpers built on AtomicOutput.
Status write_file_atomically(const std::filesystem::path& target, std::span<const uint8_t> bytes);
Status write_file_atomically(const std::filesystem::path& target, std::string_view text);
Expected<std::string> read_text_file(const std::filesystem::path& path);
// The whole file into `into` (resized to the file's size; its capacity is reused): for
// files read whole and often, where mapping costs page faults and a TLB flush per unmap.
Status read_file_into(const std::filesystem::path& path, std::vector<uint8_t>& into);

}  // namespace hpc
