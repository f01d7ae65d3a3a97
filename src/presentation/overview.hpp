// Where the time went, by kind of work (seed 000 §7.2's hpcreport): computation, MPI, the
// OpenMP runtime, the GPU runtime on the CPU, I/O and waiting; the GPU's own operations by
// kind where the database has them; instructions per cycle where it has both counters; and
// a verdict: compute-, memory-, communication-, I/O-, wait-, OpenMP-runtime- or
// GPU-runtime-bound.
//
// Each context's own value (its inclusive value less its children's) goes to the kind of
// work its call path is in: walking from the thread's root, a function of an MPI library
// (or named MPI_/PMPI_/mpi_) enters MPI, one of an OpenMP runtime (libgomp, libomp, GOMP_,
// __kmpc_) the OpenMP runtime, one of a GPU runtime (libcuda, libcudart, libOpenCL, ...) the
// GPU runtime; a function of the application (any other library or the program) enters
// computation again (an OpenMP worker's outlined region, called by the runtime, is
// computation). The system's own libraries (libc, libm, libstdc++, ld.so, the vDSO) are
// neither: they stay in the kind of their caller, except that, called from computation,
// libc's transfers (read, write, fwrite, ...) are I/O and its waits (poll, nanosleep,
// pthread_cond_wait, futex waits, ...) are waiting. Time in poll under MPI_Wait is MPI. A wait
// on a thread whose first function is an MPI or GPU runtime's is idle.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "presentation/experiment.hpp"

namespace hpc::present {

// Idle: the waits of threads a runtime started for itself (an MPI library's progress
// thread in epoll_wait, a GPU runtime's callback thread), and of threads that did nothing
// but wait (95 % or more of their time: a helper blocked in sigwait, a main thread joining
// its workers): REALTIME counts their whole life, which says nothing of the program's work,
// so the verdict leaves it out. Threads alike merge by their start routine's context.
enum class WorkKind : uint8_t { Compute, Mpi, OpenMp, GpuRuntime, Io, Waiting, Idle };
inline constexpr size_t kWorkKinds = 7;
const char* work_kind_name(WorkKind k);  // "computation", "MPI", ...
const char* work_kind_key(WorkKind k);   // "compute", "mpi", ...

struct Overview {
  double total = 0;  // the metric's total (the root's inclusive value)
  struct Kind {
    double value = 0;
    // Where it was spent, hottest first: for MPI, the OpenMP and GPU runtimes, the
    // outermost function of the kind on the path (MPI_Allreduce, GOMP_parallel); for I/O and
    // waiting, the call from computation (fwrite, poll); for computation, the innermost
    // function.
    std::vector<std::pair<std::string, double>> where;
  };
  std::array<Kind, kWorkKinds> kinds;
  // The GPU's operations (metrics GKER, GMEM, GMSET, GXCOPY, GICOPY, GSYNC in seconds):
  // (description, seconds), where the database has them.
  std::vector<std::pair<std::string, double>> gpu;
  // Instructions per cycle over the whole run, where the database has both counters
  // (perf::instructions and perf::cycles, PAPI_TOT_INS and PAPI_TOT_CYC, ...).
  std::optional<double> ipc;
  // MPI's share of each profile's time (the profiles that call MPI: ranks' threads), its
  // lowest and highest, where two or more do: ranks with less to compute wait longer in MPI.
  struct Spread {
    size_t profiles = 0;
    double min = 0, max = 0;  // shares, 0 to 1
    std::string minProfile, maxProfile;
  };
  std::optional<Spread> mpiSpread;
  std::string verdict;  // "compute-bound", "communication-bound", ...
  std::string reason;   // one sentence: the shares behind the verdict
};

// `metric` indexes e.metrics(); `where` keeps that many places per kind.
Overview overview(const Experiment& e, size_t metric, size_t where = 5);

}  // namespace hpc::present
