#include "analysis/mpi/rank_sink.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <tbb/parallel_for.h>

#include <algorithm>
#include <functional>
#include <cerrno>
#include <cstring>

#include "analysis/io.hpp"
#include "analysis/mpi/wire.hpp"
#include "analysis/stages.hpp"
#include "common/file.hpp"

namespace hpc::analysis::mpi {

namespace fs = std::filesystem;

// One database file opened by every rank; ranks write disjoint ranges with pwrite.
class SharedFile {
public:
  explicit SharedFile(fs::path p) : path_(std::move(p)) {}
  ~SharedFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  Status open() {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT, 0644);
    if (fd_ < 0) return Status::error(path_.string() + ": cannot open: " + std::strerror(errno));
    return Status();
  }
  // MT: thread-safe for disjoint ranges.
  Status write(uint64_t at, std::span<const uint8_t> b) {
    for (size_t done = 0; done < b.size();) {
      ssize_t n = counted_pwrite(fd_, b.data() + done, b.size() - done, off_t(at + done));
      if (n <= 0) return Status::error(path_.string() + ": write failed: " + std::strerror(errno));
      done += size_t(n);
    }
    return Status();
  }
  Status read(uint64_t at, std::span<uint8_t> b) const {
    for (size_t done = 0; done < b.size();) {
      ssize_t n = counted_pread(fd_, b.data() + done, b.size() - done, off_t(at + done));
      if (n <= 0) return Status::error(path_.string() + ": read back failed at offset " + std::to_string(at));
      done += size_t(n);
    }
    return Status();
  }
  Status close() {
    if (fd_ < 0) return Status();
    int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) return Status::error(path_.string() + ": close failed: " + std::strerror(errno));
    return Status();
  }

private:
  fs::path path_;
  int fd_ = -1;
};

namespace {

uint64_t align8(uint64_t v) { return (v + 7) / 8 * 8; }

// A rank's region of a file, [at, at + total size of pieces), written in chunks that end at
// file offsets which are multiples of kChunk — page-aligned writes, but for the region's first
// and last chunk, which the neighbouring ranks' regions share — one pwrite per chunk, by all
// of the rank's threads.
constexpr uint64_t kChunk = 256 * 1024;

// Piece i's bytes [from, to) into `into`.
using PieceReader = std::function<Status(size_t i, uint64_t from, uint64_t to, uint8_t* into)>;

Status writeRegion(SharedFile& f, uint64_t at, std::span<const uint64_t> sizes, const PieceReader& read,
                   tbb::task_arena& arena) {
  std::vector<uint64_t> start(sizes.size() + 1, at);
  for (size_t i = 0; i < sizes.size(); ++i) start[i + 1] = start[i] + sizes[i];
  const uint64_t end = start.back();
  if (end == at) return Status();
  const uint64_t c0 = at / kChunk, c1 = (end - 1) / kChunk + 1;
  std::vector<Status> errors(c1 - c0);
  arena.execute([&] {
    tbb::parallel_for(c0, c1, [&](uint64_t c) {
      const uint64_t lo = std::max(at, c * kChunk), hi = std::min(end, (c + 1) * kChunk);
      // The last piece that starts at or before lo (empty pieces before it are skipped).
      size_t i = size_t(std::upper_bound(start.begin(), start.end(), lo) - start.begin()) - 1;
      std::vector<uint8_t> buf(hi - lo);
      Status st;
      for (uint64_t pos = lo; pos < hi && st.ok(); ++i) {
        const uint64_t from = pos - start[i], to = std::min(hi, start[i + 1]) - start[i];
        if (to > from) st = read(i, from, to, buf.data() + (pos - lo));
        pos = start[i] + to;
      }
      errors[c - c0] = st.ok() ? f.write(lo, buf) : st;
    });
  });
  for (const Status& e : errors)
    if (!e.ok()) return e;
  return Status();
}

void putRef(ByteWriter& w, const db::BlockRef& b) {
  w.le<uint64_t>(b.nValues);
  w.le<uint64_t>(b.nKeys);
  w.le<uint64_t>(b.pValues);
  w.le<uint64_t>(b.pIdx);
}

db::BlockRef getRef(WireReader& in) {
  db::BlockRef b;
  b.nValues = in.get<uint64_t>();
  b.nKeys = in.get<uint64_t>();
  b.pValues = in.get<uint64_t>();
  b.pIdx = in.get<uint64_t>();
  return b;
}

db::ProfileValues toDb(const SparseRow& row) {
  db::ProfileValues v;
  v.key = row.ctx;
  v.start = row.start;
  v.sub = row.metric;
  v.value = row.value;
  return v;
}

}  // namespace

