#include "analysis/mpi/comm.hpp"

#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>

namespace hpc::analysis::mpi {

// Adds the time of one communication to the counters.
class Timed {
public:
  explicit Timed(CommStats& s) : s_(s), t0_(std::chrono::steady_clock::now()) {}
  ~Timed() { s_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }

private:
  CommStats& s_;
  std::chrono::steady_clock::time_point t0_;
};

namespace {

// MPI counts are ints: larger messages go in pieces.
constexpr uint64_t kChunk = uint64_t(1) << 30;
constexpr int kTag = 7;

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  std::fprintf(stderr, "hpcprof-mpi: error: %s failed (MPI error %d)\n", what, rc);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

std::vector<int> toInts(const std::vector<uint64_t>& v, const char* what) {
  std::vector<int> out;
  for (uint64_t x : v) {
    if (x > uint64_t(INT_MAX)) {
      std::fprintf(stderr, "hpcprof-mpi: error: %s: %llu bytes exceed one collective\n", what,
                   static_cast<unsigned long long>(x));
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    out.push_back(int(x));
  }
  return out;
}

}  // namespace

Comm::Comm(int* argc, char*** argv) {
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  // Errors come back as codes, so that a failure names what failed before aborting.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

Comm::~Comm() { MPI_Finalize(); }

void Comm::send(int to, std::span<const uint8_t> bytes) {
  Timed t(stats_);
  uint64_t n = bytes.size();
  check(MPI_Send(&n, 1, MPI_UINT64_T, to, kTag, MPI_COMM_WORLD), "MPI_Send");
  for (uint64_t at = 0; at < n; at += kChunk)
    check(MPI_Send(bytes.data() + at, int(std::min(kChunk, n - at)), MPI_BYTE, to, kTag, MPI_COMM_WORLD),
          "MPI_Send");
  stats_.bytesSent += n + 8;
}

std::vector<uint8_t> Comm::recv(int from) {
  Timed t(stats_);
  uint64_t n = 0;
  check(MPI_Recv(&n, 1, MPI_UINT64_T, from, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
  std::vector<uint8_t> out(n);
  for (uint64_t at = 0; at < n; at += kChunk)
    check(MPI_Recv(out.data() + at, int(std::min(kChunk, n - at)), MPI_BYTE, from, kTag, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE),
          "MPI_Recv");
  stats_.bytesReceived += n + 8;
  return out;
}

void Comm::bcast(std::vector<uint8_t>& bytes, int root) {
  Timed t(stats_);
  uint64_t n = bytes.size();
  check(MPI_Bcast(&n, 1, MPI_UINT64_T, root, MPI_COMM_WORLD), "MPI_Bcast");
  bytes.resize(n);
  for (uint64_t at = 0; at < n; at += kChunk)
    check(MPI_Bcast(bytes.data() + at, int(std::min(kChunk, n - at)), MPI_BYTE, root, MPI_COMM_WORLD),
          "MPI_Bcast");
  (rank_ == root ? stats_.bytesSent : stats_.bytesReceived) += n + 8;
}

std::vector<uint8_t> Comm::allgather(std::span<const uint8_t> mine, std::vector<uint64_t>* sizesOut) {
  Timed t(stats_);
  uint64_t n = mine.size();
  std::vector<uint64_t> sizes(size_);
  check(MPI_Allgather(&n, 1, MPI_UINT64_T, sizes.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD), "MPI_Allgather");
  std::vector<uint64_t> displs(size_, 0);
  for (int r = 1; r < size_; ++r) displs[r] = displs[r - 1] + sizes[r - 1];
  std::vector<uint8_t> out(displs.back() + sizes.back());
  std::vector<int> c = toInts(sizes, "allgather"), d = toInts(displs, "allgather");
  check(MPI_Allgatherv(mine.data(), int(n), MPI_BYTE, out.data(), c.data(), d.data(), MPI_BYTE, MPI_COMM_WORLD),
        "MPI_Allgatherv");
  stats_.bytesSent += n + 8;
  stats_.bytesReceived += out.size() - n + 8 * (size_ - 1);
  if (sizesOut) *sizesOut = std::move(sizes);
  return out;
}

std::vector<uint8_t> Comm::gather(std::span<const uint8_t> mine, int root, std::vector<uint64_t>* sizesOut) {
  Timed t(stats_);
  uint64_t n = mine.size();
  std::vector<uint64_t> sizes(size_);
  check(MPI_Gather(&n, 1, MPI_UINT64_T, sizes.data(), 1, MPI_UINT64_T, root, MPI_COMM_WORLD), "MPI_Gather");
  std::vector<uint8_t> out;
  std::vector<int> c, d;
  if (rank_ == root) {
    std::vector<uint64_t> displs(size_, 0);
    for (int r = 1; r < size_; ++r) displs[r] = displs[r - 1] + sizes[r - 1];
    out.resize(displs.back() + sizes.back());
    c = toInts(sizes, "gather");
    d = toInts(displs, "gather");
    stats_.bytesReceived += out.size() - n + 8 * (size_ - 1);
  } else {
    stats_.bytesSent += n + 8;
  }
  check(MPI_Gatherv(mine.data(), int(n), MPI_BYTE, out.data(), c.data(), d.data(), MPI_BYTE, root,
                    MPI_COMM_WORLD),
        "MPI_Gatherv");
  if (sizesOut) *sizesOut = std::move(sizes);
  return out;
}

uint64_t Comm::exscan(uint64_t v) {
  Timed t(stats_);
  uint64_t out = 0;
  check(MPI_Exscan(&v, &out, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD), "MPI_Exscan");
  stats_.bytesSent += 8;
  stats_.bytesReceived += rank_ ? 8 : 0;
  return rank_ == 0 ? 0 : out;  // MPI leaves rank 0's result undefined
}

void Comm::allreduceSum(std::span<uint64_t> v) {
  Timed t(stats_);
  for (uint64_t at = 0; at < v.size(); at += kChunk / 8)
    check(MPI_Allreduce(MPI_IN_PLACE, v.data() + at, int(std::min<uint64_t>(kChunk / 8, v.size() - at)),
                        MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD),
          "MPI_Allreduce");
  stats_.bytesSent += 8 * v.size();
  stats_.bytesReceived += 8 * v.size();
}

uint64_t Comm::allreduceMin(uint64_t v) {
  Timed t(stats_);
  check(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD), "MPI_Allreduce");
  stats_.bytesSent += 8;
  stats_.bytesReceived += 8;
  return v;
}

uint64_t Comm::allreduceMax(uint64_t v) {
  Timed t(stats_);
  check(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
  stats_.bytesSent += 8;
  stats_.bytesReceived += 8;
  return v;
}

void Comm::barrier() {
  Timed t(stats_);
  check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
}

Status Comm::agree(const Status& mine) {
  uint64_t first = allreduceMin(mine.ok() ? uint64_t(size_) : uint64_t(rank_));
  if (first == uint64_t(size_)) return Status();
  std::vector<uint8_t> msg;
  if (uint64_t(rank_) == first) msg.assign(mine.message().begin(), mine.message().end());
  bcast(msg, int(first));
  return Status::error("rank " + std::to_string(first) + ": " + std::string(msg.begin(), msg.end()));
}

}  // namespace hpc::analysis::mpi
