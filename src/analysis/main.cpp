// hpcprof: command line of the reference (see shared/reference/man/hpcprof.rst).
#include <tbb/global_control.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "analysis/heap.hpp"
#include "analysis/io.hpp"
#include "analysis/options.hpp"
#include "analysis/pipeline.hpp"
#include "common/file.hpp"
#include "common/interrupt.hpp"

using namespace hpc;
using namespace hpc::analysis;

namespace {

int fail(const std::string& msg) {
  std::fprintf(stderr, "hpcprof: error: %s\n", msg.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  remove_temporaries_on_signal();  // before any thread: an interrupted run leaves no temporaries
  setUpHeap();
  auto parsed = parseCommandLine(argc, argv, "hpcprof");
  if (auto* rc = std::get_if<int>(&parsed)) return *rc;
  const CommandLine& cl = std::get<CommandLine>(parsed);

  setHeapThreads(cl.threads);
  tbb::global_control parallelism(tbb::global_control::max_allowed_parallelism, cl.threads);
  if (cl.verbose) std::fprintf(stderr, "hpcprof: %u analysis threads\n", cl.threads);
  const auto started = std::chrono::steady_clock::now();
  auto job = prepareJob(cl, "hpcprof");
  if (!job.ok()) return fail(job.status().message());
  if (cl.verbose) {
    // Every structure file is checked whole and indexed here, before any profile is read.
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::fprintf(stderr, "hpcprof: found %zu profiles; checked and indexed %zu structure files (%.1f MB)  %.3f s\n",
                 job->profiles.size(), job->structureFiles, double(job->structureBytes) / 1e6, s);
  }
  if (!job->defaultTaken.empty())
    std::fprintf(stderr, "hpcprof: %s exists; writing the database to %s\n", job->defaultTaken.c_str(),
                 job->output.c_str());

  AtomicOutput out(job->output, AtomicOutput::Kind::Directory);
  if (Status st = out.begin(); !st.ok()) return fail(st.message());
  auto sink = createDatabase(out.temp_path());
  if (!sink.ok()) return fail(sink.status().message());
  auto result = runPipeline(job->profiles, job->structure.get(), **sink, job->options);
  for (const std::string& w : summarizeBinaryWarnings(takeBinaryWarnings()))
    std::fprintf(stderr, "hpcprof: warning: %s\n", w.c_str());
  if (!result.ok()) return fail(result.status().message());
  sink->reset();  // closes the files before the rename
  if (Status st = out.commit(); !st.ok()) return fail(st.message());
  if (result->skipped)
    std::fprintf(stderr, "hpcprof: %u of %u profiles were unreadable and skipped\n", result->skipped,
                 result->skipped + result->profiles);
  if (cl.verbose) {
    if (const BinaryAnalysis b = binaryAnalysis(); b.analysed)
      std::fprintf(stderr,
                   "hpcprof: analysed %zu of the %zu procedures of %zu measured binaries (%.3f s, all threads); "
                   "hpcstruct on the measurements would do it once for every run\n",
                   b.analysed, b.procedures, b.binaries, b.seconds);
    std::fprintf(stderr, "hpcprof: wrote %s: %u profiles, %u contexts\n", job->output.c_str(),
                 result->profiles, result->contexts);
  }
  // The database is in place and its files closed: leave without freeing the tree, the
  // tables and the structure one allocation at a time (tens of thousands of frees and heap
  // consolidation: a few milliseconds at 20,000 contexts; 42 ms with the structure of g++'s
  // cc1plus loaded). Nothing of them is on disk.
  std::fflush(nullptr);
  std::_Exit(0);
}
