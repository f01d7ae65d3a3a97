#include "presentation/overview.hpp"

#include "presentation/views.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <string_view>
#include <unordered_map>

namespace hpc::present {

namespace {

enum class ModuleKind : uint8_t { App, System, Mpi, OpenMp, GpuRuntime };

bool starts(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

ModuleKind module_kind(const std::string& path) {
  const std::string base = base_name(path);
  std::string_view b = base;
  for (std::string_view p : {"libmpi", "libpmpi", "libmpich", "libopen-pal", "libopen-rte", "libmca_", "mca_",
                             "libucp", "libucs", "libuct", "libucm", "libfabric", "libpsm", "libhcoll", "libpmix",
                             "libmpitrampoline", "libfmpich", "libmpl"})
    if (starts(b, p)) return ModuleKind::Mpi;
  for (std::string_view p : {"libgomp", "libomp.", "libomp-", "libiomp", "libomptarget", "libarcher"})
    if (starts(b, p)) return ModuleKind::OpenMp;
  for (std::string_view p : {"libcuda", "libcudart", "libcupti", "libnvidia-", "libnvrtc", "libOpenCL", "libpocl",
                             "libamdhip64", "libhsa-runtime", "libroctracer", "librocprofiler", "libze_", "libigc"})
    if (starts(b, p)) return ModuleKind::GpuRuntime;
  // The system's libraries, and those the runtimes above are built on (an MPI library's
  // progress thread waits in libevent's loop): the kind of their caller.
  for (std::string_view p : {"libc.so", "libc-", "libm.so", "libm-", "libmvec", "libstdc++", "libc++", "libgcc_s",
                             "ld-linux", "ld64.so", "libpthread", "libdl.", "libdl-", "librt.", "librt-",
                             "libunwind", "libatomic", "linux-vdso", "[vdso]", "libevent", "libhwloc", "libnuma",
                             "libltdl", "libudev", "libibverbs", "librdmacm", "libnl-", "libffi",
                             // compilers the GPU runtimes build kernels with (PoCL's clBuildProgram)
                             "libLLVM", "libclang", "libnvJitLink", "libnvptxcompiler", "libamd_comgr"})
    if (starts(b, p)) return ModuleKind::System;
  if (b.size() > 5 && b.substr(b.size() - 5) == ".vdso") return ModuleKind::System;  // <build id>.vdso
  return ModuleKind::App;
}

// libc's transfers and waits by name, its internal prefixes taken off (__libc_write,
// __GI___poll, _IO_fwrite, __read_chk).
std::string_view bare_libc_name(std::string_view n) {
  for (bool again = true; again;) {
    again = false;
    for (std::string_view p : {"__GI_", "__libc_", "__"}) {
      if (starts(n, p)) {
        n.remove_prefix(p.size());
        again = true;
      }
    }
  }
  if (n.size() > 4 && n.substr(n.size() - 4) == "_chk") n.remove_suffix(4);
  if (n.size() > 9 && n.substr(n.size() - 9) == "_unlocked") n.remove_suffix(9);
  return n;
}

bool io_name(std::string_view raw) {
  if (starts(raw, "_IO_")) return true;
  const std::string_view n = bare_libc_name(raw);
  for (std::string_view s :
       {"read", "write", "pread", "pread64", "pwrite", "pwrite64", "readv", "writev", "preadv", "preadv64",
        "preadv2", "pwritev", "pwritev64", "pwritev2", "open", "open64", "openat", "openat64", "creat", "close",
        "fsync", "fdatasync", "sync_file_range", "fread", "fwrite", "fflush", "fopen", "fopen64", "fdopen",
        "fclose", "fgets", "fputs", "fputc", "fgetc", "getc", "putc", "getline", "getdelim", "puts", "printf",
        "fprintf", "vfprintf", "vprintf", "dprintf", "scanf", "fscanf", "vfscanf", "sendfile", "sendfile64",
        "copy_file_range", "splice", "recv", "recvfrom", "recvmsg", "recvmmsg", "send", "sendto", "sendmsg",
        "sendmmsg", "connect", "accept", "accept4", "stat", "stat64", "fstat", "fstat64", "lstat", "statx",
        "newfstatat", "unlink", "rename", "mkdir", "getdents64", "opendir", "readdir", "readdir64"})
    if (n == s) return true;
  return false;
}

bool wait_name(std::string_view raw) {
  const std::string_view n = bare_libc_name(raw);
  if (starts(n, "futex") || starts(n, "lll_lock_wait") || starts(n, "pthread_timedjoin") ||
      starts(n, "pthread_clockjoin") || starts(n, "sigtimedwait") || starts(n, "sigwait"))
    return true;
  // Locks and conditions where they wait, not where they let go or only try.
  if (starts(n, "pthread_rwlock_") || starts(n, "pthread_mutex_"))
    return n.find("lock") != std::string_view::npos && n.find("unlock") == std::string_view::npos &&
           n.find("try") == std::string_view::npos && n.find("init") == std::string_view::npos;
  if (starts(n, "pthread_cond_") || starts(n, "sem_")) return n.find("wait") != std::string_view::npos;
  for (std::string_view s : {"nanosleep", "clock_nanosleep", "usleep", "sleep", "poll", "ppoll", "select",
                             "pselect", "pselect6", "epoll_wait", "epoll_pwait", "epoll_pwait2", "pause",
                             "sigsuspend", "pthread_join", "wait", "waitpid", "wait3", "wait4", "waitid",
                             "msgrcv", "semop", "semtimedop", "aio_suspend", "sched_yield", "pthread_barrier_wait"})
    if (n == s) return true;
  return false;
}

bool mpi_name(std::string_view n) {
  return starts(n, "MPI_") || starts(n, "PMPI_") || starts(n, "mpi_") || starts(n, "pmpi_") || starts(n, "MPIX_");
}
bool openmp_name(std::string_view n) {
  return starts(n, "GOMP_") || starts(n, "__kmpc_") || starts(n, "__kmp_") || starts(n, "gomp_");
}

struct Frame {
  uint32_t ctx;
  double inc;
  WorkKind kind;
  uint32_t where;  // index into places
  int8_t helper;   // -1: the thread's first function not met yet; 1: a runtime's thread
  uint32_t root;   // the thread's first function's context, numbered from 1 (0: not met yet)
};

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The whole run's total of a metric whose name (lower case) contains any of `names`.
std::optional<double> counter(const Experiment& e, std::initializer_list<const char*> names) {
  for (const MetricView& m : e.metrics()) {
    const std::string n = lower(m.name);
    for (const char* want : names)
      if (n.find(want) != std::string::npos && n.find("stall") == std::string::npos) return e.inclusive(0, m);
  }
  return std::nullopt;
}

std::string percent(double part, double whole) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f%%", whole > 0 ? 100.0 * part / whole : 0.0);
  return b;
}

}  // namespace

const char* work_kind_name(WorkKind k) {
  switch (k) {
  case WorkKind::Compute: return "computation";
  case WorkKind::Mpi: return "MPI";
  case WorkKind::OpenMp: return "OpenMP runtime";
  case WorkKind::GpuRuntime: return "GPU runtime (CPU)";
  case WorkKind::Io: return "I/O";
  case WorkKind::Waiting: return "waiting";
  case WorkKind::Idle: return "idle threads";
  }
  return "?";
}

const char* work_kind_key(WorkKind k) {
  switch (k) {
  case WorkKind::Compute: return "compute";
  case WorkKind::Mpi: return "mpi";
  case WorkKind::OpenMp: return "openmp";
  case WorkKind::GpuRuntime: return "gpu-runtime";
  case WorkKind::Io: return "io";
  case WorkKind::Waiting: return "waiting";
  case WorkKind::Idle: return "idle";
  }
  return "?";
}

Overview overview(const Experiment& e, size_t metric, size_t where) {
  Overview o;
  if (metric >= e.metrics().size()) return o;
  const MetricView& m = e.metrics()[metric];
  o.total = e.inclusive(0, m);

  // Per function index: its module's kind (computed once).
  const auto& fns = e.meta().functions;
  const auto& mods = e.meta().modules;
  std::vector<int8_t> modKind(mods.size(), -1);
  auto kindOfModule = [&](uint32_t mod) {
    if (mod >= mods.size()) return ModuleKind::App;
    if (modKind[mod] < 0) modKind[mod] = int8_t(module_kind(mods[mod].path));
    return ModuleKind(modKind[mod]);
  };

  std::vector<std::string> places{""};
  std::unordered_map<std::string, uint32_t> placeIds;
  auto place = [&](const std::string& s) {
    auto [it, fresh] = placeIds.try_emplace(s, uint32_t(places.size()));
    if (fresh) places.push_back(s);
    return it->second;
  };
  // Values by thread root, kind and place; a root's waits are idle where they are nearly
  // all its time.
  std::vector<std::array<double, kWorkKinds>> rootKinds(1);
  std::unordered_map<uint64_t, double> byRootKindPlace;

  std::vector<uint32_t> mpiEntries;  // where a path enters MPI (not on a runtime's thread)
  std::vector<Frame> stack;
  std::vector<uint32_t> kids;
  stack.push_back({0, o.total, WorkKind::Compute, 0, -1, 0});
  while (!stack.empty()) {
    Frame f = stack.back();
    stack.pop_back();
    WorkKind kind = f.kind;
    uint32_t at = f.where;
    int8_t helper = f.helper;
    uint32_t root = f.root;
    const uint32_t fn = f.ctx ? e.function_of(f.ctx) : db::kNone;
    if (fn != db::kNone && fn < fns.size()) {
      // The symbol's own name: no " [module]" that names a function without source, no
      // version ("@@GLIBC_2.2.5").
      std::string_view name = fns[fn].name ? std::string_view(*fns[fn].name) : std::string_view();
      if (const size_t br = name.rfind(" ["); br != std::string_view::npos && name.back() == ']') name = name.substr(0, br);
      if (const size_t at = name.find('@'); at != std::string_view::npos && at > 0) name = name.substr(0, at);
      const ModuleKind mk = kindOfModule(fns[fn].module);
      if (helper < 0) {
        helper = mk == ModuleKind::Mpi || mk == ModuleKind::GpuRuntime ? 1 : 0;
        root = uint32_t(rootKinds.size());
        rootKinds.push_back({});
      }
      WorkKind now = kind;
      if (kind == WorkKind::Idle) now = kind;
      else if (helper == 1 && wait_name(name)) now = WorkKind::Idle;
      else if (mk == ModuleKind::Mpi || mpi_name(name)) now = WorkKind::Mpi;
      else if (mk == ModuleKind::OpenMp || openmp_name(name)) now = WorkKind::OpenMp;
      else if (mk == ModuleKind::GpuRuntime) now = WorkKind::GpuRuntime;
      else if (mk == ModuleKind::App) now = WorkKind::Compute;
      else if (kind == WorkKind::Compute && io_name(name)) now = WorkKind::Io;
      else if (kind == WorkKind::Compute && wait_name(name)) now = WorkKind::Waiting;
      // Entering a kind names the place; computation is named by its innermost function.
      if (now != kind || now == WorkKind::Compute) at = place(e.function_name(fn));
      if (now == WorkKind::Mpi && kind != WorkKind::Mpi && helper == 0) mpiEntries.push_back(f.ctx);
      kind = now;
    }
    e.children(f.ctx, kids);
    double below = 0;
    const size_t base = stack.size();
    for (uint32_t c : kids) {
      const double v = e.inclusive(c, m);
      if (v == 0) continue;  // nothing under it
      below += v;
      stack.push_back({c, v, kind, at, helper, root});
    }
    std::reverse(stack.begin() + long(base), stack.end());
    const double self = f.inc - below;
    if (std::fabs(self) > 1e-12 * std::max(1.0, std::fabs(o.total))) {
      rootKinds[root][size_t(kind)] += self;
      byRootKindPlace[(uint64_t(root) << 36) | (uint64_t(kind) << 32) | at] += self;
    }
  }
  // A thread that did nothing but wait (a helper blocked in sigwait or on a condition, a
  // main thread joining its workers): idle. REALTIME counts its whole life.
  std::vector<bool> idleRoot(rootKinds.size(), false);
  for (size_t r = 1; r < rootKinds.size(); ++r) {
    double all = 0;
    for (double v : rootKinds[r]) all += v;
    const double waits = rootKinds[r][size_t(WorkKind::Waiting)];
    idleRoot[r] = waits > 0 && waits + rootKinds[r][size_t(WorkKind::Idle)] >= 0.95 * all;
  }
  std::array<std::unordered_map<uint32_t, double>, kWorkKinds> byPlace;
  for (const auto& [key, v] : byRootKindPlace) {
    const uint32_t r = uint32_t(key >> 36), p = uint32_t(key & 0xffffffffu);
    auto k = WorkKind((key >> 32) & 0xf);
    if (k == WorkKind::Waiting && idleRoot[r]) k = WorkKind::Idle;
    o.kinds[size_t(k)].value += v;
    byPlace[size_t(k)][p] += v;
  }
  for (size_t k = 0; k < kWorkKinds; ++k) {
    auto& w = o.kinds[k].where;
    for (auto& [id, v] : byPlace[k])
      if (v > 0) w.emplace_back(places[id].empty() ? std::string("<no function>") : places[id], v);
    std::sort(w.begin(), w.end(), [](const auto& a, const auto& b) { return a.second != b.second ? a.second > b.second : a.first < b.first; });
    if (w.size() > where) w.resize(where);
  }

  // MPI's share of each profile's time: its entries' inclusive values against the profile's
  // total (the root's, else its threads' roots').
  if (!mpiEntries.empty() && m.incProp != kNoMetric) {
    std::unordered_map<uint32_t, double> mpi, all;
    auto add = [&](uint32_t ctx, std::unordered_map<uint32_t, double>& into) {
      auto v = profile_values(e, ctx, m.incProp);
      if (v)
        for (const auto& pv : *v)
          if (e.profile_selected(pv.profIndex)) into[pv.profIndex] += pv.value;
    };
    for (uint32_t c : mpiEntries) add(c, mpi);
    add(0, all);
    if (all.empty())
      for (uint32_t c : e.children(0)) add(c, all);
    Overview::Spread sp;
    for (const auto& [p, v] : mpi) {
      auto t = all.find(p);
      if (v <= 0 || t == all.end() || t->second <= 0) continue;
      const double share = std::min(1.0, v / t->second);
      if (sp.profiles == 0 || share < sp.min) sp.min = share, sp.minProfile = e.profile_label(p);
      if (sp.profiles == 0 || share > sp.max) sp.max = share, sp.maxProfile = e.profile_label(p);
      ++sp.profiles;
    }
    if (sp.profiles >= 2) o.mpiSpread = sp;
  }

  // The GPU's operations, where measured.
  static const std::pair<const char*, const char*> kGpu[] = {
      {"GKER (sec)", "kernel execution"},       {"GMEM (sec)", "memory allocation and release"},
      {"GMSET (sec)", "memory set"},            {"GXCOPY (sec)", "explicit data copy"},
      {"GICOPY (sec)", "implicit data copy"},   {"GSYNC (sec)", "synchronization"}};
  for (const auto& [name, what] : kGpu) {
    int mi = -1;
    for (size_t i = 0; i < e.metrics().size(); ++i)
      if (e.metrics()[i].name == name) mi = int(i);
    if (mi < 0) continue;
    if (const double v = e.inclusive(0, e.metrics()[size_t(mi)]); v != 0) o.gpu.emplace_back(what, v);
  }

  const auto cycles = counter(e, {"cycles", "tot_cyc"});
  const auto instructions = counter(e, {"instructions", "tot_ins"});
  if (cycles && instructions && *cycles > 0) o.ipc = *instructions / *cycles;

  // The verdict: the largest kind besides computation where it takes 30 % or more, else
  // computation, memory-bound where instructions per cycle are low. Shares are of the time
  // the runtimes' threads were not idle.
  const double idle = o.kinds[size_t(WorkKind::Idle)].value;
  const double total = o.total - idle > 0 ? o.total - idle : 1;
  size_t top = 1;
  for (size_t k = 2; k < kWorkKinds; ++k)
    if (k != size_t(WorkKind::Idle) && o.kinds[k].value > o.kinds[top].value) top = k;
  const double compute = o.kinds[0].value;
  const double other = o.kinds[top].value;
  double gpuOps = 0;
  for (const auto& g : o.gpu) gpuOps += g.second;
  if (o.total <= 0) {
    o.verdict = "no data";
    o.reason = "the metric's total is 0";
  } else if (other >= 0.3 * total && other >= compute) {
    static const char* kBound[] = {"compute-bound", "communication-bound", "OpenMP-runtime-bound",
                                   "GPU-runtime-bound", "I/O-bound", "wait-bound", "idle"};
    o.verdict = kBound[top];
    o.reason = percent(other, total) + " of the time in " + work_kind_name(WorkKind(top)) +
               (o.kinds[top].where.empty() ? "" : ", most in " + o.kinds[top].where.front().first) + "; " +
               percent(compute, total) + " in computation";
  } else if (o.ipc && *o.ipc < 0.8) {
    char b[96];
    std::snprintf(b, sizeof b, "%s of the time in computation at %.2f instructions per cycle",
                  percent(compute, total).c_str(), *o.ipc);
    o.verdict = "memory-bound";
    o.reason = std::string(b) + ": the processor mostly waits for data";
  } else {
    o.verdict = "compute-bound";
    o.reason = percent(compute, total) + " of the time in computation" +
               (o.kinds[0].where.empty() ? "" : ", most in " + o.kinds[0].where.front().first);
    if (o.ipc) {
      char b[64];
      std::snprintf(b, sizeof b, " at %.2f instructions per cycle", *o.ipc);
      o.reason += b;
    } else {
      o.reason += " (whether memory-bound is not known: measure perf::cycles and perf::instructions where the "
                  "processor counts them)";
    }
  }
  // MPI's share apart by 20 points or more between profiles, where it matters: imbalance.
  if (o.mpiSpread && o.kinds[size_t(WorkKind::Mpi)].value >= 0.1 * total &&
      o.mpiSpread->max - o.mpiSpread->min >= 0.2)
    o.reason += "; MPI's share ranges from " + percent(o.mpiSpread->min, 1) + " (" + o.mpiSpread->minProfile +
                ") to " + percent(o.mpiSpread->max, 1) + " (" + o.mpiSpread->maxProfile + ") across " +
                std::to_string(o.mpiSpread->profiles) +
                " profiles: load imbalance, the ranks with less to compute wait for the others";
  if (idle > 0 && o.verdict != "no data")
    o.reason += "; shares leave out the idle threads' time";
  if (gpuOps > 0 && o.verdict != "no data") {
    char b[64];
    std::snprintf(b, sizeof b, "; the GPU's operations took %.6g s", gpuOps);
    o.reason += b;
  }
  return o;
}

}  // namespace hpc::present