RankSink::RankSink(Comm& comm, fs::path dir, uint32_t firstIndex, uint32_t count, tbb::task_arena& arena,
                   fs::path scratch)
    : comm_(comm), dir_(std::move(dir)), first_(firstIndex), count_(count), arena_(arena),
      scratch_(std::move(scratch)), rows_(count) {}

RankSink::~RankSink() = default;

Status RankSink::begin(uint32_t numProfiles, uint32_t numContexts, bool traces) {
  numProfiles_ = numProfiles;
  numContexts_ = numContexts;
  traces_ = traces;
  profileDb_ = std::make_unique<SharedFile>(dir_ / "profile.db");
  cctDb_ = std::make_unique<SharedFile>(dir_ / "cct.db");
  HPC_RETURN_IF_ERROR(profileDb_->open());
  HPC_RETURN_IF_ERROR(cctDb_->open());
  HPC_ASSIGN_OR_RETURN(rowSpill_, Spill::create(scratch_));
  HPC_ASSIGN_OR_RETURN(lineSpill_, Spill::create(scratch_));
  HPC_ASSIGN_OR_RETURN(contextSpill_, Spill::create(scratch_));
  if (traces) {
    traceDb_ = std::make_unique<SharedFile>(dir_ / "trace.db");
    HPC_RETURN_IF_ERROR(traceDb_->open());
  }
  return Status();
}

Status RankSink::writeProfile(uint32_t index, const std::vector<IdOut>& idTuple, const SparseRow& row) {
  if (index < first_ || index - first_ >= count_)
    return Status::error("profile " + std::to_string(index) + " is not this rank's");
  Row& r = rows_[index - first_];
  db::Region region;
  r.block = region.add(toDb(row));
  HPC_ASSIGN_OR_RETURN(r.rowAt, rowSpill_->append(region.bytes()));
  r.rowSize = region.size();
  r.ids = idTuple;
  return Status();
}

Status RankSink::writeTrace(uint32_t index, std::span<const TracePoint> trace) {
  if (!traces_ || placed_ || index < first_ || index - first_ >= count_)
    return Status::error("trace for profile " + std::to_string(index) + " not expected on this rank");
  std::vector<db::TraceElem> line;
  line.reserve(trace.size());
  for (const TracePoint& p : trace) line.push_back({p.time, p.ctx});
  Row& r = rows_[index - first_];
  db::Region region;
  r.line = region.add(index, line);
  HPC_ASSIGN_OR_RETURN(r.lineAt, lineSpill_->append(region.bytes()));
  r.lineSize = region.size();
  r.hasLine = true;
  if (!line.empty()) {
    std::lock_guard lock(mu_);
    minTime_ = std::min(minTime_, line.front().timestamp);
    maxTime_ = std::max(maxTime_, line.back().timestamp);
  }
  return Status();
}

Status RankSink::place(std::span<const uint64_t> records) {
  if (!traces_) return Status::error("trace lines placed in a database without traces");
  uint64_t size = 0;
  for (uint32_t j = 0; j < count_; ++j) {
    const size_t k = size_t(first_) + j - 1;  // index first_ + j
    rows_[j].placedRecords = k < records.size() ? records[k] : 0;
    rows_[j].placedAt = size;
    size += (db::kTraceElemBytes * rows_[j].placedRecords + 7) / 8 * 8;  // each line 8-aligned, as hpcprof's
  }
  const uint64_t base = db::trace_db_header_size(numProfiles_ - 1) + comm_.exscan(size);
  for (Row& r : rows_) r.placedAt += base;
  placedSize_ = size;
  placed_ = true;
  return Status();
}

