// Streaming writers for hpcprof: space is reserved at the end of the file under a
// lock and filled with pwrite, so rows may be written from many threads in any order.
#include <fcntl.h>
#include <unistd.h>

#include <cstring>

#include "common/file.hpp"
#include "formats/db/data_block.hpp"
#include "formats/db/internal.hpp"

namespace hpc::db {

class StreamFile {
public:
  explicit StreamFile(const std::filesystem::path& p) : out_(p, AtomicOutput::Kind::File) {}
  ~StreamFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  Status open() {
    HPC_RETURN_IF_ERROR(out_.begin());
    fd_ = ::open(out_.temp_path().c_str(), O_RDWR | O_TRUNC);
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
    size_t done = 0;
    while (done < b.size()) {
      ssize_t n = ::pwrite(fd_, b.data() + done, b.size() - done, off_t(at + done));
      if (n <= 0) return Status::error(out_.target().string() + ": write failed: " + std::strerror(errno));
      done += size_t(n);
    }
    return Status();
  }
  Status read(uint64_t at, std::span<uint8_t> b) const {
    size_t done = 0;
    while (done < b.size()) {
      ssize_t n = ::pread(fd_, b.data() + done, b.size() - done, off_t(at + done));
      if (n <= 0) return Status::error(out_.target().string() + ": read back failed");
      done += size_t(n);
    }
    return Status();
  }
  Status commit(std::string_view footer) {
    uint64_t at = reserve(footer.size());
    HPC_RETURN_IF_ERROR(write(at, {reinterpret_cast<const uint8_t*>(footer.data()), footer.size()}));
    if (::close(fd_) != 0) return Status::error(out_.target().string() + ": close failed");
    fd_ = -1;
    return out_.commit();
  }

private:
  AtomicOutput out_;
  int fd_ = -1;
  std::mutex mu_;
  uint64_t end_ = 0;
};

namespace {
Status write_buf(StreamFile& f, uint64_t at, const ByteWriter& w) { return f.write(at, w.buffer()); }
}  // namespace

// ---- profile.db
struct ProfileDbWriter::Info {
  uint64_t nValues = 0, nCtxs = 0;
  detail::BlockPtrs ptrs;
  uint32_t flags = 0;
  std::optional<std::vector<Identifier>> idTuple;
};

ProfileDbWriter::ProfileDbWriter() = default;
ProfileDbWriter::~ProfileDbWriter() = default;

Status ProfileDbWriter::begin(const std::filesystem::path& file, uint32_t numProfiles) {
  out_ = std::make_unique<StreamFile>(file);
  HPC_RETURN_IF_ERROR(out_->open());
  infos_.assign(numProfiles, Info{});
  out_->reserve(0x30 + 0x10 + 0x30 * uint64_t(numProfiles));
  return Status();
}

Status ProfileDbWriter::write(uint32_t index, uint32_t flags,
                              const std::optional<std::vector<Identifier>>& idTuple,
                              const ProfileValues& values) {
  if (!out_ || index >= infos_.size()) return Status::error("profile.db: profile index out of range");
  ByteWriter w;
  // Positions inside w are relative; compute the size first, then place it.
  detail::put_block(w, values, 4, 0);
  uint64_t at = out_->reserve(w.size());
  ByteWriter placed;
  detail::BlockPtrs b = detail::put_block(placed, values, 4, at);
  HPC_RETURN_IF_ERROR(write_buf(*out_, at, placed));
  Info& info = infos_[index];
  info.nValues = values.size();
  info.nCtxs = values.key.size();
  info.ptrs = b;
  info.flags = flags;
  info.idTuple = idTuple;
  return Status();
}

Status ProfileDbWriter::read(uint32_t index, uint32_t lo, uint32_t hi, ProfileValues& out) const {
  out = ProfileValues{};
  if (index >= infos_.size()) return Status::error("profile.db: profile index out of range");
  const Info& info = infos_[index];
  if (info.nCtxs == 0) return Status();
  std::vector<uint8_t> idx(12 * info.nCtxs), vals(10 * info.nValues);
  HPC_RETURN_IF_ERROR(out_->read(info.ptrs.pIdx, idx));
  HPC_RETURN_IF_ERROR(out_->read(info.ptrs.pValues, vals));
  ByteView iv(idx, "profile.db"), vv(vals, "profile.db");
  for (uint64_t i = 0; i < info.nCtxs; ++i) {
    uint32_t ctx = iv.load<uint32_t, std::endian::little>(12 * i);
    if (ctx < lo || ctx >= hi) continue;
    uint64_t s = iv.load<uint64_t, std::endian::little>(12 * i + 4);
    uint64_t e = i + 1 < info.nCtxs ? iv.load<uint64_t, std::endian::little>(12 * (i + 1) + 4) : info.nValues;
    for (uint64_t j = s; j < e && j < info.nValues; ++j)
      out.push(vv.load<uint16_t, std::endian::little>(10 * j), vv.load<double, std::endian::little>(10 * j + 2));
    out.close(ctx);
  }
  return Status();
}

Status ProfileDbWriter::finish() {
  if (!out_) return Status::error("profile.db: finish() before begin()");
  ByteWriter tuples;
  std::vector<uint64_t> tupleAt(infos_.size(), 0);
  for (size_t i = 0; i < infos_.size(); ++i) {
    if (!infos_[i].idTuple) continue;
    tupleAt[i] = tuples.size();
    detail::put_id_tuple(tuples, *infos_[i].idTuple);
  }
  uint64_t tuplesAt = out_->reserve(tuples.size());
  HPC_RETURN_IF_ERROR(write_buf(*out_, tuplesAt, tuples));
  ByteWriter h;
  detail::begin_file(h, "prof", 2);
  size_t info = h.size();
  h.zeros(0x10 + 0x30 * infos_.size());
  h.patch_le<uint64_t>(info, infos_.empty() ? 0 : info + 0x10);
  h.patch_le<uint32_t>(info + 8, uint32_t(infos_.size()));
  h.patch_le<uint8_t>(info + 0xc, 0x30);
  for (size_t i = 0; i < infos_.size(); ++i) {
    size_t a = info + 0x10 + 0x30 * i;
    detail::patch_block_header(h, a, infos_[i].ptrs, infos_[i].nValues, infos_[i].nCtxs);
    if (infos_[i].idTuple) h.patch_le<uint64_t>(a + 0x20, tuplesAt + tupleAt[i]);
    h.patch_le<uint32_t>(a + 0x28, infos_[i].flags);
  }
  detail::set_section(h, 0, info, h.size() - info);
  detail::set_section(h, 1, tuplesAt, tuples.size());
  HPC_RETURN_IF_ERROR(write_buf(*out_, 0, h));
  Status s = out_->commit("_prof.db");
  out_.reset();
  return s;
}

// ---- cct.db
CctDbWriter::CctDbWriter() = default;
CctDbWriter::~CctDbWriter() = default;

Status CctDbWriter::begin(const std::filesystem::path& file, uint32_t numContexts) {
  out_ = std::make_unique<StreamFile>(file);
  HPC_RETURN_IF_ERROR(out_->open());
  blocks_.assign(numContexts, Block{});
  out_->reserve(0x20 + 0x10 + 0x20 * uint64_t(numContexts));
  return Status();
}

Status CctDbWriter::write(uint32_t ctxId, const ContextValues& values) {
  if (!out_ || ctxId >= blocks_.size() || int64_t(ctxId) <= last_)
    return Status::error("cct.db: context " + std::to_string(ctxId) + " out of range or order");
  last_ = ctxId;
  ByteWriter w;
  detail::put_block(w, values, 2, 0);
  uint64_t at = out_->reserve(w.size());
  ByteWriter placed;
  detail::BlockPtrs b = detail::put_block(placed, values, 2, at);
  HPC_RETURN_IF_ERROR(write_buf(*out_, at, placed));
  blocks_[ctxId] = {values.size(), b.pValues, b.pIdx, uint16_t(values.key.size())};
  return Status();
}

Status CctDbWriter::finish() {
  if (!out_) return Status::error("cct.db: finish() before begin()");
  ByteWriter h;
  detail::begin_file(h, "ctxt", 1);
  size_t info = h.size();
  h.zeros(0x10 + 0x20 * blocks_.size());
  h.patch_le<uint64_t>(info, blocks_.empty() ? 0 : info + 0x10);
  h.patch_le<uint32_t>(info + 8, uint32_t(blocks_.size()));
  h.patch_le<uint8_t>(info + 0xc, 0x20);
  for (size_t i = 0; i < blocks_.size(); ++i)
    detail::patch_block_header(h, info + 0x10 + 0x20 * i, {blocks_[i].pValues, blocks_[i].pMetricIndices},
                               blocks_[i].nValues, blocks_[i].nMetrics);
  detail::set_section(h, 0, info, h.size() - info);
  HPC_RETURN_IF_ERROR(write_buf(*out_, 0, h));
  Status s = out_->commit("__ctx.db");
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
  out_->reserve(0x20 + 0x20 + 0x18 * uint64_t(numTraces));
  return Status();
}

Status TraceDbWriter::write(uint32_t index, uint32_t profIndex, std::span<const TraceElem> line) {
  if (!out_ || index >= headers_.size()) return Status::error("trace.db: trace index out of range");
  ByteWriter w;
  for (auto& e : line) {
    w.le<uint64_t>(e.timestamp);
    w.le<uint32_t>(e.ctxId);
  }
  uint64_t at = out_->reserve(w.size());
  HPC_RETURN_IF_ERROR(write_buf(*out_, at, w));
  headers_[index] = {profIndex, at, at + w.size()};
  if (!line.empty()) {
    std::lock_guard lock(mu_);
    min_ = std::min(min_, line.front().timestamp);
    max_ = std::max(max_, line.back().timestamp);
  }
  return Status();
}

Status TraceDbWriter::finish() {
  if (!out_) return Status::error("trace.db: finish() before begin()");
  ByteWriter h;
  detail::begin_file(h, "trce", 1);
  size_t sec = h.size();
  h.zeros(0x20 + 0x18 * headers_.size());
  h.patch_le<uint64_t>(sec, headers_.empty() ? 0 : sec + 0x20);
  h.patch_le<uint32_t>(sec + 8, uint32_t(headers_.size()));
  h.patch_le<uint8_t>(sec + 0xc, 0x18);
  h.patch_le<uint64_t>(sec + 0x10, min_ == UINT64_MAX ? 0 : min_);
  h.patch_le<uint64_t>(sec + 0x18, max_);
  for (size_t i = 0; i < headers_.size(); ++i) {
    size_t a = sec + 0x20 + 0x18 * i;
    h.patch_le<uint32_t>(a, headers_[i].profIndex);
    h.patch_le<uint64_t>(a + 8, headers_[i].pStart);
    h.patch_le<uint64_t>(a + 0x10, headers_[i].pEnd);
  }
  detail::set_section(h, 0, sec, h.size() - sec);
  HPC_RETURN_IF_ERROR(write_buf(*out_, 0, h));
  Status s = out_->commit("trace.db");
  out_.reset();
  return s;
}

}  // namespace hpc::db
