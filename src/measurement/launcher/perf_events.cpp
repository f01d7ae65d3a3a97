#include "perf_events.hpp"

#include <linux/perf_event.h>
#include <perfmon/pfmlib_perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <strings.h>

namespace hpc::measurement {
namespace {

struct Builtin {
  const char* name;
  uint32_t type;
  uint64_t config;
  const char* help;
};

constexpr Builtin kBuiltins[] = {
    {"cpu-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK, "CPU clock, in nanoseconds (per-thread timer)"},
    {"task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, "task clock, in nanoseconds"},
    {"page-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS, "page faults"},
    {"faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS, "page faults (alias)"},
    {"minor-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MIN, "minor page faults"},
    {"major-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MAJ, "major page faults"},
    {"context-switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES, "context switches"},
    {"cs", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES, "context switches (alias)"},
    {"cpu-migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS, "CPU migrations"},
    {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, "CPU cycles (needs a hardware PMU)"},
    {"cpu-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, "CPU cycles (alias)"},
    {"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS, "retired instructions (needs a hardware PMU)"},
    {"cache-references", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_REFERENCES, "last-level cache references"},
    {"cache-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES, "last-level cache misses"},
    {"branches", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_INSTRUCTIONS, "retired branches"},
    {"branch-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES, "mispredicted branches"},
};

bool pfmReady() {
  static int rc = pfm_initialize();
  return rc == PFM_SUCCESS;
}

int openCounter(const PerfAttr& a, bool frequency, uint64_t value) {
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = a.type;
  attr.config = a.config;
  attr.config1 = a.config1;
  attr.config2 = a.config2;
  attr.disabled = 1;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  attr.freq = frequency ? 1 : 0;
  if (frequency) attr.sample_freq = value;
  else attr.sample_period = value;
  return int(syscall(SYS_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
}

}  // namespace

Expected<PerfAttr> resolvePerfEvent(const std::string& name) {
  for (const Builtin& b : kBuiltins)
    if (strcasecmp(b.name, name.c_str()) == 0) return PerfAttr{b.type, b.config, 0, 0};
  if (!pfmReady()) return Status::error("perf::" + name + ": unknown event (libpfm4 unavailable)");
  perf_event_attr attr{};
  attr.size = sizeof attr;
  pfm_perf_encode_arg_t arg{};
  arg.size = sizeof arg;
  arg.attr = &attr;
  int rc = pfm_get_os_event_encoding(name.c_str(), PFM_PLM3, PFM_OS_PERF_EVENT, &arg);
  if (rc != PFM_SUCCESS)
    return Status::error("perf::" + name + ": " + pfm_strerror(rc) + " (see hpcrun -L)");
  return PerfAttr{attr.type, attr.config, attr.config1, attr.config2};
}

Status checkPerfEvent(const std::string& name, const PerfAttr& attr, bool frequency, uint64_t value) {
  int fd = openCounter(attr, frequency, value);
  if (fd >= 0) {
    close(fd);
    return Status();
  }
  int err = errno;
  std::string why = std::strerror(err);
  if (err == ENOENT || err == EOPNOTSUPP)
    why = attr.type == PERF_TYPE_HARDWARE || attr.type >= PERF_TYPE_MAX
              ? "no hardware performance counters on this machine"
              : "not supported by this kernel";
  else if (err == EACCES || err == EPERM)
    why += " (see /proc/sys/kernel/perf_event_paranoid)";
  else if (err == EINVAL && frequency)
    why += " (frequency above kernel.perf_event_max_sample_rate?)";
  return Status::error("perf::" + name + ": cannot be measured: " + why);
}

void listEvents() {
  std::printf("Timers (period in microseconds, default @%d):\n", 5000);
  std::printf("  %-28s %s\n", "CPUTIME", "thread CPU time (POSIX per-thread CPU-time timer; fires at the kernel tick)");
  std::printf("  %-28s %s\n", "REALTIME", "wall-clock time, including time blocked");
  std::printf("\nI/O (no period: every call counts):\n");
  std::printf("  %-28s %s\n", "IO", "bytes read and written by read/write, stdio's fread/fwrite/printf/fgets and kin, at each call");
  std::printf("\nHeap (no period: -mp PROB draws the allocations, default 0.1):\n");
  std::printf("  %-28s %s\n", "MEMLEAK", "bytes allocated by malloc and kin at each drawn call, and freed again: what leaked where");
  std::printf("\nLinux perf events (perf::NAME[@PERIOD|@fFREQ], default @f300; the perf:: may be left out;\n"
              "LEADER[@RATE],MEMBER... samples LEADER and reads each MEMBER at its samples):\n");
  for (const Builtin& b : kBuiltins) {
    PerfAttr a{b.type, b.config, 0, 0};
    int fd = openCounter(a, true, 300);
    if (fd >= 0) close(fd);
    std::printf("  perf::%-22s %s%s\n", b.name, b.help, fd >= 0 ? "" : "  [not available here]");
  }
  if (!pfmReady()) return;
  int shown = 0;
  for (int pmu = PFM_PMU_NONE; pmu < PFM_PMU_MAX; ++pmu) {
    pfm_pmu_info_t pinfo{};
    pinfo.size = sizeof pinfo;
    if (pfm_get_pmu_info(pfm_pmu_t(pmu), &pinfo) != PFM_SUCCESS || !pinfo.is_present) continue;
    if (pinfo.type == PFM_PMU_TYPE_OS_GENERIC) continue;  // the perf generic names are above
    if (shown++ == 0) std::printf("\nNative events (libpfm4, perf::PMU::EVENT[:UMASK]):\n");
    for (int e = pinfo.first_event; e != -1; e = pfm_get_event_next(e)) {
      pfm_event_info_t einfo{};
      einfo.size = sizeof einfo;
      if (pfm_get_event_info(e, PFM_OS_NONE, &einfo) != PFM_SUCCESS) continue;
      std::printf("  perf::%s::%-20s %.60s\n", pinfo.name, einfo.name, einfo.desc ? einfo.desc : "");
    }
  }
  if (shown == 0) std::printf("\n(no hardware PMU detected: native hardware events are unavailable)\n");
}

}  // namespace hpc::measurement