Status RankSink::writePart(uint32_t index, uint64_t from, std::span<const TracePoint> part) {
  if (!placed_ || index < first_ || index - first_ >= count_ || from + part.size() > rows_[index - first_].placedRecords)
    return Status::error("trace piece of profile " + std::to_string(index) + " out of its place");
  thread_local std::vector<uint8_t> bytes;  // only grown
  const size_t n = db::kTraceElemBytes * part.size();
  if (bytes.size() < n) bytes.resize(n);
  db::encode_trace_elems(part, &TracePoint::time, &TracePoint::ctx, bytes.data());
  return traceDb_->write(rows_[index - first_].placedAt + db::kTraceElemBytes * from, {bytes.data(), n});
}

Status RankSink::end(uint32_t index, uint64_t records, uint64_t firstTime, uint64_t lastTime) {
  if (!placed_ || index < first_ || index - first_ >= count_ || records > rows_[index - first_].placedRecords)
    return Status::error("trace line of profile " + std::to_string(index) + " ended out of its place");
  Row& r = rows_[index - first_];  // each index by one thread
  r.line = {index, r.placedAt, r.placedAt + db::kTraceElemBytes * records};
  r.hasLine = true;
  if (records) {
    std::lock_guard lock(mu_);
    written_ += db::kTraceElemBytes * records;
    minTime_ = std::min(minTime_, firstTime);
    maxTime_ = std::max(maxTime_, lastTime);
  }
  return Status();
}

Status RankSink::placeProfiles() {
  // Offsets of this rank's rows and lines inside its regions, then in the files (lines placed
  // before pass 2 are there already).
  uint64_t rowsSize = 0, linesSize = 0;
  for (const Row& r : rows_) rowsSize += r.rowSize, linesSize += r.lineSize;
  if (placed_) linesSize = placedSize_;
  const uint64_t rowsBase = db::profile_db_header_size(numProfiles_) + comm_.exscan(rowsSize);
  const uint64_t linesBase = db::trace_db_header_size(numProfiles_ - 1) + comm_.exscan(linesSize);
  Status st;
  ByteWriter records;
  std::vector<uint64_t> rowSizes, lineSizes;
  std::vector<uint64_t> rowFrom, lineFrom;  // where each piece is in the spill
  uint64_t rowAt = rowsBase, lineAt = linesBase;
  for (Row& r : rows_) {
    rowSizes.push_back(r.rowSize);
    rowFrom.push_back(r.rowAt);
    if (r.hasLine && !placed_) {
      lineSizes.push_back(r.lineSize);
      lineFrom.push_back(r.lineAt);
    }
    written_ += r.rowSize + r.lineSize;
    putRef(records, db::at(r.block, rowAt));
    records.le<uint16_t>(uint16_t(r.ids.size()));
    for (const IdOut& i : r.ids) {
      records.le<uint16_t>(i.kind);
      records.le<uint8_t>(i.isPhysical);
      records.le<uint32_t>(i.logical);
      records.le<uint64_t>(i.physical);
    }
    db::TraceRef t = !r.hasLine ? db::TraceRef{} : placed_ ? r.line : db::at(r.line, lineAt);
    records.le<uint8_t>(r.hasLine);
    records.le<uint32_t>(t.profIndex);
    records.le<uint64_t>(t.pStart);
    records.le<uint64_t>(t.pEnd);
    rowAt += r.rowSize;
    lineAt += r.lineSize;
  }
  // The encoded rows and lines wait in this rank's temporary files (memory stays flat in the
  // number of its profiles), read back a chunk at a time.
  auto fromSpill = [](const Spill& spill, const std::vector<uint64_t>& where) {
    return [&spill, &where](size_t i, uint64_t from, uint64_t to, uint8_t* into) {
      return spill.read(where[i] + from, {into, size_t(to - from)});
    };
  };
  st = writeRegion(*profileDb_, rowsBase, rowSizes, fromSpill(*rowSpill_, rowFrom), arena_);
  if (st.ok() && traces_ && !placed_)
    st = writeRegion(*traceDb_, linesBase, lineSizes, fromSpill(*lineSpill_, lineFrom), arena_);
  rowSpill_.reset();
  lineSpill_.reset();
  uint64_t totals[2] = {rowsSize, linesSize};
  comm_.allreduceSum(totals);
  rowsEnd_ = db::profile_db_header_size(numProfiles_) + totals[0];
  linesEnd_ = db::trace_db_header_size(numProfiles_ - 1) + totals[1];
  minTime_ = comm_.allreduceMin(minTime_);
  maxTime_ = comm_.allreduceMax(maxTime_);

  // Every rank reads rows back in the transpose: all learn every block.
  std::vector<uint8_t> all = comm_.allgather(records.buffer());
  blocks_.assign(numProfiles_, {});
  cursors_.assign(numProfiles_, {});
  ids_.assign(numProfiles_, {});
  lines_.assign(numProfiles_ - 1, {});
  WireReader in(all);
  for (uint32_t index = 1; index < numProfiles_ && !in.failed(); ++index) {
    blocks_[index] = getRef(in);
    for (uint16_t n = in.get<uint16_t>(); n-- && !in.failed();) {
      IdOut i;
      i.kind = in.get<uint16_t>();
      i.isPhysical = in.get<uint8_t>() != 0;
      i.logical = in.get<uint32_t>();
      i.physical = in.get<uint64_t>();
      ids_[index].push_back(i);
    }
    bool hasLine = in.get<uint8_t>() != 0;
    db::TraceRef t;
    t.profIndex = in.get<uint32_t>();
    t.pStart = in.get<uint64_t>();
    t.pEnd = in.get<uint64_t>();
    // A profile without a trace: an empty line at the end of the others (as hpcprof writes).
    lines_[index - 1] = hasLine ? t : db::TraceRef{index, linesEnd_, linesEnd_};
  }
  if (st.ok() && (in.failed() || !in.done()))
    st = Status::error("profile placement: " + std::to_string(all.size()) +
                       " bytes of records do not describe " + std::to_string(numProfiles_ - 1) + " profiles");
  return comm_.agree(st);
}

