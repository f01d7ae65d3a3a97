// hpcprof-mpi: hpcprof's command line, run as `mpiexec -n R hpcprof-mpi ...`.
#include <sys/resource.h>
#include <tbb/global_control.h>

#include <cstdio>
#include <filesystem>
#include <set>
#include <string>

#include "analysis/heap.hpp"
#include "analysis/io.hpp"
#include "analysis/mpi/comm.hpp"
#include "analysis/mpi/distributed.hpp"
#include "analysis/mpi/wire.hpp"
#include "analysis/options.hpp"
#include "analysis/pipeline.hpp"
#include "common/file.hpp"
#include "common/interrupt.hpp"

using namespace hpc;
using namespace hpc::analysis;
using namespace hpc::analysis::mpi;

namespace {

double peakMiB() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_maxrss) / 1024.0;
}

double cpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto s = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) / 1e6; };
  return s(ru.ru_utime) + s(ru.ru_stime);
}

// -v: one line per rank, gathered and printed by rank 0 (the benchmark reads them).
void printReports(Comm& comm, const RankReport& r, double wall) {
  char line[768];
  const CommStats& c = comm.stats();
  // All this rank's counted reads and writes (common/file.hpp): its inputs, the spill, its
  // share of the database and whatever it read back.
  const IoCounts io = io_counts();
  std::snprintf(line, sizeof line,
                "hpcprof-mpi: rank %d: profiles=%u input_bytes=%llu output_bytes=%llu contexts=%u "
                "wall_s=%.3f cpu_s=%.3f unify_s=%.3f reduce_s=%.3f propagate_s=%.3f place_s=%.3f transpose_s=%.3f "
                "finish_s=%.3f comm_bytes=%llu comm_s=%.3f reduce_bytes=%llu read_bytes=%llu read_s=%.3f "
                "written_bytes=%llu write_s=%.3f peak_mib=%.1f analysed_procedures=%zu analysis_s=%.3f\n",
                comm.rank(), r.profiles, static_cast<unsigned long long>(r.inputBytes),
                static_cast<unsigned long long>(r.outputBytes), r.contexts, wall, cpuSeconds(), r.unify, r.reduce,
                r.propagate, r.place, r.transpose, r.finish,
                static_cast<unsigned long long>(c.bytesSent + c.bytesReceived), c.seconds,
                static_cast<unsigned long long>(r.reduceBytes), static_cast<unsigned long long>(io.readBytes),
                double(io.readNs) / 1e9, static_cast<unsigned long long>(io.writeBytes), double(io.writeNs) / 1e9,
                peakMiB(), binaryAnalysis().analysed, binaryAnalysis().seconds);
  std::string s(line);
  std::vector<uint8_t> all = comm.gather({reinterpret_cast<const uint8_t*>(s.data()), s.size()}, 0);
  if (comm.rank() == 0) std::fwrite(all.data(), 1, all.size(), stderr);
}

// One rank: hpcprof's own pipeline, as there is nothing to exchange (the distributed one
// wrote its rows through a temporary file and read its range back: 2.4 x hpcprof -j1's time
// on 4,000 profiles). -v gives the rank's line, not hpcprof's phase lines.
Expected<DistributedResult> runAlone(Job& job, const std::filesystem::path& dir, RankReport& report) {
  HPC_ASSIGN_OR_RETURN(std::unique_ptr<DatabaseSink> sink, createDatabase(dir));
  PipelineOptions options = job.options;
  options.verbose = false;
  HPC_ASSIGN_OR_RETURN(PipelineResult r, runPipeline(job.profiles, job.structure.get(), *sink, options));
  sink.reset();  // closes the files before the rename
  report.profiles = r.profiles;
  for (uint64_t b : job.profileBytes) report.inputBytes += b;
  for (const char* f : {"profile.db", "cct.db", "trace.db"}) {
    std::error_code ec;
    const uint64_t n = std::filesystem::file_size(dir / f, ec);
    if (!ec) report.outputBytes += n;
  }
  report.contexts = r.contexts;
  report.unify = r.unifySeconds + r.finalizeSeconds;
  report.propagate = r.propagateSeconds;
  report.transpose = r.transposeSeconds;
  report.finish = r.finishSeconds;
  return DistributedResult{r.profiles, r.skipped, r.contexts};
}

}  // namespace

