// Streaming writers for hpcprof: space is reserved at the end of the file under a
// lock and filled with pwrite, so rows may be written from many threads in any order;
// blocks that continue the last one are gathered into one write.
#include <fcntl.h>
#include <unistd.h>

#include <bit>
#include <cstring>

#include "common/file.hpp"
#include "formats/db/data_block.hpp"
#include "formats/db/internal.hpp"
#include "formats/db/regions.hpp"

namespace hpc::db {

class StreamFile {
public:
  explicit StreamFile(const std::filesystem::path& p) : out_(p, AtomicOutput::Kind::File) {}
  ~StreamFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  Status open() {
    HPC_RETURN_IF_ERROR(out_.begin());
    // begin() made it, empty. No O_TRUNC: on ext4 truncating a file to nothing marks it to be
    // written back to disk on close (auto_da_alloc), which made closing the database's files
    // wait for tens of MB of writes.
    fd_ = ::open(out_.temp_path().c_str(), O_RDWR);
    if (fd_ < 0) return Status::error(out_.temp_path().string() + ": cannot open: " + std::strerror(errno));
    return Status();
  }
  // MT: thread-safe. Reserves `size` bytes at the end, 8-aligned.
  uint64_t reserve(uint64_t size) {
    std::lock_guard lock(mu_);
    end_ = (end_ + 7) / 8 * 8;
    uint64_t at = end_;
    end_ += size;
    return at;
  }
  // MT: thread-safe for disjoint ranges.
  Status write(uint64_t at, std::span<const uint8_t> b) {
    if (b.size() <= kStageBytes / 2) return put(at, b.size(), [&](uint8_t* p) { std::memcpy(p, b.data(), b.size()); });
    {
      std::lock_guard lock(stageMu_);
      HPC_RETURN_IF_ERROR(flushLocked());
    }
    return pwriteAll(at, b);
  }
  // The n bytes at `at`, made by fill(p): straight into the write-combining buffer when they
  // continue what it holds (blocks reserved one after the other lie end to end but for the
  // 8-byte alignment; the gap is zero-filled as the file's hole would be). A write costs
  // several microseconds on a virtual machine, whatever its size: 2000 profiles' rows and
  // trace lines were 4000 writes. MT: thread-safe for disjoint ranges.
  template <typename F> Status put(uint64_t at, size_t n, F&& fill) {
    std::lock_guard lock(stageMu_);
    const uint64_t end = stageAt_ + stageUsed_;
    if (stageUsed_ && at >= end && at - end < 8 && stageUsed_ + (at - end) + n <= kStageBytes) {
      std::memset(stage_.get() + stageUsed_, 0, size_t(at - end));
      fill(stage_.get() + (at - stageAt_));
      stageUsed_ = size_t(at - stageAt_) + n;
      return Status();
    }
    HPC_RETURN_IF_ERROR(flushLocked());
    if (n > kStageBytes / 2) {
      thread_local std::vector<uint8_t> one;  // only grown
      if (one.size() < n) one.resize(n);
      fill(one.data());
      return pwriteAll(at, {one.data(), n});
    }
    if (!stage_) stage_.reset(new uint8_t[kStageBytes]);
    stageAt_ = at;
    fill(stage_.get());
    stageUsed_ = n;
    return Status();
  }
  Status read(uint64_t at, std::span<uint8_t> b) {
    {
      std::lock_guard lock(stageMu_);
      HPC_RETURN_IF_ERROR(flushLocked());
    }
    size_t done = 0;
    while (done < b.size()) {
      ssize_t n = counted_pread(fd_, b.data() + done, b.size() - done, off_t(at + done));
      if (n <= 0) return Status::error(out_.target().string() + ": read back failed");
      done += size_t(n);
    }
    return Status();
  }
  Status commit(std::string_view footer) {
    uint64_t at = reserve(footer.size());
    HPC_RETURN_IF_ERROR(write(at, {reinterpret_cast<const uint8_t*>(footer.data()), footer.size()}));
    {
      std::lock_guard lock(stageMu_);
      HPC_RETURN_IF_ERROR(flushLocked());
    }
    HPC_RETURN_IF_ERROR(space_.trim(fd_, out_.target()));
    if (::close(fd_) != 0) return Status::error(out_.target().string() + ": close failed");
    fd_ = -1;
    return out_.commit();
  }

private:
  static constexpr size_t kStageBytes = size_t(512) << 10;
  Status pwriteAll(uint64_t at, std::span<const uint8_t> b) {
    space_.cover(fd_, at + b.size());
    size_t done = 0;
    while (done < b.size()) {
      ssize_t n = counted_pwrite(fd_, b.data() + done, b.size() - done, off_t(at + done));
      if (n <= 0) return Status::error(out_.target().string() + ": write failed: " + std::strerror(errno));
      done += size_t(n);
    }
    return Status();
  }
  Status flushLocked() {
    if (!stageUsed_) return Status();
    const size_t n = stageUsed_;
    stageUsed_ = 0;
    return pwriteAll(stageAt_, {stage_.get(), n});
  }