Status RankSink::readProfile(uint32_t index, uint32_t lo, uint32_t hi, SparseRow& out) {
  out.clear();
  if (index >= blocks_.size()) return Status::error("profile " + std::to_string(index) + " not placed");
  db::ProfileValues v;
  HPC_RETURN_IF_ERROR(db::read_profile_block(
      [this](uint64_t at, std::span<uint8_t> into) { return profileDb_->read(at, into); }, blocks_[index], lo,
      hi, v, cursors_[index]));
  out.ctx = std::move(v.key);
  out.start = std::move(v.start);
  out.metric = std::move(v.sub);
  out.value = std::move(v.value);
  return Status();
}

Status RankSink::writeContexts(const ColumnBatch& columns) {
  db::ContextValues v;
  for (size_t i = 0; i < columns.size(); ++i) {
    const uint32_t ctx = columns.ctx[i];
    if (ctx >= numContexts_) return Status::error("context " + std::to_string(ctx) + " out of range");
      v.clear();
      columns.forEachMetric(i, [&](uint16_t m, std::span<const uint32_t> p, std::span<const double> x) {
        v.sub.insert(v.sub.end(), p.begin(), p.end());
        v.value.insert(v.value.end(), x.begin(), x.end());
        v.close(m);
      });
    columns_.emplace_back(ctx, db::at(contexts_.add(v), contextsFlushed_));
  }
  if (contexts_.size() >= kContextsFlush) return flushContexts();
  return Status();
}

Status RankSink::flushContexts() {
  // Blocks start 8-aligned and a region is padded to 8: regions end to end are the bytes one
  // region of all the blocks would be.
  const std::span<const uint8_t> bytes = contexts_.bytes();
  if (bytes.empty()) return Status();
  HPC_ASSIGN_OR_RETURN(const uint64_t at, contextSpill_->append(bytes));
  if (at != contextsFlushed_) return Status::error("cct.db blocks: temporary file out of order");
  contextsFlushed_ += bytes.size();
  contexts_ = db::Region();
  return Status();
}

