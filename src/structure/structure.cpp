#include "structure/structure.hpp"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/parallel_pipeline.h>
#include <oneapi/tbb/task_arena.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "structure/analyze.hpp"
#include "structure/emit.hpp"
#include "structure/elf_image.hpp"
#include "structure/functions.hpp"
#include "structure/gpu_cfg.hpp"
#include "structure/sass.hpp"

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
  std::unique_ptr<ElfImage> debugImage;  // a separate debug file's, where the DWARF is there
  std::shared_ptr<const DebugInfo> debug;
  std::vector<FunctionSpec> fns;  // until the procedures are known
  ProcedureTable procs;           // then
  std::unordered_set<uint64_t> noreturn;
  bool cuda = false;
  bool gpu_cfg = false;                   // GPU control flow was sought (nvdisasm or sass.cpp)
  std::string gpu_device;                 // "NVIDIA sm_75"
  unsigned sm = 0;                        // where sass_decodable(sm): the SASS is read
  std::vector<std::pair<uint64_t, std::optional<uint64_t>>> relocs;  // the code's, for CALL.ABS
  std::map<uint64_t, std::vector<uint64_t>> indirect;  // BRX/JMX address -> its listed targets
  std::unordered_map<uint64_t, Cfg> cfgs;  // GPU procedure entry -> nvdisasm's graph
  // A procedure's control flow: nvdisasm's where it gave one (with the call sites of the
  // SASS reading), else the SASS reading's, made now.
  std::optional<Cfg> gpu_control_flow_of(uint64_t begin, uint64_t end) const {
    std::optional<Cfg> own;
    if (sass_decodable(sm)) {
      auto target = [this](uint64_t a) -> std::optional<uint64_t> {
        auto it = std::lower_bound(relocs.begin(), relocs.end(), a,
                                   [](const auto& r, uint64_t x) { return r.first < x; });
        return it != relocs.end() && it->first == a ? it->second : std::nullopt;
      };
      auto targets = [this](uint64_t a) -> std::span<const uint64_t> {
        auto it = indirect.find(a);
        return it != indirect.end() ? std::span<const uint64_t>(it->second) : std::span<const uint64_t>();
      };
      own = cfg_from_sass(image->code(begin, end - begin), begin, sm, target, targets);
    }
    auto it = cfgs.find(begin);
    if (it == cfgs.end()) return own;
    Cfg g = it->second;
    if (own) g.call_sites = std::move(own->call_sites);
    return g;
  }
  AnalysisContext context() const {
    AnalysisContext c{*image, *debug, [this](uint64_t a) { return noreturn.count(a) != 0; }, !cuda, cuda, {}, gpu_device};
    if (gpu_cfg) c.gpu_cfg = [this](uint64_t b, uint64_t e) { return gpu_control_flow_of(b, e); };
    return c;
  }
};

// GPU control flow: nvdisasm's where it is installed, one run per function symbol (the
// reference's way: a cubin nvdisasm cannot decode as a whole still gives the functions it
// can); else, and where nvdisasm refuses a function, our own reading of the SASS for the SM
// versions whose encodings sass.cpp knows, made as each procedure is analysed. Call sites
// always come from the SASS reading.
void gpu_control_flow(Prepared& p, const std::string& path, const Options& opt, std::string* warnings) {
  p.sm = cuda_sm_of_flags(p.image->flags());
  p.gpu_device = "NVIDIA sm_" + std::to_string(p.sm);
  const bool native = sass_decodable(p.sm);
  auto tool = opt.nvdisasm ? find_nvdisasm() : std::nullopt;
  if (!tool && !native) {
    if (warnings)
      *warnings += path + ": --gpucfg=yes: the control flow of sm_" + std::to_string(p.sm) +
                   " code needs CUDA's nvdisasm, found neither on PATH nor in "
                   "/usr/local/cuda/bin; GPU loops are omitted (functions and lines are not)\n";
    return;
  }
  if (native) {
    p.relocs = p.image->code_relocations();
    p.indirect = cuda_indirect_branch_targets(*p.image);
  }
  p.gpu_cfg = true;
  if (!tool) return;
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
    auto g = dot ? parse_nvdisasm_cfg(*dot) : Expected<NvGraph>(dot.status());
    if (g)
      cfgs[i] = cfg_from_nvgraph(*g, sec->addr, f.begin, f.end);
    else if (!native)  // else our reading stands in (nvdisasm 13 refuses CUDA 10.2 and 11.2 cubins)
      failed[i] = dot ? path + ": its control-flow graph from nvdisasm: " + g.status().message() : dot.status().message();
  });
  // One warning per reason, naming the functions it cost their loops: a cubin nvdisasm
  // refuses as a whole would otherwise give a line per function.
  std::map<std::string, std::vector<size_t>> by_reason;
  for (size_t i = 0; i < p.fns.size(); ++i) {
    if (cfgs[i]) p.cfgs.emplace(p.fns[i].begin, std::move(*cfgs[i]));
    if (!failed[i].empty()) by_reason[failed[i]].push_back(i);
  }
  if (warnings)
    for (const auto& [reason, fns] : by_reason) {
      std::string names;
      for (size_t k = 0; k < fns.size() && k < 3; ++k) names += (k ? ", " : "") + p.fns[fns[k]].link_name;
      if (fns.size() > 3) names += " and " + std::to_string(fns.size() - 3) + " more";
      *warnings += reason + "; loops are omitted in " +
                   (fns.size() == 1 ? "function " : std::to_string(fns.size()) + " functions (") + names +
                   (fns.size() == 1 ? "" : ")") + "\n";
    }
}

