// Function names from ELF symbol tables for binaries copied into a measurement
// directory (vdso/<md5>.vdso), used where no structure file covers a module. The
// reference does the same even with --foreign, since these files belong to the
// measurement, not to the machine it ran on.
#include <algorithm>
#include <map>
#include <mutex>
#include <system_error>

#include "analysis/io.hpp"
#include "structure/elf_image.hpp"

namespace hpc::analysis {

namespace fs = std::filesystem;

namespace {

class MeasuredSymbols final : public StructureSource {
public:
  MeasuredSymbols(std::unique_ptr<StructureSource> inner, std::vector<fs::path> dirs)
      : inner_(std::move(inner)), dirs_(std::move(dirs)) {}

  bool lookup(const std::string& modulePath, uint64_t offset,
              std::vector<ScopeStep>& out) const override {
    if (inner_ && inner_->lookup(modulePath, offset, out)) return true;
    if (modulePath.rfind("vdso/", 0) != 0) return false;
    const structure::ElfImage* elf = image(modulePath);
    if (!elf) return false;
    const auto& fns = elf->functions();
    auto it = std::upper_bound(fns.begin(), fns.end(), offset,
                               [](uint64_t a, const structure::SymbolFunction& f) { return a < f.addr; });
    if (it == fns.begin()) return false;
    const structure::SymbolFunction& f = *std::prev(it);
    uint64_t end = f.size ? f.addr + f.size : (it == fns.end() ? UINT64_MAX : it->addr);
    if (offset >= end || f.plt) return false;
    ScopeStep st;
    st.kind = ScopeStep::Kind::Procedure;
    st.name = f.name;
    st.offset = f.addr;
    out.assign(1, std::move(st));
    return true;
  }

  void prepare(const std::string& modulePath, std::vector<uint64_t>& offsets) const override {
    if (inner_) inner_->prepare(modulePath, offsets);
  }

  void callSites(const std::string& modulePath, std::vector<CallSite>& out) const override {
    out.clear();
    if (inner_) inner_->callSites(modulePath, out);
  }

  bool mayCover(const std::string& modulePath) const override {
    return (inner_ && inner_->mayCover(modulePath)) || (modulePath.rfind("vdso/", 0) == 0 && image(modulePath));
  }

private:
  // MT: thread-safe; each binary is opened once.
  const structure::ElfImage* image(const std::string& modulePath) const {
    std::lock_guard lock(mu_);
    auto it = images_.find(modulePath);
    if (it != images_.end()) return it->second.get();
    std::unique_ptr<structure::ElfImage> found;
    for (const fs::path& d : dirs_) {
      std::error_code ec;
      fs::path p = d / modulePath;
      if (!fs::is_regular_file(p, ec)) continue;
      auto img = structure::ElfImage::open(p.string());
      if (img.ok()) found = std::move(*img);
      break;
    }
    return images_.emplace(modulePath, std::move(found)).first->second.get();
  }

  std::unique_ptr<StructureSource> inner_;
  std::vector<fs::path> dirs_;
  mutable std::mutex mu_;
  mutable std::map<std::string, std::unique_ptr<structure::ElfImage>> images_;
};

}  // namespace

std::unique_ptr<StructureSource> withMeasuredSymbols(std::unique_ptr<StructureSource> structs,
                                                     std::vector<fs::path> measurementDirs) {
  return std::make_unique<MeasuredSymbols>(std::move(structs), std::move(measurementDirs));
}

}  // namespace hpc::analysis
