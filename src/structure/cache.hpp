// Structure cache: results keyed by the binary's content (and the options and path
// that shape the output), so a second run over an unchanged binary is a file copy.
#pragma once

#include <optional>
#include <string>

#include "common/status.hpp"
#include "structure/structure.hpp"

namespace hpc::structure {

// MT: thread-safe; an entry is keyed by binary path too, so no two threads of one run write the same one.
class Cache {
public:
  explicit Cache(std::string dir) : dir_(std::move(dir)) {}
  bool enabled() const { return !dir_.empty(); }
  // The cached structure file for `binary`, if any.
  Expected<std::optional<std::string>> lookup(const std::string& binary, const Options& opt) const;
  bool copy_out(const std::string& cached, const std::string& output) const;
  // Best effort: a cache that cannot be written only costs time later.
  void store(const std::string& binary, const Options& opt, const std::string& produced) const;

private:
  Expected<std::string> entry_path(const std::string& binary, const Options& opt) const;
  std::string dir_;
};

}  // namespace hpc::structure
