// hpcprof: command line of the reference (see shared/reference/man/hpcprof.rst).
#include <malloc.h>
#include <sys/prctl.h>
#include <tbb/global_control.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "analysis/io.hpp"
#include "analysis/options.hpp"
#include "analysis/pipeline.hpp"
#include "common/file.hpp"

using namespace hpc;
using namespace hpc::analysis;

namespace {

// Touching fresh memory costs hpcprof much of its time in page faults (one trap per 4 KiB
// page, a dear one on a virtual machine: it was a quarter of the CPU time on the benchmark's
// VM). glibc's malloc backs its heap with transparent huge pages when its tunable
// glibc.malloc.hugetlb=1 is set, but reads tunables only when a process starts: so set it and
// start again, once, where the kernel gives huge pages on request. HPCPROF_NO_HUGEPAGES=1
// keeps the process as it is.
void restartWithHugePages(char** argv) {
  if (std::getenv("HPCPROF_RESTARTED")) {
    // Started from /proc/self/exe, the process is named "exe" (top, pgrep): name it again.
    const char* slash = std::strrchr(argv[0], '/');
    ::prctl(PR_SET_NAME, slash ? slash + 1 : argv[0], 0, 0, 0);
    return;
  }
  if (std::getenv("HPCPROF_NO_HUGEPAGES")) return;
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  std::string t = tunables ? tunables : "";
  if (t.find("glibc.malloc.hugetlb") != std::string::npos) return;
  std::FILE* f = std::fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (!f) return;
  char mode[128] = {};
  const bool read = std::fgets(mode, sizeof mode, f) != nullptr;
  std::fclose(f);
  if (!read || std::strstr(mode, "[never]")) return;
  t = t.empty() ? "glibc.malloc.hugetlb=1" : t + ":glibc.malloc.hugetlb=1";
  if (::setenv("GLIBC_TUNABLES", t.c_str(), 1) != 0 || ::setenv("HPCPROF_RESTARTED", "1", 1) != 0) return;
  ::execv("/proc/self/exe", argv);
  // Could not start again: go on as we are, without the tunable.
  if (tunables) ::setenv("GLIBC_TUNABLES", tunables, 1);
  else ::unsetenv("GLIBC_TUNABLES");
}

int fail(const std::string& msg) {
  std::fprintf(stderr, "hpcprof: error: %s\n", msg.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  restartWithHugePages(argv);
  // Per-profile buffers of a few hundred KB come and go thousands of times: keep them in
  // the heap instead of a fresh mapping each (page faults, a TLB flush per unmap).
  mallopt(M_MMAP_THRESHOLD, 4 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
  // One heap for all threads: a thread's own arena is mapped apart from the main heap, grows
  // by mprotect a few pages at a time and gets no huge pages, so its fresh pages fault one by
  // one (unify at -j2 took 0.11 s against 0.05 s with one arena; 500 profiles). The threads
  // allocate little after their first profile, so they seldom meet on its lock.
  mallopt(M_ARENA_MAX, 1);
  auto parsed = parseCommandLine(argc, argv, "hpcprof");
  if (auto* rc = std::get_if<int>(&parsed)) return *rc;
  const CommandLine& cl = std::get<CommandLine>(parsed);

  tbb::global_control parallelism(tbb::global_control::max_allowed_parallelism, cl.threads);
  auto job = prepareJob(cl, "hpcprof");
  if (!job.ok()) return fail(job.status().message());

  AtomicOutput out(job->output, AtomicOutput::Kind::Directory);
  if (Status st = out.begin(); !st.ok()) return fail(st.message());
  auto sink = createDatabase(out.temp_path());
  if (!sink.ok()) return fail(sink.status().message());
  auto result = runPipeline(job->profiles, job->structure.get(), **sink, job->options);
  if (!result.ok()) return fail(result.status().message());
  sink->reset();  // closes the files before the rename
  if (Status st = out.commit(); !st.ok()) return fail(st.message());
  if (result->skipped)
    std::fprintf(stderr, "hpcprof: %u of %u profiles were unreadable and skipped\n", result->skipped,
                 result->skipped + result->profiles);
  if (cl.verbose)
    std::fprintf(stderr, "hpcprof: wrote %s: %u profiles, %u contexts\n", job->output.c_str(),
                 result->profiles, result->contexts);
  // The database is in place and its files closed: leave without freeing the tree and the
  // tables one allocation at a time (tens of thousands of frees and heap consolidation, a
  // few milliseconds at 20,000 contexts). The structure goes first: the measured binaries'
  // analyses are kept in a temporary directory that its destructor removes.
  job->structure.reset();
  std::fflush(nullptr);
  std::_Exit(0);
}