Status RankSink::placeContexts() {
  Status st = flushContexts();
  const uint64_t size = contextsFlushed_;
  const uint64_t base = db::cct_db_header_size(numContexts_) + comm_.exscan(size);
  const uint64_t sizes[1] = {size};
  if (st.ok())
    st = writeRegion(
        *cctDb_, base, sizes,
        [this](size_t, uint64_t from, uint64_t to, uint8_t* into) {
          return contextSpill_->read(from, {into, size_t(to - from)});
        },
        arena_);
  contextSpill_.reset();
  written_ += size;
  ByteWriter records;
  for (const auto& [ctx, ref] : columns_) {
    records.le<uint32_t>(ctx);
    putRef(records, db::at(ref, base));
  }
  contexts_ = db::Region();
  columns_.clear();
  uint64_t total = size;
  comm_.allreduceSum({&total, 1});
  contextsEnd_ = db::cct_db_header_size(numContexts_) + total;
  std::vector<uint8_t> all = comm_.gather(records.buffer(), 0);
  if (comm_.rank() == 0) {
    contextBlocks_.assign(numContexts_, {});
    WireReader in(all);
    while (!in.done() && !in.failed()) {
      uint32_t ctx = in.get<uint32_t>();
      db::BlockRef b = getRef(in);
      if (in.failed() || ctx >= numContexts_) {
        in.fail();
        break;
      }
      contextBlocks_[ctx] = b;
    }
    if (st.ok() && in.failed()) st = Status::error("context placement: malformed block records");
  }
  return comm_.agree(st);
}

Status RankSink::writeSummary(const SparseRow& row) {
  if (comm_.rank() != 0) return Status::error("the summary profile is written by rank 0");
  summary_ = db::Region();
  summaryBlock_ = summary_.add(toDb(row));
  return Status();
}

Status RankSink::finish(const MetaInput& meta) {
  Status st;
  if (comm_.rank() == 0) {
    st = [&]() -> Status {
      // profile.db: rows | summary | identifier tuples | footer, as the streaming writer.
      std::vector<db::ProfileInfo> infos(numProfiles_);
      infos[0] = {db::at(summaryBlock_, rowsEnd_), 1, std::nullopt};
      for (uint32_t i = 1; i < numProfiles_; ++i) {
        std::vector<db::Identifier> ids;
        for (const IdOut& d : ids_[i])
          ids.push_back({static_cast<uint8_t>(d.kind), uint16_t(d.isPhysical ? 1 : 0), d.logical, d.physical});
        infos[i] = {blocks_[i], 0, std::move(ids)};
      }
      HPC_RETURN_IF_ERROR(profileDb_->write(rowsEnd_, summary_.bytes()));
      const uint64_t tuplesAt = rowsEnd_ + summary_.size();
      std::vector<uint8_t> tuples = db::profile_db_tuples(infos);
      HPC_RETURN_IF_ERROR(profileDb_->write(tuplesAt, tuples));
      HPC_RETURN_IF_ERROR(profileDb_->write(0, db::profile_db_header(infos, tuplesAt)));
      auto footer = [](std::string_view f) {
        return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(f.data()), f.size());
      };
      HPC_RETURN_IF_ERROR(profileDb_->write(align8(tuplesAt + tuples.size()), footer(db::kProfileDbFooter)));

      HPC_RETURN_IF_ERROR(cctDb_->write(0, db::cct_db_header(contextBlocks_)));
      HPC_RETURN_IF_ERROR(cctDb_->write(align8(contextsEnd_), footer(db::kCctDbFooter)));
      if (traces_) {
        HPC_RETURN_IF_ERROR(
            traceDb_->write(0, db::trace_db_header(lines_, minTime_ == UINT64_MAX ? 0 : minTime_, maxTime_)));
        HPC_RETURN_IF_ERROR(traceDb_->write(align8(linesEnd_), footer(db::kTraceDbFooter)));
      }
      return Status();
    }();
  }
  for (auto* f : {profileDb_.get(), cctDb_.get(), traceDb_.get()}) {
    if (!f) continue;
    Status c = f->close();
    if (st.ok()) st = c;
  }
  if (st.ok() && comm_.rank() == 0) st = writeMeta(dir_, meta);
  return comm_.agree(st);
}

}  // namespace hpc::analysis::mpi
