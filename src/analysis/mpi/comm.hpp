// The few MPI operations hpcprof-mpi needs, on bytes, with the traffic and the time spent
// in them counted (for -v and the benchmark). One object per process, from MPI_Init to
// MPI_Finalize. MT: externally synchronized; only the main thread communicates.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.hpp"

namespace hpc::analysis::mpi {

struct CommStats {
  uint64_t bytesSent = 0, bytesReceived = 0;
  double seconds = 0;
};

class Comm {
public:
  Comm(int* argc, char*** argv);
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const CommStats& stats() const { return stats_; }

  // Point to point, any size.
  void send(int to, std::span<const uint8_t> bytes);
  std::vector<uint8_t> recv(int from);
  // `bytes` is significant on `root` and replaced by its content elsewhere.
  void bcast(std::vector<uint8_t>& bytes, int root);
  // Every rank's bytes concatenated in rank order: on all ranks, or on `root` only.
  // `sizes`, if given, receives each rank's share.
  std::vector<uint8_t> allgather(std::span<const uint8_t> mine, std::vector<uint64_t>* sizes = nullptr);
  std::vector<uint8_t> gather(std::span<const uint8_t> mine, int root, std::vector<uint64_t>* sizes = nullptr);
  // Sum of `v` over the lower ranks (0 on rank 0).
  uint64_t exscan(uint64_t v);
  void allreduceSum(std::span<uint64_t> v);
  uint64_t allreduceMin(uint64_t v);
  uint64_t allreduceMax(uint64_t v);
  void barrier();

  // Agreement after a step that may fail on some ranks: every rank learns the first
  // failing rank's error ("rank R: message"), or that all succeeded.
  Status agree(const Status& mine);

private:
  int rank_ = 0, size_ = 1;
  CommStats stats_;
};

}  // namespace hpc::analysis::mpi
