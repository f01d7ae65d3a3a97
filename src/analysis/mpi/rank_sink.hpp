// The database as one rank writes it. Each rank encodes its own profiles' profile.db rows
// and trace.db lines, then its context range's cct.db blocks, into its temporary files; the
// collective place*() steps give every region its file offset by an exclusive scan of the
// region sizes (rank order = profile order = context order, so the layout is the one
// hpcprof writes at -j1) and pwrite it into the shared file. Rank 0 writes the headers,
// the summary row, identifier tuples, footers and meta.db in finish().
#pragma once

#include <tbb/task_arena.h>

#include <filesystem>
#include <memory>
#include <mutex>
#include <vector>

#include "analysis/mpi/comm.hpp"
#include "analysis/sink.hpp"
#include "analysis/stages.hpp"
#include "formats/db/regions.hpp"

namespace hpc::analysis::mpi {

class SharedFile;

class RankSink final : public DatabaseSink, public TraceLines {
public:
  // `dir`: the database's temporary directory, the same on every rank. This rank owns
  // profile indices [firstIndex, firstIndex + count); `arena`'s threads write its regions.
  // `scratch`: where its temporary files go (empty: the system's temporary directory).
  RankSink(Comm& comm, std::filesystem::path dir, uint32_t firstIndex, uint32_t count, tbb::task_arena& arena,
           std::filesystem::path scratch = {});
  ~RankSink() override;

  // Opens (creating) the shared files. Collective in effect: every rank calls it.
  Status begin(uint32_t numProfiles, uint32_t numContexts, bool traces) override;
  // MT: thread-safe for distinct indices of this rank.
  Status writeProfile(uint32_t index, const std::vector<IdOut>& idTuple, const SparseRow& row) override;
  Status writeTrace(uint32_t index, std::span<const TracePoint> trace) override;
  // MT: thread-safe. Any profile, after placeProfiles().
  Status readProfile(uint32_t index, uint32_t lo, uint32_t hi, SparseRow& out) override;
  // MT: externally synchronized. This rank's context range, ascending.
  Status writeContexts(const ColumnBatch& columns) override;
  // Rank 0 only: the whole summary row.
  Status writeSummary(const SparseRow& row) override;
  // Collective: rank 0 completes the files and writes meta.db; all close their files.
  Status finish(const MetaInput& meta) override;

  // Trace lines in pieces (TraceLines): place() is collective (every rank calls it, with the
  // counts of at least its own profiles; the others' are not read) and gives each of this
  // rank's lines its place in trace.db, after the lines of the ranks before; the pieces go
  // straight there.
  TraceLines* streamedTraces() override { return traces_ ? this : nullptr; }
  Status place(std::span<const uint64_t> records) override;
  Status writePart(uint32_t index, uint64_t from, std::span<const TracePoint> part) override;
  Status end(uint32_t index, uint64_t records, uint64_t firstTime, uint64_t lastTime) override;

  // Collective: writes every rank's rows and trace lines into place.
  Status placeProfiles();
  // Collective: writes every rank's cct.db blocks into place.
  Status placeContexts();

  uint64_t bytesWritten() const { return written_; }

private:
  static constexpr uint64_t kContextsFlush = uint64_t(4) << 20;
  Status flushContexts();
  struct Row {
    uint64_t rowAt = 0, rowSize = 0;    // the encoded row in rowSpill_
    db::BlockRef block;
    std::vector<IdOut> ids;
    uint64_t lineAt = 0, lineSize = 0;  // the encoded trace line in lineSpill_
    db::TraceRef line;  // placed: absolute (in trace.db), else in the line's spilled region
    bool hasLine = false;
    uint64_t placedAt = 0, placedRecords = 0;  // place()'s
  };
  bool placed_ = false;     // place() was called: lines go straight to trace.db
  uint64_t placedSize_ = 0;  // this rank's placed lines' bytes
  Comm& comm_;
  std::filesystem::path dir_;
  uint32_t first_, count_;
  tbb::task_arena& arena_;
  uint32_t numProfiles_ = 0, numContexts_ = 0;
  bool traces_ = false;
  std::unique_ptr<SharedFile> profileDb_, cctDb_, traceDb_;
  std::filesystem::path scratch_;
  std::unique_ptr<Spill> rowSpill_, lineSpill_;  // until placeProfiles()
  // This rank's cct.db blocks: gathered in contexts_, then a few MiB at a time to
  // contextSpill_ until placeContexts(); contextsFlushed_ bytes have gone.
  std::unique_ptr<Spill> contextSpill_;
  uint64_t contextsFlushed_ = 0;
  std::vector<Row> rows_;
  // After placeProfiles(): every profile's block (index order) and, on rank 0, the rest.
  std::vector<db::BlockRef> blocks_;
  std::vector<db::RowCursor> cursors_;  // by profile: where the transpose's reading stopped
  std::vector<std::vector<IdOut>> ids_;
  std::vector<db::TraceRef> lines_;
  uint64_t rowsEnd_ = 0, linesEnd_ = 0, minTime_ = UINT64_MAX, maxTime_ = 0;
  std::mutex mu_;  // minTime_, maxTime_ while lines are written
  db::Region contexts_;
  std::vector<std::pair<uint32_t, db::BlockRef>> columns_;  // this rank's, relative to its first block
  std::vector<db::BlockRef> contextBlocks_;                 // rank 0: all, absolute
  uint64_t contextsEnd_ = 0;
  db::Region summary_;
  db::BlockRef summaryBlock_;
  uint64_t written_ = 0;
};

}  // namespace hpc::analysis::mpi
