// hpcprof: command line of the reference (see shared/reference/man/hpcprof.rst).
#include <malloc.h>
#include <sys/mman.h>
#include <tbb/global_control.h>

#include <unistd.h>

#include <climits>
#include <cstdint>
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
// VM). Where the kernel gives transparent huge pages on request, the malloc heap asks for
// them: it is given a large reserve (address space only, backed as it is touched) and the
// whole of it is advised MADV_HUGEPAGE. Allocations stay in the heap up to 32 MiB (glibc's
// most), so they get huge pages too; a heap that outgrows the reserve (an analysis of more
// than 1 GiB) has 4 KiB pages beyond it. (glibc's tunable glibc.malloc.hugetlb=1 does the same,
// but only in a process started with it: hpcprof restarted itself, which cost an exec.)
// HPCPROF_NO_HUGEPAGES=1 keeps 4 KiB pages.
void heapOnHugePages() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
  if (std::getenv("HPCPROF_NO_HUGEPAGES")) return;
  std::FILE* f = std::fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (!f) return;
  char mode[128] = {};
  const bool read = std::fgets(mode, sizeof mode, f) != nullptr;
  std::fclose(f);
  if (!read || std::strstr(mode, "[never]")) return;
  // The heap never shrinks (growing again would add memory the advice does not cover), and
  // grows by the reserve now: one allocation larger than what it holds. (Where the kernel
  // refuses the reserve, malloc maps memory elsewhere and nothing is advised.)
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
  mallopt(M_TOP_PAD, 1 << 30);
  void* probe = std::malloc(1 << 20);
  mallopt(M_TOP_PAD, 128 << 10);  // glibc's default again, for growth beyond the reserve
  if (!probe) return;
  const uintptr_t start = (reinterpret_cast<uintptr_t>(probe) + 4095) & ~uintptr_t(4095);
  const uintptr_t end = reinterpret_cast<uintptr_t>(::sbrk(0)) & ~uintptr_t(4095);
  if (end > start) ::madvise(reinterpret_cast<void*>(start), end - start, MADV_HUGEPAGE);
  std::free(probe);
}

int fail(const std::string& msg) {
  std::fprintf(stderr, "hpcprof: error: %s\n", msg.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  // Per-profile buffers of a few hundred KB come and go thousands of times: they stay in
  // the heap (no fresh mapping each: page faults, a TLB flush per unmap), on huge pages.
  heapOnHugePages();
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
