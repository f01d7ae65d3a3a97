// Adapter: .hpcrun/.hpctrace files (hpc_fmt_hpcrun) -> the pipeline's ProfileSource.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

#include "analysis/io.hpp"
#include "common/file.hpp"
#include "formats/hpcrun/hpcrun.hpp"

namespace hpc::analysis {

namespace fs = std::filesystem;

namespace {

// hpcrun stores placeholder nodes with load-map id 0 and an 8-character tag as the ip.
Placeholder classify(uint64_t tag) {
  char s[9];
  for (int k = 0; k < 8; ++k) s[k] = static_cast<char>((tag >> (56 - 8 * k)) & 0xff);
  s[8] = 0;
  if (!std::strcmp(s, "^Primary")) return Placeholder::Root;
  if (!std::strcmp(s, "NoActvty")) return Placeholder::NoActivity;
  if (!std::strcmp(s, "| Main  ")) return Placeholder::MainThread;
  if (!std::strcmp(s, "| Thread")) return Placeholder::Thread;
  if (!std::strcmp(s, "GPUKernl")) return Placeholder::GpuKernel;
  if (!std::strcmp(s, "GPUCopy ")) return Placeholder::GpuCopy;
  if (!std::strcmp(s, "GPUMset ")) return Placeholder::GpuMemset;
  if (!std::strcmp(s, "GPUSync ")) return Placeholder::GpuSync;
  if (!std::strcmp(s, "GPUAlloc")) return Placeholder::GpuAlloc;
  if (!std::strcmp(s, "GPUTrace")) return Placeholder::GpuTrace;
  return Placeholder::Other;
}

// Metrics hpcrun defines by a formula over others (GKER:OCC_THR = 100*(#46/#47), ...) are
// the viewer's to compute; the reference database leaves them out, so local ids skip them.
std::vector<int32_t> localMetricIds(const hpcrun::Profile& p) {
  std::vector<int32_t> local(p.metrics.size(), -1);
  int32_t next = 0;
  for (size_t i = 0; i < p.metrics.size(); ++i)
    if (p.metrics[i].formula.empty()) local[i] = next++;
  return local;
}

// Returns the largest node id.
uint32_t decode(const hpcrun::CctView& cct, std::vector<TreeNode>& nodes) {
  nodes.resize(cct.count);
  uint32_t maxId = 0;
  for (uint64_t i = 0; i < cct.count; ++i) {
    const hpcrun::CctView::Node n = cct[i];
    TreeNode& tn = nodes[i];
    tn.id = n.id;
    maxId = std::max(maxId, n.id);
    tn.parent = n.parent_id;
    tn.unwound = n.unwound != 0;
    if (n.lm_id == 0) {
      tn.module = 0;
      tn.offset = 0;
      tn.placeholder = classify(n.lm_ip);
    } else {
      tn.module = n.lm_id;
      tn.offset = n.lm_ip;
      tn.placeholder = Placeholder::None;
    }
  }
  return maxId;
}

// A trace file read a chunk of records at a time into this thread's buffer: a trace is most of
// a measurement's bytes, and read twice (pass 1 lists the nodes its records name, pass 2
// converts them), each chunk while it is in the cache, with no buffer as large as the file.
class TraceFile {
public:
  static constexpr uint64_t kChunkRecords = 32768;
  ~TraceFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  // The header, and the first chunk with it where the file is at most `aheadUpTo` bytes.
  Status open(const std::string& path, uint64_t aheadUpTo = UINT64_MAX) {
    path_ = &path;
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) return Status::error(path + ": cannot open: " + std::strerror(errno));
    struct stat st;
    if (::fstat(fd_, &st) != 0) return Status::error(path + ": cannot stat: " + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) return Status::error(path + ": not a regular file");
    // The header (and the first records with it).
    const size_t size = size_t(st.st_size);
    HPC_RETURN_IF_ERROR(fill(0, std::min<size_t>(size, size <= aheadUpTo ? kChunkRecords * 16 + 32 : 32)));
    HPC_RETURN_IF_ERROR(hpcrun::view_trace({buffer().data(), filled_}, size, path, view_));
    start_ = uint64_t(view_.first - buffer().data());
    return Status();
  }
  const hpcrun::TraceView& view() const { return view_; }
  bool more() const { return next_ < view_.count; }
  // The next chunk's records (count of them, first at first).
  Expected<hpcrun::TraceView> next() {
    hpcrun::TraceView chunk = view_;
    chunk.count = std::min(kChunkRecords, view_.count - next_);
    const uint64_t at = start_ + next_ * view_.stride, bytes = chunk.count * view_.stride;
    if (next_ != 0 || at + bytes > filled_) {  // not in what open() read
      HPC_RETURN_IF_ERROR(fill(at, size_t(bytes)));
      chunk.first = buffer().data();
    } else {
      chunk.first = buffer().data() + at;
    }
    next_ += chunk.count;
    return chunk;
  }

private:
  static std::vector<uint8_t>& buffer() {
    thread_local std::vector<uint8_t> b;  // only grown
    return b;
  }
  Status fill(uint64_t at, size_t n) {
    std::vector<uint8_t>& b = buffer();
    if (b.size() < n) b.resize(n);
    size_t done = 0;
    while (done < n) {
      ssize_t got = counted_pread(fd_, b.data() + done, n - done, off_t(at + done));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) return Status::error(*path_ + ": cannot read: " + std::strerror(errno));
      if (got == 0) return Status::error(*path_ + ": file shrank while being read");
      done += size_t(got);
    }
    filled_ = n;
    return Status();
  }
  const std::string* path_ = nullptr;
  int fd_ = -1;
  hpcrun::TraceView view_;
  uint64_t start_ = 0, next_ = 0;
  size_t filled_ = 0;
};