Expected<std::unique_ptr<Prepared>> prepare(const std::string& path, const Options& opt, std::string* warnings) {
  auto p = std::make_unique<Prepared>();
  HPC_ASSIGN_OR_RETURN(p->image, ElfImage::open(path));
  p->cuda = p->image->is_cuda();
  if (!p->image->is_x86_64() && !p->cuda)
    return Status::error(path + ": unsupported machine type " + std::to_string(p->image->machine()) +
                         " (x86-64 and CUDA binaries are supported)");
  // A separate debug file where the binary's debug information or symbol table went into
  // one (Debian's -dbgsym packages, objcopy --only-keep-debug): its symbols name the local
  // functions .dynsym lacks, its DWARF gives lines and inlined calls.
  if (!p->cuda && (!p->image->section_named(".debug_info") || !p->image->section_named(".symtab"))) {
    std::unique_ptr<ElfImage> d;
    if (!find_debug_file(*p->image, &d).empty() && d) {
      if (!p->image->section_named(".symtab")) p->image->add_symbols_from(*d);
      if (!p->image->section_named(".debug_info") && d->section_named(".debug_info")) p->debugImage = std::move(d);
    }
  }
  // Split DWARF packed by dwp: "<binary>.dwp" (or beside the debug file).
  std::unique_ptr<DwarfPackage> package;
  std::string packageProblem;
  if (!p->cuda)
    if (std::string at = find_package(path, p->debugImage ? p->debugImage->path() : ""); !at.empty())
      package = DwarfPackage::open(at, &packageProblem);
  const std::string packagePath = package ? package->path() : "";
  HPC_ASSIGN_OR_RETURN(auto debugOwned, DebugInfo::load(p->debugImage ? *p->debugImage : *p->image, opt.debug_cache,
                                                        std::move(package)));
  p->debug = std::move(debugOwned);
  if (auto split = p->debug->split_units(); split.missing > 0 && warnings)
    *warnings += path + ": " + std::to_string(split.missing) + " of its " + std::to_string(split.units) +
                 " split-DWARF units have no .dwo file here (" + split.first_missing +
                 (split.missing > 1 ? ", ..." : "") + ")" + (packagePath.empty() ? "" : " nor in " + packagePath) +
                 (packageProblem.empty() ? "" : " (" + packageProblem + ")") +
                 ": their source lines are read, their inlined calls only guessed from the lines\n";
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
    }, [&](size_t n, const std::function<void(size_t)>& f) { for_each_index(opt, n, f); });
  }
  if (p->cuda && opt.gpucfg) gpu_control_flow(*p, path, opt, warnings);
  // Only the procedures are needed from here on (nvdisasm has had the symbol indices).
  p->image->drop_symbols();
  HPC_ASSIGN_OR_RETURN(p->procs, ProcedureTable::make(p->fns));
  std::vector<FunctionSpec>().swap(p->fns);
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
  const ProcedureTable& fns = prep->procs;
  s.procedures.resize(fns.size());
  std::atomic<size_t> done{0};
  for_each_index(opt, fns.size(), [&](size_t i) {
    s.procedures[i] = analyze_procedure(ctx, fns.at(i));
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

struct ProcedureAnalyzer::Impl {
  std::unique_ptr<Prepared> prep;
  std::optional<AnalysisContext> ctx;  // refers to *prep
  Structure shell;
};

Expected<std::unique_ptr<ProcedureAnalyzer>> ProcedureAnalyzer::open(const std::string& path, const Options& opt,
                                                                     std::string* warnings) {
  HPC_ASSIGN_OR_RETURN(auto prep, prepare(path, opt, warnings));
  std::unique_ptr<ProcedureAnalyzer> a(new ProcedureAnalyzer());
  a->impl_ = std::make_unique<Impl>();
  Impl& m = *a->impl_;
  m.prep = std::move(prep);
  m.ctx.emplace(m.prep->context());
  m.shell.binary_path = path;
  m.shell.debug = m.prep->debug;
  m.shell.gpu = m.prep->cuda;
  m.shell.gpu_cfg = m.prep->gpu_cfg;
  return a;
}

ProcedureAnalyzer::~ProcedureAnalyzer() = default;

size_t ProcedureAnalyzer::size() const { return impl_->prep->procs.size(); }

uint64_t ProcedureAnalyzer::begin(size_t i) const { return impl_->prep->procs.begin(i); }

std::optional<size_t> ProcedureAnalyzer::find(uint64_t addr) const {
  const ProcedureTable& t = impl_->prep->procs;
  size_t lo = 0, hi = t.size();  // the first procedure beginning after addr
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (t.begin(mid) <= addr) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0 || addr >= t.end(lo - 1)) return std::nullopt;
  return lo - 1;
}

Procedure ProcedureAnalyzer::analyze(size_t i) const { return analyze_procedure(*impl_->ctx, impl_->prep->procs.at(i)); }

std::vector<CallSite> ProcedureAnalyzer::call_sites(size_t i) const {
  const Prepared& p = *impl_->prep;
  if (!p.gpu_cfg) return {};
  const uint64_t begin = p.procs.begin(i), end = p.procs.end(i);
  std::optional<Cfg> cfg = p.gpu_control_flow_of(begin, end);
  if (!cfg) return {};
  std::vector<CallSite> out;
  for (const CallSite& c : cfg->call_sites)
    if (c.addr >= begin && c.addr < end) out.push_back(c);
  return out;
}

const Structure& ProcedureAnalyzer::shell() const { return impl_->shell; }

namespace {

// Formatted procedures waiting for their turn in the output: in memory up to `window` bytes,
// beyond it in an unlinked temporary file next to the output. A spilled procedure costs 8
// bytes of memory (its offset); its length, file and id count head its record in the file.
// MT: externally synchronized.
class FragmentStore {
public:
  FragmentStore(std::filesystem::path near, size_t window, size_t procedures)
      : near_(std::move(near)), window_(window), n_(procedures) {}
  FragmentStore(const FragmentStore&) = delete;
  FragmentStore& operator=(const FragmentStore&) = delete;
  ~FragmentStore() {
    if (fd_ >= 0) ::close(fd_);
  }

  Status put(size_t i, FormattedProcedure f) {
    if (held_ + f.text.size() <= window_) {
      held_ += f.text.size();
      memory_.emplace(i, std::move(f));
      return Status();
    }
    if (f.text.size() > UINT32_MAX || f.elements > UINT32_MAX) return Status::error("procedure too large to spill");
    if (fd_ < 0) HPC_RETURN_IF_ERROR(open_spill());
    if (spilled_.empty()) spilled_.resize(n_);
    spilled_[i] = end_ + 1;
    uint32_t head[3] = {static_cast<uint32_t>(f.text.size()), f.file, static_cast<uint32_t>(f.elements)};
    buffer_.append(reinterpret_cast<const char*>(head), sizeof head);
    buffer_ += f.text;  // written 1 MiB at a time
    end_ += sizeof head + f.text.size();
    spilled_bytes_ += f.text.size();
    if (buffer_.size() >= kBuffer) HPC_RETURN_IF_ERROR(flush());
    return Status();
  }
  bool has(size_t i) const { return memory_.count(i) != 0 || (!spilled_.empty() && spilled_[i] != 0); }
  Expected<FormattedProcedure> take(size_t i) {
    if (auto it = memory_.find(i); it != memory_.end()) {
      FormattedProcedure f = std::move(it->second);
      memory_.erase(it);
      held_ -= f.text.size();
      return f;
    }
    uint64_t at = spilled_.at(i) - 1;
    // The head and, for most procedures, the whole text in one read.
    uint32_t head[3];
    scratch_.resize(kFirstRead);
    HPC_ASSIGN_OR_RETURN(size_t got, read_at(at, scratch_.data(), scratch_.size(), sizeof head));
    std::memcpy(head, scratch_.data(), sizeof head);
    FormattedProcedure f;
    f.file = head[1];
    f.elements = head[2];
    size_t have = std::min<size_t>(head[0], got - sizeof head);
    f.text.assign(scratch_.data() + sizeof head, have);
    if (have < head[0]) {
      f.text.resize(head[0]);
      HPC_RETURN_IF_ERROR(read_at(at + sizeof head + have, f.text.data() + have, head[0] - have, head[0] - have).status());
    }
    spilled_[i] = 0;
    return f;
  }
  uint64_t spilled_bytes() const { return spilled_bytes_; }

private:
  static constexpr size_t kBuffer = size_t(1) << 20;
  static constexpr size_t kFirstRead = size_t(16) << 10;
  // Up to `len` bytes at `offset`, at least `need` (the buffer is flushed first if it holds them).
  Expected<size_t> read_at(uint64_t offset, char* to, size_t len, size_t need) {
    if (offset + need > flushed_) HPC_RETURN_IF_ERROR(flush());
    size_t done = 0;
    while (done < need) {
      ssize_t n = ::pread(fd_, to + done, len - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Status::error(spill_name_ + ": cannot read back: " + (n < 0 ? std::strerror(errno) : "short file"));
      done += static_cast<size_t>(n);
    }
    return done;
  }
  Status flush() {
    for (size_t done = 0; done < buffer_.size();) {
      ssize_t n = ::pwrite(fd_, buffer_.data() + done, buffer_.size() - done, static_cast<off_t>(flushed_ + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Status::error(spill_name_ + ": " + std::strerror(n < 0 ? errno : ENOSPC));
      done += static_cast<size_t>(n);
    }
    flushed_ += buffer_.size();
    buffer_.clear();
    return Status();
  }
  Status open_spill() {
    std::filesystem::path dir = near_.parent_path();
    if (dir.empty()) dir = ".";
    std::string name = (dir / ("." + near_.filename().string() + ".spill-XXXXXX")).string();
    fd_ = ::mkstemp(name.data());
    if (fd_ < 0) return Status::error(name + ": cannot create a temporary file: " + std::strerror(errno));
    ::unlink(name.c_str());  // gone with the descriptor, whatever happens
    spill_name_ = name;
    return Status();
  }
  std::filesystem::path near_;
  size_t window_, n_;
  size_t held_ = 0;
  std::unordered_map<size_t, FormattedProcedure> memory_;
  std::vector<uint64_t> spilled_;  // by procedure, once anything is spilled: offset + 1, 0 if not there
  int fd_ = -1;
  uint64_t end_ = 0, flushed_ = 0, spilled_bytes_ = 0;
  std::string buffer_;   // spilled bytes from flushed_ to end_
  std::string scratch_;  // the first read of a record
  std::string spill_name_;
};

}  // namespace

Status write_binary_structure(const std::string& path, const Options& opt, const std::string& output,
                              std::string* warnings) {
  HPC_ASSIGN_OR_RETURN(auto prep, prepare(path, opt, warnings));
  // The output named once: errors from writing it name it already.
  auto failed = [&](Status st) {
    return st.ok() || st.message().rfind(output + ": ", 0) == 0 ? st : st.prepend(output);
  };
  AnalysisContext ctx = prep->context();
  const ProcedureTable& fns = prep->procs;
  const DebugInfo& debug = *prep->debug;
  // Analysis order: by compilation unit (the one covering the entry; code without DWARF
  // last), by address within it, so that a unit is read once and dropped when its
  // procedures are done, whatever the budget.
  std::vector<uint32_t> work(fns.size());
  {
    std::vector<uint32_t> unit(fns.size());
    for (size_t i = 0; i < fns.size(); ++i) {
      work[i] = static_cast<uint32_t>(i);
      unit[i] = debug.unit_of(fns.begin(i), fns.end(i));
    }
    std::stable_sort(work.begin(), work.end(), [&](size_t a, size_t b) { return unit[a] < unit[b]; });
  }
  // Output order: a CPU procedure's file is that of its entry's line, known before analysis,
  // so the output order is too and procedures are written as soon as their turn comes.
  // GPU procedures may take their file from another line: their order is known at the end.
  std::vector<uint32_t> order;
  if (!prep->cuda) {
    std::vector<uint64_t> entries;
    entries.reserve(fns.size());
    for (uint32_t i : work) entries.push_back(fns.begin(i));
    std::vector<SourceLoc> locs = debug.lines_at(entries);
    std::vector<uint64_t>().swap(entries);
    std::vector<uint32_t> files(fns.size());
    for (size_t k = 0; k < work.size(); ++k) files[work[k]] = locs[k].file;
    std::vector<SourceLoc>().swap(locs);
    order = file_order(files);
    prep->image->release_pages();
  }
  auto w = StructureFileWriter::create(output, path, prep->debug, prep->cuda, prep->gpu_cfg);
  if (!w) return failed(w.status());
  ProcedureFormatter formatter(path, prep->debug, prep->cuda);
  FragmentStore store(output, opt.hold_bytes, fns.size());
  std::vector<uint32_t> files(prep->cuda ? fns.size() : 0);
  // A pipeline: indices in analysis order -> procedures analysed and formatted in parallel
  // -> held until their turn in the output, written and freed. At most `batch` procedures
  // are in flight, and no thread waits at a barrier between batches.
  Status written;
  std::atomic<bool> stop{false};
  size_t next = 0, out = 0;
  std::atomic<size_t> done{0};
  size_t sinceRelease = 0;
  auto drain = [&]() -> Status {
    while (out < order.size() && store.has(order[out])) {
      HPC_ASSIGN_OR_RETURN(auto f, store.take(order[out]));
      HPC_RETURN_IF_ERROR((*w)->add_formatted(f));
      ++out;
    }
    return Status();
  };
  auto pipeline = [&] {
    tbb::parallel_pipeline(
        std::max<size_t>(1, opt.batch),
        tbb::make_filter<void, size_t>(tbb::filter_mode::serial_in_order,
                                       [&](tbb::flow_control& fc) -> size_t {
                                         if (next >= work.size() || stop.load()) {
                                           fc.stop();
                                           return 0;
                                         }
                                         return work[next++];
                                       }) &
            tbb::make_filter<size_t, std::pair<size_t, Expected<FormattedProcedure>>>(
                tbb::filter_mode::parallel,
                [&](size_t i) {
                  Procedure p = analyze_procedure(ctx, fns.at(i));
                  auto f = formatter.format(p);
                  size_t k = done.fetch_add(1, std::memory_order_relaxed) + 1;
                  if (opt.progress) opt.progress(k, fns.size());
                  return std::make_pair(i, std::move(f));
                }) &
            tbb::make_filter<std::pair<size_t, Expected<FormattedProcedure>>, void>(
                tbb::filter_mode::serial_out_of_order, [&](std::pair<size_t, Expected<FormattedProcedure>> r) {
                  if (!written.ok()) return;
                  auto& [i, f] = r;
                  if (!f) {
                    written = f.status();
                  } else {
                    if (!files.empty()) files[i] = f->file;
                    written = store.put(i, std::move(*f));
                    if (written.ok()) written = drain();
                  }
                  if (!written.ok()) stop = true;
                  // Code and DWARF already read need not stay resident (read again if needed).
                  if (++sinceRelease % 16 == 0) prep->image->release_pages_if_over();
                }));
  };
  if (opt.nested) {
    pipeline();
  } else {
    tbb::task_arena arena(std::max(1, opt.jobs));
    arena.execute(pipeline);
  }
  HPC_RETURN_IF_ERROR(failed(written));
  if (prep->cuda) {
    order = file_order(files);
    HPC_RETURN_IF_ERROR(failed(drain()));
  }
  if (out != order.size()) return failed(Status::error("internal error: procedures missing from the output"));
  return failed((*w)->finish());
}

}  // namespace hpc::structure
