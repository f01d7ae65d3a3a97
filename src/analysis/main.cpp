// hpcprof: command line of the reference (see shared/reference/man/hpcprof.rst).
#include <malloc.h>
#include <tbb/global_control.h>

#include <cstdio>

#include "analysis/io.hpp"
#include "analysis/options.hpp"
#include "analysis/pipeline.hpp"
#include "common/file.hpp"

using namespace hpc;
using namespace hpc::analysis;

namespace {

int fail(const std::string& msg) {
  std::fprintf(stderr, "hpcprof: error: %s\n", msg.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  // Per-profile buffers of a few hundred KB come and go thousands of times: keep them in
  // the heap instead of a fresh mapping each (page faults, a TLB flush per unmap).
  mallopt(M_MMAP_THRESHOLD, 4 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
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
  return 0;
}
