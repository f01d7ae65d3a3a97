// The context-major transpose that builds cct.db, in rounds of contexts whose values
// fit a memory budget. Summary statistics (class 3) are computed here, per context, from
// the profile values taken in profile order: exact same result at any thread count.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "analysis/metrics.hpp"
#include "analysis/sink.hpp"

namespace hpc::analysis {

class Spill;

// The propagated rows, kept by context range ("bucket") as pass 2 writes them to profile.db,
// so that the transpose reads each round's values in a few large reads instead of a piece of
// every row of profile.db per round (rows x rounds small reads, which grows as the square of
// the profile count). Each thread ("lane") keeps the rows it propagated, so that they are
// split while in its core's cache: each bucket's pieces gather in a buffer of the lane's (all
// buffers together within a bound) and go to a temporary file a few buffers at a time, in
// the lane's profile order; the transpose merges the lanes' pieces by profile.
class RowBuckets {
public:
  // One bucket's part of one profile's row: entry k is context base + offset[k], with the
  // next count[k] values (and their metrics) after the entries before it.
  struct Piece {
    uint32_t profile = 0;
    uint32_t entries = 0;
    uint32_t values = 0;
    uint32_t base = 0;                   // the bucket's first context
    const uint16_t* offset = nullptr;    // entries, ascending
    const uint16_t* count = nullptr;     // entries
    const double* value = nullptr;       // values
    const uint16_t* metric = nullptr;    // values
  };
  // A bucket holds at most this many contexts (its entries' offsets are 16 bits).
  static constexpr uint32_t kMaxBucketWidth = uint32_t(1) << 16;
  // Where a lane's pieces of a bucket are in the temporary file. A lane's profiles come in
  // increasing order ("a run"); should one come lower, the lane starts a new run, and each run
  // is merged as if it were a lane of its own.
  struct Chunk {
    uint64_t offset = 0, bytes = 0;
    uint32_t run = 0;
    uint32_t lane = 0;  // whose temporary file it is in
  };
  using Chunks = std::vector<Chunk>;

  // Buckets of the contexts [firstContext, contexts) (hpcprof-mpi: a rank's range).
  static Expected<std::unique_ptr<RowBuckets>> create(uint32_t contexts, uint64_t memoryBytes,
                                                      const std::filesystem::path& scratchDir,
                                                      uint32_t lanes = 1, uint32_t firstContext = 0);
  ~RowBuckets();
  RowBuckets(const RowBuckets&) = delete;
  RowBuckets& operator=(const RowBuckets&) = delete;

  // MT: one thread at a time per lane, profiles in increasing order within a lane (a profile
  // goes to one lane).
  Status add(uint32_t lane, uint32_t profile, const SparseRow& row);
  // Writes out what the buffers hold. MT: after the last add().
  Status finish();
  // The same for one lane. MT: after the lane's last add(); lanes at the same time.
  Status finish(uint32_t lane);
  // The buffers' memory, after finish(): the transpose's rounds reuse it rather than touch
  // fresh pages (dear on a virtual machine). Its size in bytes goes to `bytes`.
  std::unique_ptr<uint8_t[]> releaseMemory(uint64_t& bytes);

  uint32_t bucketOf(uint32_t ctx) const { return (ctx - first_) / width_; }  // ctx >= the first context
  uint32_t firstContext(uint32_t bucket) const { return first_ + bucket * width_; }
  uint32_t buckets() const { return buckets_; }
  uint32_t lanes() const { return uint32_t(lanes_.size()); }
  // Where the lane's pieces of the bucket are in the temporary file, in profile order.
  const Chunks& chunks(uint32_t lane, uint32_t bucket) const { return lanes_[lane].chunks[bucket]; }
  // The bytes of a chunk into `into`. MT: thread-safe after finish().
  Status readChunk(const Chunk& chunk, uint8_t* into) const;
  // Closes the lane's temporary file (its pages given back: 6-7 ms for 90 MB). MT: after the
  // last readChunk(); lanes at the same time.
  void close(uint32_t lane);
  // The piece at the start of `bytes` (read from whole chunks) and its size in bytes; an
  // error when it overruns them.
  static Expected<std::pair<Piece, size_t>> pieceAt(std::span<const uint8_t> bytes);

private:
  struct Lane {
    std::vector<uint64_t> used;   // bytes in each bucket's buffer
    std::vector<uint8_t> large;   // a piece larger than a buffer, written by itself
    std::vector<Chunks> chunks;   // by bucket
    uint32_t run = 0;
    uint32_t last = 0;            // the profile added last
  };
  RowBuckets() = default;
  uint8_t* buffer(uint32_t lane, uint32_t bucket) const {
    return memory_.get() + (uint64_t(lane) * buckets_ + bucket) * chunkBytes_;
  }
  // Writes out the lane's buffer of the bucket (kAll: every buffer) and others well filled.
  static constexpr uint32_t kAll = ~0u;
  Status flush(uint32_t lane, uint32_t bucket);

