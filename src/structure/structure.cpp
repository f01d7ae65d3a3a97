#include "structure/structure.hpp"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <unordered_set>

#include "structure/analyze.hpp"
#include "structure/elf_image.hpp"
#include "structure/functions.hpp"

namespace hpc::structure {

std::string Structure::unknown_file() const {
  return "[" + std::filesystem::path(binary_path).filename().string() + "]";
}

namespace {

bool known_noreturn(const std::string& name) {
  static const std::unordered_set<std::string> names = {
      "exit", "_exit", "_Exit", "abort", "__stack_chk_fail", "__assert_fail", "__cxa_throw",
      "__cxa_rethrow", "_Unwind_Resume", "pthread_exit", "longjmp", "siglongjmp", "__longjmp_chk",
      "err", "errx", "verr", "verrx", "__fortify_fail", "__chk_fail", "quick_exit",
      "_ZSt9terminatev", "__cxa_bad_cast", "__cxa_throw_bad_array_new_length"};
  std::string base = name;
  if (auto at = base.find('@'); at != std::string::npos) base.resize(at);
  return names.count(base) != 0;
}

bool on_path(const char* tool) {
  const char* path = std::getenv("PATH");
  if (!path) return false;
  std::string p(path);
  for (size_t start = 0; start <= p.size();) {
    size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    std::filesystem::path cand = std::filesystem::path(p.substr(start, end - start)) / tool;
    std::error_code ec;
    if (!cand.empty() && std::filesystem::is_regular_file(cand, ec)) return true;
    start = end + 1;
  }
  return false;
}

}  // namespace

Expected<Structure> analyze_binary(const std::string& path, const Options& opt, std::string* warnings) {
  HPC_ASSIGN_OR_RETURN(auto image, ElfImage::open(path));
  bool cuda = image->is_cuda();
  if (!image->is_x86_64() && !cuda)
    return Status::error(path + ": unsupported machine type " + std::to_string(image->machine()) +
                         " (x86-64 and CUDA binaries are supported)");
  HPC_ASSIGN_OR_RETURN(auto debugOwned, DebugInfo::load(*image));
  std::shared_ptr<const DebugInfo> debug(std::move(debugOwned));

  auto fns = discover_functions(*image, *debug);
  std::unordered_set<uint64_t> noreturn;
  for (const auto& f : fns)
    if (known_noreturn(f.link_name)) noreturn.insert(f.begin);

  AnalysisContext ctx{*image, *debug, [&](uint64_t a) { return noreturn.count(a) != 0; }, !cuda, cuda};
  if (cuda && opt.gpucfg && warnings) {
    if (!on_path("nvdisasm"))
      *warnings += path + ": --gpucfg=yes needs CUDA's nvdisasm, which is not on PATH; "
                          "GPU loops are not recovered (functions and lines still are)\n";
    else
      *warnings += path + ": GPU control flow through nvdisasm is not implemented yet; "
                          "GPU loops are not recovered\n";
  }

  Structure s;
  s.binary_path = path;
  s.debug = debug;
  s.gpu = cuda;
  s.procedures.resize(fns.size());
  std::atomic<size_t> done{0};
  auto one = [&](size_t i) {
    s.procedures[i] = analyze_procedure(ctx, fns[i]);
    size_t n = done.fetch_add(1, std::memory_order_relaxed) + 1;
    if (opt.progress) opt.progress(n, fns.size());
  };
  auto work = [&] {
    tbb::parallel_for(tbb::blocked_range<size_t>(0, fns.size(), 16), [&](const tbb::blocked_range<size_t>& r) {
      for (size_t i = r.begin(); i != r.end(); ++i) one(i);
    });
  };
  if (opt.jobs <= 1) {
    for (size_t i = 0; i < fns.size(); ++i) one(i);
  } else if (opt.nested) {
    work();
  } else {
    tbb::task_arena arena(opt.jobs);
    arena.execute(work);
  }
  return s;
}

}  // namespace hpc::structure