int main(int argc, char** argv) {
  remove_temporaries_on_signal();  // before MPI's and TBB's threads, which inherit the mask
  setUpHeap();  // as hpcprof's: huge pages; an arena a thread once -j is known
  Comm comm(&argc, &argv);
  const bool root = comm.rank() == 0;
  auto t0 = std::chrono::steady_clock::now();
  auto parsed = parseCommandLine(argc, argv, "hpcprof-mpi", !root);
  if (auto* rc = std::get_if<int>(&parsed)) return *rc;  // every rank parses the same argv
  const CommandLine& cl = std::get<CommandLine>(parsed);
  setHeapThreads(cl.threads);
  tbb::global_control parallelism(tbb::global_control::max_allowed_parallelism, cl.threads);

  auto fail = [&](const Status& st) {
    if (root) std::fprintf(stderr, "hpcprof-mpi: error: %s; no database written\n", st.message().c_str());
    return 1;
  };
  auto job = prepareJob(cl, root ? "hpcprof-mpi" : "");
  if (Status st = comm.agree(job.ok() ? Status() : job.status()); !st.ok()) return fail(st);
  if (root && !job->defaultTaken.empty())
    std::fprintf(stderr, "hpcprof-mpi: %s exists; writing the database to %s\n", job->defaultTaken.c_str(),
                 job->output.c_str());

  // Rank 0 owns the temporary directory: removed unless renamed into place at the end.
  std::unique_ptr<AtomicOutput> out;
  std::vector<uint8_t> dir;
  Status st;
  if (root) {
    out = std::make_unique<AtomicOutput>(job->output, AtomicOutput::Kind::Directory);
    st = out->begin();
    std::string p = out->temp_path().string();
    dir.assign(p.begin(), p.end());
  }
  if (st = comm.agree(st); !st.ok()) return fail(st);
  comm.bcast(dir, 0);

  RankReport report;
  const std::filesystem::path tempDir(std::string(dir.begin(), dir.end()));
  auto result = comm.size() == 1 ? runAlone(*job, tempDir, report) : runDistributed(comm, *job, tempDir, report);
  if (!result.ok()) return fail(result.status());
  {
    // Every rank's warnings about the measured binaries, each said once by rank 0
    // (after a run every rank finished: a collective here must not meet a rank that left).
    std::string mine;
    for (const std::string& w : takeBinaryWarnings()) mine += w + '\n';
    const std::vector<uint8_t> all =
        comm.gather(std::span(reinterpret_cast<const uint8_t*>(mine.data()), mine.size()), 0);
    if (root) {
      std::set<std::string> lines;
      std::string text(all.begin(), all.end());
      for (size_t at = 0, nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1)
        lines.insert(text.substr(at, nl - at));
      for (const std::string& w : summarizeBinaryWarnings({lines.begin(), lines.end()}))
        std::fprintf(stderr, "hpcprof-mpi: warning: %s\n", w.c_str());
    }
  }
  if (root) st = out->commit();
  if (st = comm.agree(st); !st.ok()) return fail(st);
  if (cl.verbose)
    printReports(comm, report, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (root && result->skipped)
    std::fprintf(stderr, "hpcprof-mpi: %u of %u profiles were unreadable and skipped\n", result->skipped,
                 result->skipped + result->profiles);
  if (root && cl.verbose)
    std::fprintf(stderr, "hpcprof-mpi: wrote %s: %u profiles, %u contexts, %d ranks\n", job->output.c_str(),
                 result->profiles, result->contexts, comm.size());
  return 0;
}