  uint32_t first_ = 0;       // the first context of the first bucket
  uint32_t width_ = 1;       // contexts per bucket
  uint32_t buckets_ = 0;
  uint64_t chunkBytes_ = 0;  // a buffer, written out when full
  std::vector<std::unique_ptr<Spill>> files_;  // by lane
  std::unique_ptr<uint8_t[]> memory_;  // the buffers, lane by lane, bucket by bucket
  std::vector<Lane> lanes_;
};

// A piece's bytes (native order, 8-byte aligned): profile, entries, values, the bucket's
// first context (4 x uint32); the values (double); per entry its context's offset from the
// first, then per entry its count of values (uint16 each); the values' metrics (uint16);
// padded to 8 bytes. 14 bytes a value where contexts have one value each (the benchmark's
// deep tree: calls pass on execution alone), 18 with a uint32 context and value end each.
inline size_t rowPieceBytes(uint64_t entries, uint64_t values) {
  return 16 + 8 * values + ((4 * entries + 2 * values + 7) & ~uint64_t(7));
}

inline Expected<std::pair<RowBuckets::Piece, size_t>> RowBuckets::pieceAt(std::span<const uint8_t> bytes) {
  uint32_t head[4];
  if (bytes.size() < sizeof head) return Status::error("transpose: temporary file: piece overruns its chunk");
  std::memcpy(head, bytes.data(), sizeof head);
  const size_t n = rowPieceBytes(head[1], head[2]);
  if (n > bytes.size()) return Status::error("transpose: temporary file: piece overruns its chunk");
  const uint8_t* p = bytes.data() + 16;
  Piece piece;
  piece.profile = head[0];
  piece.entries = head[1];
  piece.values = head[2];
  piece.base = head[3];
  piece.value = reinterpret_cast<const double*>(p);
  piece.offset = reinterpret_cast<const uint16_t*>(p + 8 * uint64_t(head[2]));
  piece.count = piece.offset + head[1];
  piece.metric = piece.count + head[1];
  return std::pair<Piece, size_t>{piece, n};
}

// A transpose round's memory per thread, whatever the budget (within it): see transpose.cpp.
constexpr uint64_t kTransposeRoundBytes = uint64_t(4) << 20;

struct TransposeOptions {
  uint64_t budgetBytes = uint64_t(1) << 30;
  unsigned threads = 1;
  const PropagationShape* shape = nullptr;  // for the lex_aware summaries
  bool verbose = false;  // -v: say how many values and rounds
  // The rows by context range: kept by pass 2 (hpcprof), or a rank's range of every row read
  // back from profile.db once (hpcprof-mpi); without them each round reads a piece of every
  // row back from the sink.
  const RowBuckets* buckets = nullptr;
  // With the buckets: values by (context, propagated metric), context-major (the propagators'
  // metricCounts summed), so that each value goes straight to its place in its column.
  const std::vector<uint32_t>* metricCounts = nullptr;
  // Where the propagators worked on some metrics only (Plan::propIds): their counts' metric k
  // is the database's propagated id (*propIds)[k]; null: k itself.
  const std::vector<uint16_t>* propIds = nullptr;
  // Memory the rounds may use for their values (RowBuckets::releaseMemory), if any.
  uint8_t* workspace = nullptr;
  uint64_t workspaceBytes = 0;
  // Work run beside the rounds, in the transpose's threads (their idle moments), done before
  // the transpose returns: hpcprof writes meta.db there.
  std::function<void()> alongside;
};

// nonzeros[c]: how many (profile, metric) values context c has over all profiles. The
// whole tree's transposeRange, then writeSummary.
Status transpose(DatabaseSink& sink, const MetricTable& metrics, uint32_t numProfiles,
                 const std::vector<uint64_t>& nonzeros, const TransposeOptions& opt);

// The columns of contexts [lo, hi) only (hpcprof-mpi gives each rank a range); their
// summary statistics are appended to `summary`, before the lex_aware rewrite.
Status transposeRange(DatabaseSink& sink, const MetricTable& metrics, uint32_t numProfiles,
                      const std::vector<uint64_t>& nonzeros, uint32_t lo, uint32_t hi,
                      const TransposeOptions& opt, SparseRow& summary);

// The summary profile's row (the statistics transposeRange gathered, rewritten for lex_aware
// where opt.shape is given) written to the sink.
Status writeSummary(DatabaseSink& sink, const MetricTable& metrics, const TransposeOptions& opt, SparseRow& summary);

}  // namespace hpc::analysis