  AtomicOutput out_;
  int fd_ = -1;
  SpaceAhead space_;
  std::mutex mu_;
  uint64_t end_ = 0;
  std::mutex stageMu_;
  std::unique_ptr<uint8_t[]> stage_;
  uint64_t stageAt_ = 0;
  size_t stageUsed_ = 0;
};

// ---- profile.db
// Rows larger than this are encoded and written a piece of this size at a time.
constexpr size_t kPieceBytes = size_t(4) << 20;

struct ProfileDbWriter::Info {
  uint64_t nValues = 0, nCtxs = 0;
  detail::BlockPtrs ptrs;
  uint32_t flags = 0;
  std::optional<std::vector<Identifier>> idTuple;
  mutable RowCursor cursor;  // where read() of this row stopped
};

ProfileDbWriter::ProfileDbWriter() = default;
ProfileDbWriter::~ProfileDbWriter() = default;

Status ProfileDbWriter::begin(const std::filesystem::path& file, uint32_t numProfiles) {
  out_ = std::make_unique<StreamFile>(file);
  HPC_RETURN_IF_ERROR(out_->open());
  infos_.assign(numProfiles, Info{});
  out_->reserve(profile_db_header_size(numProfiles));
  return Status();
}

Status ProfileDbWriter::write(uint32_t index, uint32_t flags,
                              const std::optional<std::vector<Identifier>>& idTuple,
                              const ProfileValues& values) {
  return write(index, flags, idTuple, ProfileValuesView{values.key, values.start, values.sub, values.value});
}

Status ProfileDbWriter::write(uint32_t index, uint32_t flags,
                              const std::optional<std::vector<Identifier>>& idTuple,
                              const ProfileValuesView& values) {
  if (!out_ || index >= infos_.size()) return Status::error("profile.db: profile index out of range");
  if (values.start.size() != values.key.size() + 1 || values.sub.size() != values.value.size())
    return Status::error("profile.db: profile " + std::to_string(index) + ": inconsistent sparse row");
  // Reserved 8-aligned, so the block's size does not depend on where it lands.
  uint64_t at = out_->reserve(detail::block_size(values, 4));
  const size_t n = detail::block_size(values, 4, at);
  detail::BlockPtrs b;
  if (n <= kPieceBytes) {
    HPC_RETURN_IF_ERROR(out_->put(at, n, [&](uint8_t* p) { b = detail::encode_block(p, values, 4, at); }));
  } else {
    // A large row (the summary of a large tree: tens of MB) goes a piece at a time, not
    // encoded whole beside itself.
    constexpr size_t kVal = sizeof(uint16_t) + sizeof(double), kIdx = sizeof(uint32_t) + sizeof(uint64_t);
    const uint64_t valueBytes = values.size() * kVal;
    const uint64_t pad = (4 - (at + valueBytes) % 4) % 4;
    b.pValues = at;
    b.pIdx = at + valueBytes + pad;
    std::vector<uint8_t> piece(kPieceBytes);
    uint64_t to = at;
    for (size_t i = 0; i < values.size();) {
      const size_t m = std::min(values.size() - i, kPieceBytes / kVal);
      detail::encode_values(piece.data(), values, i, m);
      HPC_RETURN_IF_ERROR(out_->write(to, {piece.data(), m * kVal}));
      to += m * kVal;
      i += m;
    }
    if (pad) {
      std::memset(piece.data(), 0, pad);
      HPC_RETURN_IF_ERROR(out_->write(to, {piece.data(), size_t(pad)}));
      to += pad;
    }
    for (size_t i = 0; i < values.key.size();) {
      const size_t m = std::min(values.key.size() - i, kPieceBytes / kIdx);
      detail::encode_index(piece.data(), values, i, m);
      HPC_RETURN_IF_ERROR(out_->write(to, {piece.data(), m * kIdx}));
      to += m * kIdx;
      i += m;
    }
    if (to != at + n) return Status::error("profile.db: profile " + std::to_string(index) + ": encoded size mismatch");
  }
  Info& info = infos_[index];
  info.nValues = values.size();
  info.nCtxs = values.key.size();
  info.ptrs = b;
  info.flags = flags;
  info.idTuple = idTuple;
  return Status();
}

Status ProfileDbWriter::read(uint32_t index, uint32_t lo, uint32_t hi, ProfileValues& out) const {
  if (index >= infos_.size()) return Status::error("profile.db: profile index out of range");
  const Info& info = infos_[index];
  BlockRef b{info.nValues, info.nCtxs, info.ptrs.pValues, info.ptrs.pIdx};
  return read_profile_block([this](uint64_t at, std::span<uint8_t> into) { return out_->read(at, into); },
                            b, lo, hi, out, info.cursor);
}

Status ProfileDbWriter::finish() {
  if (!out_) return Status::error("profile.db: finish() before begin()");
  std::vector<ProfileInfo> infos;
  infos.reserve(infos_.size());
  for (const Info& i : infos_)
    infos.push_back({{i.nValues, i.nCtxs, i.ptrs.pValues, i.ptrs.pIdx}, i.flags, i.idTuple});
  std::vector<uint8_t> tuples = profile_db_tuples(infos);
  uint64_t tuplesAt = out_->reserve(tuples.size());
  HPC_RETURN_IF_ERROR(out_->write(tuplesAt, tuples));
  HPC_RETURN_IF_ERROR(out_->write(0, profile_db_header(infos, tuplesAt)));
  Status s = out_->commit(kProfileDbFooter);
  out_.reset();
  return s;
}

// ---- cct.db
// Blocks are reserved one after the other by this writer alone, so they lie end to end but
// for the 8-byte alignment: they are gathered, gaps zero-filled as the file's holes would be,
// and written a MiB at a time instead of one write per context.
struct CctDbWriter::Stage {
  static constexpr size_t kFlushBytes = size_t(1) << 20;
  std::vector<uint8_t> buf;  // only grown: `used` bytes hold blocks
  size_t used = 0;
  uint64_t at = 0;  // file offset of buf's first byte
};

CctDbWriter::CctDbWriter() = default;
CctDbWriter::~CctDbWriter() = default;

Status CctDbWriter::flush() {
  if (stage_->used) HPC_RETURN_IF_ERROR(out_->write(stage_->at, std::span<const uint8_t>(stage_->buf.data(), stage_->used)));
  stage_->at += stage_->used;
  stage_->used = 0;
  return Status();
}

Status CctDbWriter::begin(const std::filesystem::path& file, uint32_t numContexts) {
  stage_ = std::make_unique<Stage>();
  out_ = std::make_unique<StreamFile>(file);
  HPC_RETURN_IF_ERROR(out_->open());
  blocks_.assign(numContexts, BlockRef{});
  out_->reserve(cct_db_header_size(numContexts));
  return Status();
}

Status CctDbWriter::write(uint32_t ctxId, const ContextValues& values) {
  return write(ctxId, ContextValuesView{values.key, values.start, 0, values.sub, values.value});
}

Status CctDbWriter::write(uint32_t ctxId, const ContextValuesView& values) {
  if (!out_ || ctxId >= blocks_.size() || int64_t(ctxId) <= last_)
    return Status::error("cct.db: context " + std::to_string(ctxId) + " out of range or order");
  if (values.start.size() < values.key.size() || values.sub.size() != values.value.size())
    return Status::error("cct.db: context " + std::to_string(ctxId) + ": inconsistent sparse column");
  last_ = ctxId;
  const uint64_t size = detail::block_size(values, 2);
  uint64_t at = out_->reserve(size);
  Stage& st = *stage_;
  if (st.used == 0) st.at = at;
  if (at < st.at + st.used || at - (st.at + st.used) >= 8)
    return Status::error("cct.db: blocks not contiguous");  // reserve() is ours alone
  const size_t gap = size_t(at - (st.at + st.used));
  const size_t n = detail::block_size(values, 2, at);
  if (st.buf.size() < st.used + gap + n) st.buf.resize(std::max(st.used + gap + n, 2 * st.buf.size()));
  std::memset(st.buf.data() + st.used, 0, gap);
  detail::BlockPtrs b = detail::encode_block(st.buf.data() + st.used + gap, values, 2, at);
  st.used += gap + n;
  blocks_[ctxId] = {values.size(), values.key.size(), b.pValues, b.pIdx};
  if (st.used >= Stage::kFlushBytes) return flush();
  return Status();
}

Status CctDbWriter::finish() {
  if (!out_) return Status::error("cct.db: finish() before begin()");
  HPC_RETURN_IF_ERROR(flush());
  HPC_RETURN_IF_ERROR(out_->write(0, cct_db_header(blocks_)));
  Status s = out_->commit(kCctDbFooter);
  out_.reset();
  return s;
}

// ---- trace.db
TraceDbWriter::TraceDbWriter() = default;
TraceDbWriter::~TraceDbWriter() = default;

Status TraceDbWriter::begin(const std::filesystem::path& file, uint32_t numTraces) {
  out_ = std::make_unique<StreamFile>(file);
  HPC_RETURN_IF_ERROR(out_->open());
  headers_.assign(numTraces, Header{});
  out_->reserve(trace_db_header_size(numTraces));
  return Status();
}

Status TraceDbWriter::write(uint32_t index, uint32_t profIndex, std::span<const TraceElem> line) {
  return write(index, profIndex, line, &TraceElem::timestamp, &TraceElem::ctxId);
}

Status TraceDbWriter::writeEncoded(uint32_t index, uint32_t profIndex, uint64_t count, uint64_t first,
                                   uint64_t last, const std::function<void(uint8_t*)>& encode) {
  if (!out_ || index >= headers_.size()) return Status::error("trace.db: trace index out of range");
  static_assert(std::endian::native == std::endian::little, "the database is little-endian");
  const uint64_t n = 12 * count;
  const uint64_t at = out_->reserve(n);
  HPC_RETURN_IF_ERROR(out_->put(at, size_t(n), encode));
  headers_[index] = {profIndex, at, at + n};
  if (count) {
    std::lock_guard lock(mu_);
    min_ = std::min(min_, first);
    max_ = std::max(max_, last);
  }
  return Status();
}

Status TraceDbWriter::place(std::span<const uint64_t> records, std::span<const uint32_t> profIndex) {
  if (!out_ || records.size() > headers_.size() || profIndex.size() != records.size())
    return Status::error("trace.db: lines placed out of range");
  placed_.assign(headers_.size(), 0);
  for (size_t k = 0; k < records.size(); ++k) {
    const uint64_t at = out_->reserve(12 * records[k]);
    headers_[k] = {profIndex[k], at, at};
    placed_[k] = records[k];
  }
  return Status();
}

Status TraceDbWriter::writePartEncoded(uint32_t index, uint64_t from, std::span<const uint8_t> bytes) {
  static_assert(std::endian::native == std::endian::little, "the database is little-endian");
  if (!out_ || index >= placed_.size() || from + bytes.size() / 12 > placed_[index])
    return Status::error("trace.db: trace piece out of its line's place");
  if (bytes.empty()) return Status();
  // Small lines through the write-combining buffer (those of profiles written one after the
  // other lie end to end), large pieces straight to the file.
  return out_->write(headers_[index].pStart + 12 * from, bytes);
}

Status TraceDbWriter::endLine(uint32_t index, uint64_t records, uint64_t first, uint64_t last) {
  if (!out_ || index >= placed_.size() || records > placed_[index])
    return Status::error("trace.db: trace line ended out of its place");
  headers_[index].pEnd = headers_[index].pStart + 12 * records;
  if (records) {
    std::lock_guard lock(mu_);
    min_ = std::min(min_, first);
    max_ = std::max(max_, last);
  }
  return Status();
}

Status TraceDbWriter::finish() {
  if (!out_) return Status::error("trace.db: finish() before begin()");
  std::vector<TraceRef> refs;
  refs.reserve(headers_.size());
  for (const Header& t : headers_) refs.push_back({t.profIndex, t.pStart, t.pEnd});
  HPC_RETURN_IF_ERROR(out_->write(0, trace_db_header(refs, min_ == UINT64_MAX ? 0 : min_, max_)));
  Status s = out_->commit(kTraceDbFooter);
  out_.reset();
  return s;
}

}  // namespace hpc::db
