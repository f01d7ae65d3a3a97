#include "structure/structure.hpp"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/parallel_pipeline.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "structure/analyze.hpp"
#include "structure/emit.hpp"
#include "structure/elf_image.hpp"
#include "structure/functions.hpp"
#include "structure/gpu_cfg.hpp"

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

}  // namespace

namespace {

// Runs fn(0..n-1) on opt.jobs threads (or the caller's arena when nested).
template <typename F>
void for_each_index(const Options& opt, size_t n, const F& fn) {
  auto work = [&] {
    tbb::parallel_for(tbb::blocked_range<size_t>(0, n, 16), [&](const tbb::blocked_range<size_t>& r) {
      for (size_t i = r.begin(); i != r.end(); ++i) fn(i);
    });
  };
  if (opt.jobs <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
  } else if (opt.nested) {
    work();
  } else {
    tbb::task_arena arena(opt.jobs);
    arena.execute(work);
  }
}

// A binary opened and read up to its list of procedures, ready for analysis.
struct Prepared {
  std::unique_ptr<ElfImage> image;
  std::shared_ptr<const DebugInfo> debug;
  std::vector<FunctionSpec> fns;
  std::unordered_set<uint64_t> noreturn;
  bool cuda = false;
  bool gpu_cfg = false;                   // nvdisasm ran
  std::unordered_map<uint64_t, Cfg> cfgs;  // GPU procedure entry -> its control flow
  AnalysisContext context() const {
    AnalysisContext c{*image, *debug, [this](uint64_t a) { return noreturn.count(a) != 0; }, !cuda, cuda, {}};
    if (gpu_cfg)
      c.gpu_cfg = [this](uint64_t a) -> const Cfg* {
        auto it = cfgs.find(a);
        return it == cfgs.end() ? nullptr : &it->second;
      };
    return c;
  }
};

// GPU control flow, one nvdisasm run per function symbol (the reference's way: a cubin
// nvdisasm cannot decode as a whole still gives the functions it can).
void gpu_control_flow(Prepared& p, const std::string& path, const Options& opt, std::string* warnings) {
  auto tool = find_nvdisasm();
  if (!tool) {
    if (warnings)
      *warnings += path + ": --gpucfg=yes needs CUDA's nvdisasm, found neither on PATH nor in "
                          "/usr/local/cuda/bin; GPU loops are omitted (functions and lines are not)\n";
    return;
  }
  const auto& syms = p.image->functions();
  std::vector<std::optional<Cfg>> cfgs(p.fns.size());
  std::vector<std::string> failed(p.fns.size());
  for_each_index(opt, p.fns.size(), [&](size_t i) {
    const FunctionSpec& f = p.fns[i];
    auto sym = std::lower_bound(syms.begin(), syms.end(), f.begin,
                                [](const SymbolFunction& s, uint64_t a) { return s.addr < a; });
    const Section* sec = p.image->section_at(f.begin);
    if (sym == syms.end() || sym->addr != f.begin || sym->symtab_index == 0 || !sec) return;
    auto dot = run_nvdisasm(*tool, path, sym->symtab_index);
    if (!dot) {
      failed[i] = dot.status().message();
      return;
    }
    auto g = parse_nvdisasm_cfg(*dot);
    if (!g) {
      failed[i] = path + ": function " + f.link_name + ": " + g.status().message();
      return;
    }
    cfgs[i] = cfg_from_nvgraph(*g, sec->addr, f.begin, f.end);
  });
  for (size_t i = 0; i < p.fns.size(); ++i) {
    if (cfgs[i]) p.cfgs.emplace(p.fns[i].begin, std::move(*cfgs[i]));
    if (!failed[i].empty() && warnings) *warnings += failed[i] + "; its loops are omitted\n";
  }
  p.gpu_cfg = true;
}

Expected<std::unique_ptr<Prepared>> prepare(const std::string& path, const Options& opt, std::string* warnings) {
  auto p = std::make_unique<Prepared>();
  HPC_ASSIGN_OR_RETURN(p->image, ElfImage::open(path));
  p->cuda = p->image->is_cuda();
  if (!p->image->is_x86_64() && !p->cuda)
    return Status::error(path + ": unsupported machine type " + std::to_string(p->image->machine()) +
                         " (x86-64 and CUDA binaries are supported)");
  HPC_ASSIGN_OR_RETURN(auto debugOwned, DebugInfo::load(*p->image, opt.debug_cache));
  p->debug = std::move(debugOwned);
  p->fns = discover_functions(*p->image, *p->debug);
  for (const auto& f : p->fns)
    if (known_noreturn(f.link_name)) p->noreturn.insert(f.begin);
  if (!p->cuda) {
    const ElfImage& image = *p->image;
    auto noreturn = [&](uint64_t a) { return p->noreturn.count(a) != 0; };
    add_called_procedures(p->fns, image, [&](const std::vector<FunctionSpec>& fns, const std::vector<size_t>& todo) {
      std::vector<std::vector<uint64_t>> out(todo.size());
      for_each_index(opt, todo.size(), [&](size_t k) {
        const FunctionSpec& f = fns[todo[k]];
        auto bytes = image.code(f.begin, f.end - f.begin);
        if (bytes.empty()) return;
        out[k] = build_cfg(CodeRange{f.begin, f.begin + bytes.size(), bytes}, f.begin, noreturn,
                           [&](uint64_t a, uint64_t n) { return image.code(a, n); })
                     .calls;
      });
      return out;
    });
  }
  if (p->cuda && opt.gpucfg) gpu_control_flow(*p, path, opt, warnings);
  return p;
}

}  // namespace