class HpcrunProfile final : public ProfileSource {
public:
  // A trace of more records than this many a node is not read in pass 1 (ProfileData::
  // traceAllNodes): reading and listing a record costs about a tenth of what a node of the
  // table costs pass 2 (its context fetched from anywhere in memory, spilled and read back).
  static constexpr uint64_t kAllNodesAbove = 8;
  HpcrunProfile(const fs::path& profile, const fs::path& trace) : path_(profile.string()), trace_(trace.string()) {
    path_.shrink_to_fit();
    trace_.shrink_to_fit();
  }
  const std::string& path() const override { return path_; }

  // The tree or the values alone, for callers that want one part: both come from read().
  Expected<ProfileTree> readTree() override {
    ProfileData d;
    HPC_RETURN_IF_ERROR(read(d));
    return std::move(d.tree);
  }
  Expected<ProfileValues> readValues() override {
    ProfileData d;
    HPC_RETURN_IF_ERROR(read(d));
    HPC_RETURN_IF_ERROR(d.valuesStatus);
    return std::move(d.values);
  }

  // Each file read whole into a buffer the caller keeps, and decoded once; nodes the same
  // as those of the file read last into `out` (or of out.reference, where set) are not
  // decoded again.
  Status read(ProfileData& out) override {
    thread_local hpcrun::Profile p;
    thread_local std::vector<int32_t> local;
    ProfileTree& t = out.tree;
    const ProfileData* ref = out.reference;
    if (!ref) std::swap(out.bytes, out.previousBytes);
    const std::vector<uint8_t>& previousBytes = ref ? ref->bytes : out.previousBytes;
    const size_t previousAt = ref ? ref->nodesAt : out.nodesAt;
    const size_t previousLength = ref ? ref->nodesLength : out.nodesLength;
    out.nodesLength = 0;
    const uint64_t previousId = ref ? ref->tree.nodesId : t.nodesId;
    t.nodesId = 0;  // until decoded
    HPC_RETURN_IF_ERROR(read_file_into(path_, out.bytes));
    hpcrun::CctView cct;
    thread_local hpcrun::SectionReuse reuse;
    HPC_RETURN_IF_ERROR(hpcrun::parse_profile_flat(out.bytes, path_, p, cct, out.valuesStatus, &reuse));
    out.nodesAt = size_t(cct.data - out.bytes.data());
    out.nodesLength = size_t(cct.count) * hpcrun::CctView::kNodeBytes;
    const std::string* name = p.header_value("program-name");
    t.programName = name ? *name : std::string();
    t.idTuple.clear();
    for (const auto& e : p.id_tuple)
      t.idTuple.push_back({e.kind(), static_cast<uint8_t>(e.interpret()), e.physical, e.logical});
    // The metric table and the load map copied only where this tree does not hold them
    // already (dozens of metrics in a GPU measurement's profiles, thousands of modules in a
    // Python program's: the same in every profile of a program).
    if (t.metricsGen == 0 || t.metricsGen != reuse.metrics.generation) {
      t.metrics.clear();
      t.descs.clear();
      for (const auto& m : p.metrics) {
        if (m.formula.empty()) t.metrics.push_back(m.name);
        t.descs.push_back({m.name, m.description, m.format, m.formula, m.flags.show, m.flags.show_percent});
      }
      t.metricsGen = reuse.metrics.generation;
    }
    if (t.loadMapGen == 0 || t.loadMapGen != reuse.loadMap.generation) {
      t.loadMap.clear();
      for (const auto& lm : p.load_modules) t.loadMap.emplace_back(lm.id, lm.name);
      t.loadMapGen = reuse.loadMap.generation;
    }
    if (previousId != 0 && previousLength == out.nodesLength &&
        std::memcmp(previousBytes.data() + previousAt, cct.data, previousLength) == 0) {
      t.nodesId = previousId;  // t.nodes are these nodes already
    } else {
      std::swap(t.nodes, t.previousNodes);
      t.previousNodesId = previousId;
      t.maxId = decode(cct, t.nodes);
      static std::atomic<uint64_t> lastId{0};
      t.nodesId = lastId.fetch_add(1, std::memory_order_relaxed) + 1;
      t.maxIdOf = t.nodesId;
    }
    t.hasTrace = !trace_.empty();

    ProfileValues& v = out.values;
    v.values.clear();
    v.trace.clear();
    out.traceNodes.clear();
    out.traceRecords = 0;
    out.traceAllNodes = false;
    out.traceStatus = Status();
    if (!out.valuesStatus.ok()) return Status();
    local = localMetricIds(p);
    v.values.reserve(p.flat_values.size());
    for (const auto& [node, mv] : p.flat_values) {
      if (mv.metric_id >= p.metrics.size() || local[mv.metric_id] < 0) continue;
      bool isInt = p.metrics[mv.metric_id].flags.val_fmt == hpcrun::kValFmtInt;
      double x = isInt ? static_cast<double>(mv.bits) : mv.as_real();
      if (x != 0) v.values.push_back({node, uint16_t(local[mv.metric_id]), x});
    }
    if (!trace_.empty()) {
      // Only what its records name: pass 2 reads them again (readTrace). A trace of many
      // records a node is not read now: pass 2 converts it by every node of the tree.
      TraceFile file;
      Status st = file.open(trace_, 32 + 16 * kAllNodesAbove * cct.count);  // read ahead unless that long
      const bool allNodes = st.ok() && file.view().count > kAllNodesAbove * cct.count;
      thread_local TraceNodeLister lister;
      lister.begin(cct.count);
      while (st.ok() && !allNodes && file.more()) {
        Expected<hpcrun::TraceView> chunk = file.next();
        if (!chunk.ok()) {
          st = chunk.status();
          break;
        }
        const uint8_t* const ids = chunk->first + 8;
        const uint64_t stride = chunk->stride;
        lister.add(chunk->count, [&](uint64_t k) {
          uint32_t id;
          std::memcpy(&id, ids + k * stride, 4);
          return __builtin_bswap32(id);
        });
      }
      if (!st.ok()) {
        // The values do not depend on the trace: the profile stays, without one.
        t.hasTrace = false;
        out.traceStatus = Status::error(st.message() + "; the profile is kept without its trace");
        return Status();
      }
      if (file.view().trailing != 0)  // cut short: its whole records are kept
        out.traceStatus = Status::error(file.view().trailingError.message() + "; kept the " +
                                        std::to_string(file.view().count) + " whole records before them");
      out.traceAllNodes = allNodes;
      out.traceNodes = lister.list();
      out.traceRecords = file.view().count;
    }
    return Status();
  }

  Status readTrace(const TraceChunk& each) override {
    if (trace_.empty()) return Status();
    TraceFile file;
    HPC_RETURN_IF_ERROR(file.open(trace_));
    thread_local std::vector<TraceRecord> records;
    while (file.more()) {
      HPC_ASSIGN_OR_RETURN(hpcrun::TraceView chunk, file.next());
      records.resize(chunk.count);
      TraceRecord* const __restrict to = records.data();
      for (uint64_t k = 0; k < chunk.count; ++k) {
        const hpcrun::TraceRecord r = chunk.record(k);
        to[k] = {r.time, r.cct_id};
      }
      HPC_ASSIGN_OR_RETURN(bool more, each(records));
      if (!more) break;
    }
    return Status();
  }

private:
  // Names as strings, not paths: a path keeps each of its components apart as well (about
  // 600 bytes a profile where strings take about 130, and there is one of these per profile).
  std::string path_, trace_;  // trace_ empty: none
};

}  // namespace

std::unique_ptr<ProfileSource> openHpcrunProfile(const fs::path& profile, const fs::path& trace) {
  return std::make_unique<HpcrunProfile>(profile, trace);
}

}  // namespace hpc::analysis