namespace {

Expected<Structure> analyze_prepared(std::unique_ptr<Prepared> prep, const std::string& path, const Options& opt) {
  AnalysisContext ctx = prep->context();
  Structure s;
  s.binary_path = path;
  s.debug = prep->debug;
  s.gpu = prep->cuda;
  s.gpu_cfg = prep->gpu_cfg;
  const auto& fns = prep->fns;
  s.procedures.resize(fns.size());
  std::atomic<size_t> done{0};
  for_each_index(opt, fns.size(), [&](size_t i) {
    s.procedures[i] = analyze_procedure(ctx, fns[i]);
    size_t n = done.fetch_add(1, std::memory_order_relaxed) + 1;
    if (opt.progress) opt.progress(n, fns.size());
  });
  return s;
}

}  // namespace

Expected<Structure> analyze_binary(const std::string& path, const Options& opt, std::string* warnings) {
  HPC_ASSIGN_OR_RETURN(auto prep, prepare(path, opt, warnings));
  return analyze_prepared(std::move(prep), path, opt);
}

Status write_binary_structure(const std::string& path, const Options& opt, const std::string& output,
                              std::string* warnings) {
  HPC_ASSIGN_OR_RETURN(auto prep, prepare(path, opt, warnings));
  auto failed = [&](Status st) { return st.ok() ? st : st.prepend(output); };
  if (prep->cuda) {
    // GPU procedures may take their file from a line other than the entry's: analyse
    // them all first (cubins are small).
    HPC_ASSIGN_OR_RETURN(auto s, analyze_prepared(std::move(prep), path, opt));
    return failed(write_structure_file(s, output));
  }
  // A CPU procedure's file is that of its entry's line, known before analysis, so the
  // output order is too: procedures are analysed in that order and streamed out.
  AnalysisContext ctx = prep->context();
  const auto& fns = prep->fns;
  std::vector<uint32_t> files;
  files.reserve(fns.size());
  {
    std::vector<uint64_t> entries;
    entries.reserve(fns.size());
    for (const auto& f : fns) entries.push_back(f.begin);
    for (const SourceLoc& l : prep->debug->lines_at(entries)) files.push_back(l.file);
  }
  std::vector<size_t> order = file_order(files);
  auto w = StructureFileWriter::create(output, path, prep->debug, false);
  if (!w) return failed(w.status());
  // A pipeline: indices in output order -> procedures analysed in parallel -> written in
  // order and freed. At most `batch` procedures are in flight, and no thread waits at a
  // barrier between batches.
  Status written;
  std::atomic<bool> stop{false};
  size_t next = 0;
  std::atomic<size_t> done{0};
  auto pipeline = [&] {
    tbb::parallel_pipeline(
        std::max<size_t>(1, opt.batch),
        tbb::make_filter<void, size_t>(tbb::filter_mode::serial_in_order,
                                       [&](tbb::flow_control& fc) -> size_t {
                                         if (next >= order.size() || stop.load()) {
                                           fc.stop();
                                           return 0;
                                         }
                                         return order[next++];
                                       }) &
            tbb::make_filter<size_t, std::shared_ptr<Procedure>>(
                tbb::filter_mode::parallel,
                [&](size_t i) {
                  auto p = std::make_shared<Procedure>(analyze_procedure(ctx, fns[i]));
                  size_t k = done.fetch_add(1, std::memory_order_relaxed) + 1;
                  if (opt.progress) opt.progress(k, fns.size());
                  return p;
                }) &
            tbb::make_filter<std::shared_ptr<Procedure>, void>(tbb::filter_mode::serial_in_order,
                                                               [&](std::shared_ptr<Procedure> p) {
                                                                 if (!written.ok()) return;
                                                                 written = (*w)->add(*p);
                                                                 if (!written.ok()) stop = true;
                                                               }));
  };
  if (opt.nested) {
    pipeline();
  } else {
    tbb::task_arena arena(std::max(1, opt.jobs));
    arena.execute(pipeline);
  }
  HPC_RETURN_IF_ERROR(failed(written));
  return failed((*w)->finish());
}

}  // namespace hpc::structure
