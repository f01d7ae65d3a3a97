#include "analysis/pipeline.hpp"

#include <fcntl.h>
#include <sys/uio.h>
#include <sys/resource.h>
#include <tbb/enumerable_thread_specific.h>
#include <unistd.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_pipeline.h>
#include <tbb/task_arena.h>
#include <tbb/task_group.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "analysis/expand.hpp"
#include "analysis/progress.hpp"
#include "analysis/propagate.hpp"
#include "analysis/stages.hpp"
#include "analysis/trace_lines.hpp"
#include "analysis/transpose.hpp"
#include "common/file.hpp"

namespace hpc::analysis {

void warnProfile(const char* what, const std::string& path, const std::string& why) {
  const std::string prefix = path + ": ";
  const bool named = why.compare(0, prefix.size(), prefix) == 0;
  std::fprintf(stderr, "%s: warning: %s%s\n", program_invocation_short_name, what,
               (named ? why : prefix + why).c_str());
}

namespace {

enum : uint8_t { kBothValid = 0, kLogicLocal = 1, kLogicGlobal = 2, kLogicOnly = 3 };

// The wall time of each phase; with -v printed with its CPU (user + system, all threads)
// time, the peak resident memory so far and the bytes it read and wrote through the counted
// calls (common/file.hpp) with the wall time those took (summed over threads).
class PhaseTimer {
public:
  explicit PhaseTimer(bool on) : on_(on), t0_(std::chrono::steady_clock::now()), cpu0_(cpu()), io0_(io_counts()) {}
  double lap(const char* what) {
    auto now = std::chrono::steady_clock::now();
    const double wall = std::chrono::duration<double>(now - t0_).count();
    if (!on_) {
      t0_ = now;
      return wall;
    }
    const double c = cpu();
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    const IoCounts io = io_counts();
    std::fprintf(stderr,
                 "hpcprof: %-28s %8.3f s (CPU %.3f s, peak %.1f MiB; read %.1f MB in %.3f s, wrote %.1f MB in "
                 "%.3f s)\n",
                 what, wall, c - cpu0_, double(ru.ru_maxrss) / 1024, double(io.readBytes - io0_.readBytes) / 1e6,
                 double(io.readNs - io0_.readNs) / 1e9, double(io.writeBytes - io0_.writeBytes) / 1e6,
                 double(io.writeNs - io0_.writeNs) / 1e9);
    t0_ = now;
    cpu0_ = c;
    io0_ = io;
    return wall;
  }

private:
  static double cpu() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1e-6 * double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
  }
  bool on_;
  std::chrono::steady_clock::time_point t0_;
  double cpu0_;
  IoCounts io0_;
};

}  // namespace

std::vector<std::vector<IdOut>> resolveIdTuples(const std::vector<std::vector<IdIn>>& in) {
  // Distinct physical ids per (kind, scope); scope is the tuple prefix for local ids.
  std::map<std::pair<uint16_t, std::vector<uint64_t>>, std::set<uint64_t>> seen;
  auto scopeOf = [](const std::vector<IdIn>& t, size_t i, bool local) {
    std::vector<uint64_t> s;
    if (local)
      for (size_t j = 0; j < i; ++j) s.insert(s.end(), {t[j].kind, t[j].physical});
    return s;
  };
  for (const auto& t : in)
    for (size_t i = 0; i < t.size(); ++i)
      if (t[i].interpret == kLogicLocal || t[i].interpret == kLogicGlobal)
        seen[{t[i].kind, scopeOf(t, i, t[i].interpret == kLogicLocal)}].insert(t[i].physical);

  std::vector<std::vector<IdOut>> out(in.size());
  for (size_t p = 0; p < in.size(); ++p) {
    for (size_t i = 0; i < in[p].size(); ++i) {
      const IdIn& id = in[p][i];
      IdOut o;
      o.kind = id.kind;
      switch (id.interpret) {
      case kLogicOnly:
        o.logical = uint32_t(id.logical);
        o.physical = id.logical;
        break;
      case kLogicLocal:
      case kLogicGlobal: {
        const auto& s = seen[{id.kind, scopeOf(in[p], i, id.interpret == kLogicLocal)}];
        o.isPhysical = true;
        o.physical = id.physical;
        o.logical = uint32_t(std::distance(s.begin(), s.find(id.physical)));
        break;
      }
      default:
        o.isPhysical = true;
        o.physical = id.physical;
        o.logical = uint32_t(id.logical);
      }
      out[p].push_back(o);
    }
  }
  return out;
}

Expected<std::unique_ptr<Spill>> Spill::create(const std::filesystem::path& dir, unsigned files) {
  std::vector<std::filesystem::path> dirs;
  if (!dir.empty()) dirs.push_back(dir);
  std::error_code ec;
  std::filesystem::path tmp = std::filesystem::temp_directory_path(ec);
  dirs.push_back(ec ? std::filesystem::path("/tmp") : tmp);
  files = std::clamp(files, 1u, 255u);
  std::unique_ptr<File[]> made(new File[files]);
  auto closeAll = [&] {
    for (unsigned k = 0; k < files; ++k)
      if (made[k].fd >= 0) ::close(made[k].fd);
  };
  std::string why;
  for (const auto& d : dirs) {
    unsigned k = 0;
    for (; k < files; ++k) {
      int fd = ::open(d.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
      if (fd < 0) {
        // No O_TMPFILE on this file system: a named file, unlinked at once.
        std::string name = (d / "hpcprof-spill-XXXXXX").string();
        fd = ::mkstemp(name.data());
        if (fd >= 0) ::unlink(name.c_str());
      }
      if (fd < 0) break;
      made[k].fd = fd;
    }
    if (k == files) return std::unique_ptr<Spill>(new Spill(std::move(made), files, d.string()));
    why = d.string() + ": " + std::strerror(errno);
    closeAll();
    for (unsigned j = 0; j < files; ++j) made[j].fd = -1;
  }
  return Status::error("cannot create a temporary file for the profiles' values: " + why);
}

Spill::~Spill() {
  for (unsigned k = 0; k < numFiles_; ++k) ::close(files_[k].fd);
}

Expected<uint64_t> Spill::append(std::span<const std::span<const uint8_t>> pieces) {
  // The file of the calling thread's slot in its task arena.
  const int slot = tbb::this_task_arena::current_thread_index();
  const unsigned which = slot > 0 ? unsigned(slot) % numFiles_ : 0;
  File& file = files_[which];
  uint64_t total = 0;
  for (const auto& p : pieces) total += p.size();
  const uint64_t start = file.end.fetch_add(total, std::memory_order_relaxed);
  file.space.cover(file.fd, start + total);
  std::vector<iovec> iov;
  size_t k = 0;      // the piece being written
  size_t skip = 0;   // of its bytes, written already
  uint64_t at = start;
  while (k < pieces.size()) {
    iov.clear();
    for (size_t j = k; j < pieces.size() && iov.size() < IOV_MAX; ++j) {
      const size_t from = j == k ? skip : 0;
      if (pieces[j].size() > from)
        iov.push_back({const_cast<uint8_t*>(pieces[j].data() + from), pieces[j].size() - from});
    }
    if (iov.empty()) break;
    ssize_t n = counted_pwritev(file.fd, iov.data(), int(iov.size()), off_t(at));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::error("temporary file in " + dir_ + ": write failed: " + std::strerror(errno));
    at += uint64_t(n);
    // Past the bytes written: whole pieces, then part of one.
    size_t left = size_t(n);
    while (k < pieces.size() && left >= pieces[k].size() - skip) {
      left -= pieces[k].size() - skip;
      skip = 0;
      ++k;
    }
    skip += left;
  }
  return (uint64_t(which) << kFileShift) | start;
}

Expected<uint64_t> Spill::append(std::span<const uint8_t> bytes) {
  const std::span<const uint8_t> one[1] = {bytes};
  return append(one);
}

Status Spill::read(uint64_t at, std::span<uint8_t> into) const {
  const uint64_t which = at >> kFileShift;
  if (which >= numFiles_) return Status::error("temporary file in " + dir_ + ": no such place");
  const int fd = files_[which].fd;
  at &= (uint64_t(1) << kFileShift) - 1;
  for (size_t done = 0; done < into.size();) {
    ssize_t n = counted_pread(fd, into.data() + done, into.size() - done, off_t(at + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::error("temporary file in " + dir_ + ": read back failed");
    done += size_t(n);
  }
  return Status();
}

void HeaderShared::markUsed(const uint64_t* bits) const {
  for (size_t w = 0; w < usedWords(); ++w)
    if (bits[w] && (used[w].load(std::memory_order_relaxed) & bits[w]) != bits[w])
      used[w].fetch_or(bits[w], std::memory_order_relaxed);
}

std::shared_ptr<const HeaderShared> internHeader(HeaderShared&& made, std::shared_ptr<const HeaderShared>& last) {
  if (last && *last == made) {
    if (made.used) {
      std::vector<uint64_t> bits(made.usedWords());
      for (size_t w = 0; w < bits.size(); ++w) bits[w] = made.used[w].load(std::memory_order_relaxed);
      last->markUsed(bits.data());
    }
    return last;
  }
  if (!made.used) {
    made.used = std::make_unique<std::atomic<uint64_t>[]>(made.usedWords());
    for (size_t w = 0; w < made.usedWords(); ++w) made.used[w].store(0, std::memory_order_relaxed);
  }
  last = std::make_shared<const HeaderShared>(std::move(made));
  return last;
}

// Of options.threads, as many as `scratch` bytes each fit in options.scratchBudget, 2 at
// least (or options.threads, where fewer); -v says so, naming `what`, where `say`.
static uint32_t threadsWithin(const PipelineOptions& options, uint64_t scratch, const char* what, bool say) {
  const uint32_t threads = std::max(1u, options.threads);
  scratch = std::max<uint64_t>(scratch, 1);
  const uint32_t n = std::max<uint32_t>(std::min(threads, 2u),
                                        uint32_t(std::min<uint64_t>(threads, options.scratchBudget / scratch)));
  if (say && options.verbose && n < threads)
    std::fprintf(stderr, "hpcprof: %s on %u threads (about %.0f MiB of scratch each)\n", what, n,
                 double(scratch) / (1 << 20));
  return n;
}

uint32_t unifyThreads(const PipelineOptions& options, size_t nodes, bool say) {
  return threadsWithin(options, uint64_t(nodes) * kUnifyBytesPerNode, "unify after the first profile", say);
}

Status unifyProfiles(std::span<const std::unique_ptr<ProfileSource>> profiles, const Expander& expander,
                     Spill& spill, const PipelineOptions& options, tbb::task_arena& arena,
                     std::vector<Unified>& out, uint32_t* threadsUsed) {
  out.clear();
  out.resize(profiles.size());
  Progress progress(options.progress, "reading calling contexts", profiles.size());
  // Each thread gathers its profiles' records and spills them a few at a time (a write costs
  // several microseconds on a virtual machine, whatever its size).
  constexpr size_t kGatherBytes = size_t(256) << 10;
  struct Scratch {
    ProfileData data;
    NodeContexts nodes;
    std::vector<uint8_t> record;  // only grown: the records [0, used)
    size_t used = 0;
    std::vector<std::pair<size_t, size_t>> pending;  // (profile, offset of its record)
    std::shared_ptr<const HeaderShared> lastHeader;  // this thread's last profile's
    uint64_t lastHeaderGen = 0;  // the metricsGen of the table it was made from (0: unnamed)
    std::vector<uint64_t> usedBits;  // the metrics the profile in hand has values of
    std::vector<SpilledValue> gpuValues;  // its values on reconstructed GPU call paths
    std::shared_ptr<const HeaderShared> lastFiltered;  // the program of its last profile --only-exe left out
    // Still reading against the seed (its reader buffers and templates, shared, read only):
    // until a profile whose nodes are not the first one's.
    bool borrowing = false;
  };
  tbb::enumerable_thread_specific<Scratch> scratch;
  // The first profile's reader buffers and templates once it is unified (the seed), shared
  // by every thread, read only: a profile with the same nodes is compared with its bytes and
  // takes its contexts, with no copy (a large tree's buffers and templates are tens of MB a
  // thread, and fresh memory is dear). A thread's first profile that differs gets a copy
  // of it to start from (its template: that profile then matches as a thread's later ones
  // do, not by a lookup of every node in the shared tree).
  std::unique_ptr<Scratch> seed;
  // Whether the first profile is read: 0 not yet, 1 read, 2 not (it failed).
  std::atomic<int> firstRead{0};
  // Profiles read ahead while the first one is unified alone, by the threads that would wait
  // meanwhile, and kept where their nodes are the first profile's (they then need of the
  // tree nothing but its contexts, which the first profile makes): their header, values and
  // trace, the nodes not decoded. At most kAheadBytes of them, a large tree's few dozen.
  constexpr size_t kAheadBytes = size_t(32) << 20;
  std::vector<std::unique_ptr<ProfileData>> ahead(profiles.size());
  std::atomic<bool> firstDone{false};
  // Profiles unified while the first one was (see readAhead).
  std::unique_ptr<std::atomic<bool>[]> claimed(new std::atomic<bool>[profiles.size()]());
  // The first failed write to the spill (a full disk, say): the run stops with it, rather
  // than go on with profiles whose values were lost.
  std::mutex failedMu;
  Status failed;
  // Profiles with a kernel whose call paths passed kGpuMaxPaths (said once, at the end), and
  // (for -v) the PC samples in called device functions and the profiles they were in.
  std::atomic<size_t> gpuUnapportioned{0}, gpuCalledSamples{0}, gpuProfiles{0};
  auto spillGathered = [&](Scratch& sc) {
    if (sc.pending.empty()) return;
    Expected<uint64_t> at = spill.append({sc.record.data(), sc.used});
    if (!at.ok()) {
      std::lock_guard lock(failedMu);
      if (failed.ok()) failed = at.status();
    }
    for (const auto& [i, offset] : sc.pending)
      if (at.ok()) out[i].spillAt = *at + offset;
    sc.pending.clear();
    sc.used = 0;
  };
  auto unifyOne = [&](size_t i) {
    Unified& u = out[i];
    struct Tick {
      Progress& p;
      ~Tick() { p.tick(); }
    } tick{progress};
    bool exists = true;
    Scratch& sc = scratch.local(exists);
    if (!exists && seed) sc.borrowing = true;
    // Read ahead, while the first profile was unified: taken where this thread's template is
    // still that profile's tree (else read again: its nodes were not kept).
    const NodeContexts& mineNow = sc.borrowing ? seed->nodes : sc.nodes;
    std::unique_ptr<ProfileData> early = std::move(ahead[i]);
    if (early && !mineNow.holds(early->tree.nodesId, early->tree.loadMap, early->tree.loadMapGen)) early.reset();
    ProfileData& data = early ? *early : sc.data;
    if (!early) sc.data.reference = sc.borrowing ? &seed->data : nullptr;
    if (Status st = early ? Status() : profiles[i]->read(data); !st.ok()) {
      warnProfile("skipping ", profiles[i]->path(), st.message());
      return;
    }
    ProfileTree& tree = data.tree;
    if (i == 0) firstRead.store(1, std::memory_order_release);  // the readers ahead may start
    if (!options.onlyExe.empty()) {
      // By file name, as the reference matches it (a path given names its file).
      auto fileName = [](std::string_view p) { return p.substr(p.rfind('/') + 1); };
      const std::string_view prog = fileName(tree.programName);
      if (std::none_of(options.onlyExe.begin(), options.onlyExe.end(),
                       [&](const std::string& e) { return fileName(e) == prog; })) {
        u.header.state = ProfileState::Filtered;  // on purpose: not counted as skipped
        // Only its program, for the error that names the programs when none is left.
        u.header.shared = internHeader({std::string(prog), {}, {}, {}}, sc.lastFiltered);
        return;
      }
    }
    if (!data.traceStatus.ok())  // it names the trace file
      std::fprintf(stderr, "%s: warning: %s\n", program_invocation_short_name, data.traceStatus.message().c_str());
    // The seed's nodes again: their contexts are the seed's. Else this thread leaves the
    // seed for a copy of it, and this profile is unified against it as usual.
    const NodeContexts* nodes = &sc.nodes;
    if (sc.borrowing && seed->nodes.holds(tree.nodesId, tree.loadMap, tree.loadMapGen)) {
      nodes = &seed->nodes;
    } else {
      if (sc.borrowing) {
        const ProfileTree& st = seed->data.tree;
        if (tree.nodesId == st.nodesId) {  // the same nodes (not decoded) in another binary
          tree.nodes = st.nodes;
          tree.maxId = st.maxId;
          tree.maxIdOf = st.maxIdOf;
        } else {  // decoded: the seed's are the template's
          tree.previousNodes = st.nodes;
          tree.previousNodesId = st.nodesId;
        }
        sc.nodes.seedFrom(seed->nodes);
        sc.borrowing = false;
        sc.data.reference = nullptr;
      }
      // The first profile is unified alone: the threads done reading ahead help analyse
      // the measured binaries' procedures it needs.
      if (i == 0 && options.threads > 1) expander.prepareStructure(tree);
      if (Status st = expander.unify(tree, sc.nodes); !st.ok()) {
        warnProfile("skipping ", profiles[i]->path(), st.message());
        return;
      }
    }
    // Only the values and the trace's table of nodes go on to pass 2, each with its node's
    // context.
    if (data.valuesStatus.ok()) {
      const ProfileValues& v = data.values;
      // GPU PC samples in called device functions: their values over their call paths.
      sc.gpuValues.clear();
      if (!nodes->gpuSamples().empty()) {
        int gins = -1;  // instruction samples weigh a call
        for (size_t m = 0; m < tree.metrics.size() && gins < 0; ++m)
          if (tree.metrics[m] == "GINS") gins = int(m);
        if (expander.reconstructGpu(*nodes, v.values, gins, [&](const Context* c, uint16_t metric, double value) {
              sc.gpuValues.push_back({c, value, metric, 0});
            }))
          gpuUnapportioned.fetch_add(1, std::memory_order_relaxed);
        const size_t called = size_t(std::count_if(nodes->gpuSamples().begin(), nodes->gpuSamples().end(),
                                                   [](const GpuSample& g) { return !g.ctx; }));
        if (called) {
          gpuCalledSamples.fetch_add(called, std::memory_order_relaxed);
          gpuProfiles.fetch_add(1, std::memory_order_relaxed);
        }
      }
      // A long trace's table: every node with a context (its records not read yet).
      const bool allNodes = tree.hasTrace && data.traceAllNodes;
      const size_t traceNodes = !tree.hasTrace ? 0 : allNodes ? nodes->size() : data.traceNodes.size();
      const size_t most =
          (v.values.size() + sc.gpuValues.size()) * sizeof(SpilledValue) + traceNodes * sizeof(SpilledTraceNode);
      if (sc.used + most > std::max(kGatherBytes, most)) spillGathered(sc);
      if (sc.record.size() < sc.used + most) sc.record.resize(std::max(sc.used + most, kGatherBytes));
      uint8_t* rec = sc.record.data() + sc.used;
      auto* sv = reinterpret_cast<SpilledValue*>(rec);
      uint32_t nv = 0;
      // The metrics it has values of, marked on its header below.
      sc.usedBits.assign((tree.metrics.size() + 63) / 64, 0);
      for (const PointValue& p : v.values)
        if (const Context* c = nodes->find(p.node)) {
          sv[nv++] = {c, p.value, p.metric, 0};
          if (p.metric < tree.metrics.size()) sc.usedBits[p.metric / 64] |= uint64_t(1) << (p.metric % 64);
        }
      for (const SpilledValue& g : sc.gpuValues) {
        sv[nv++] = g;
        if (g.metric < tree.metrics.size()) sc.usedBits[g.metric / 64] |= uint64_t(1) << (g.metric % 64);
      }
      auto* tn = reinterpret_cast<SpilledTraceNode*>(rec + nv * sizeof(SpilledValue));
      size_t listed = traceNodes;
      if (allNodes) {
        listed = 0;
        nodes->forEachNode([&](uint32_t id, const Context* c) {
          if (listed < traceNodes) tn[listed++] = {c, id, 0};
        });
      } else {
        for (size_t k = 0; k < traceNodes; ++k) tn[k] = {nodes->find(data.traceNodes[k]), data.traceNodes[k], 0};
      }
      // Spilled with the thread's next few (spillAt is set then).
      sc.pending.emplace_back(i, sc.used);
      sc.used += nv * sizeof(SpilledValue) + listed * sizeof(SpilledTraceNode);
      u.values = nv;
      u.traceContexts = uint32_t(listed);
      u.traceRecords = tree.hasTrace ? data.traceRecords : 0;
    } else {
      u.valuesError = data.valuesStatus.message();
    }
    // A metric table the reader named (metricsGen) and this thread's last header holds, of
    // the same program, is that header's, with nothing compared: the reader keeps the table
    // for the next profile. Any other is interned (compared with the last header).
    if (tree.metricsGen != 0 && tree.metricsGen == sc.lastHeaderGen && sc.lastHeader &&
        sc.lastHeader->program == tree.programName) {
      u.header.shared = sc.lastHeader;
    } else if (tree.metricsGen != 0) {
      u.header.shared = internHeader({std::move(tree.programName), tree.metrics, tree.descs, {}}, sc.lastHeader);
      sc.lastHeaderGen = tree.metricsGen;
    } else {
      u.header.shared = internHeader({std::move(tree.programName), std::move(tree.metrics), std::move(tree.descs), {}},
                                     sc.lastHeader);
      sc.lastHeaderGen = 0;
    }
    if (data.valuesStatus.ok() && sc.usedBits.size() == u.header.shared->usedWords())
      u.header.shared->markUsed(sc.usedBits.data());
    u.header.ids = std::move(tree.idTuple);
    u.header.hasTrace = tree.hasTrace;
    u.header.state = ProfileState::Ok;
  };
  arena.execute([&] {
    // The first profile alone: it makes most of the tree, which threads starting together
    // would each make again, meeting on the same contexts' locks.
    size_t first = 0;
    uint32_t rest = std::max(1u, options.threads);
    if (profiles.size() > 1 && options.threads > 1) {
      // This thread's scratch: the first profile's reader buffers and templates become the
      // seed.
      Scratch& mine = scratch.local();
      tbb::task_group prepare;
      // The other threads read the next profiles meanwhile, each compared with the first
      // one's bytes (read, not changed, while it is unified), until it is done. 100 profiles
      // of 400,000 nodes at -j2: about 30 read while the first one is unified alone (65 ms).
      std::atomic<size_t> nextAhead{1}, heldAhead{0};
      std::atomic<bool> stopAhead{false}, unlike{false};
      auto readAhead = [&](uint32_t t) {
        int state;
        while ((state = firstRead.load(std::memory_order_acquire)) == 0) std::this_thread::yield();
        if (state != 1) return;
        const ProfileData& firstData = mine.data;
        // Only as many threads as unify will take after the first profile (each holds a
        // profile's buffers).
        if (t >= unifyThreads(options, firstData.tree.nodes.size(), false)) return;
        const uint64_t firstId = firstData.tree.nodesId;
        if (firstId == 0) return;
        ProfileData pre;
        pre.reference = &firstData;
        while (!firstDone.load(std::memory_order_acquire) && !stopAhead.load(std::memory_order_relaxed) &&
               heldAhead.load(std::memory_order_relaxed) < kAheadBytes) {
          const size_t k = nextAhead.fetch_add(1, std::memory_order_relaxed);
          if (k >= profiles.size()) break;
          // One that fails is left to be read again (and warned about) in turn, and ends
          // the reading ahead, as one that differs does: the profiles are not all alike.
          const bool ok = profiles[k]->read(pre).ok();
          if (!ok || pre.tree.nodesId != firstId) {
            stopAhead.store(true, std::memory_order_relaxed);
            if (ok) {
              unlike.store(true, std::memory_order_relaxed);
              claimed[k].store(true, std::memory_order_relaxed);
              pre = ProfileData();
              tbb::this_task_arena::isolate([&] { unifyOne(k); });
            }
            break;
          }
          auto d = std::make_unique<ProfileData>();
          d->tree = std::move(pre.tree);
          d->values = std::move(pre.values);
          d->valuesStatus = std::move(pre.valuesStatus);
          d->traceStatus = std::move(pre.traceStatus);
          d->traceNodes = std::move(pre.traceNodes);
          d->traceAllNodes = pre.traceAllNodes;
          d->traceRecords = pre.traceRecords;
          heldAhead.fetch_add(sizeof(ProfileData) + d->values.values.size() * sizeof(PointValue) +
                                  d->traceNodes.size() * sizeof(uint32_t),
                              std::memory_order_relaxed);
          ahead[k] = std::move(d);
          pre.tree = ProfileTree();
          pre.values = ProfileValues();
          pre.traceNodes = {};
        }
        // Profiles unlike the first (other processes, other programs) gain nothing from
        // waiting for it: its template would not serve them. This thread unifies the next
        // ones meanwhile, each claimed (real measurements of g++ at -j2: the second thread
        // otherwise idled while the first profile's contexts were made).
        while (unlike.load(std::memory_order_relaxed) && !firstDone.load(std::memory_order_acquire)) {
          const size_t k = nextAhead.fetch_add(1, std::memory_order_relaxed);
          if (k >= profiles.size()) break;
          if (claimed[k].exchange(true, std::memory_order_relaxed)) continue;
          tbb::this_task_arena::isolate([&] { unifyOne(k); });
        }
      };
      for (uint32_t t = 1; t < options.threads && t < profiles.size(); ++t) prepare.run([&readAhead, t] { readAhead(t); });
      tbb::this_task_arena::isolate([&] { unifyOne(first++); });
      firstDone.store(true, std::memory_order_release);
      int none = 0;
      firstRead.compare_exchange_strong(none, 2, std::memory_order_acq_rel);
      prepare.wait();
      rest = unifyThreads(options, mine.data.tree.nodes.size());
      // A seed only where the first profile was unified (read, kept, its template made).
      if (mine.nodes.holds(mine.data.tree.nodesId, mine.data.tree.loadMap, mine.data.tree.loadMapGen)) {
        seed = std::make_unique<Scratch>();
        seed->data = std::move(mine.data);
        seed->nodes = std::move(mine.nodes);
        mine.data = ProfileData();
        mine.nodes = NodeContexts();
        mine.borrowing = true;
      }
    }
    auto others = [&] {
      tbb::parallel_for(first, profiles.size(), [&](size_t i) {
        if (claimed[i].load(std::memory_order_relaxed)) return;  // unified while the first one was
        // The thread's scratch is held across the whole profile: isolated, so that a wait
        // inside (a measured binary analysed on first use) never runs another profile here.
        tbb::this_task_arena::isolate([&] { unifyOne(i); });
      });
    };
    if (threadsUsed) *threadsUsed = rest;
    if (rest < std::max(1u, options.threads)) {
      // An arena of fewer threads for the rest (its threads' spill files are the first
      // `rest`, appended to by one thread at a time as before).
      tbb::task_arena narrow(static_cast<int>(rest));
      narrow.execute(others);
    } else {
      others();
    }
  });
  for (Scratch& sc : scratch) spillGathered(sc);
  if (options.verbose && gpuCalledSamples.load())
    std::fprintf(stderr,
                 "%s: GPU calling contexts: %zu PC samples in called device functions, in %zu profiles, "
                 "apportioned over their call paths\n",
                 program_invocation_short_name, gpuCalledSamples.load(), gpuProfiles.load());
  if (const size_t n = gpuUnapportioned.load(std::memory_order_relaxed))
    std::fprintf(stderr,
                 "%s: warning: in %zu profile%s a kernel's device functions are reached by more than %zu call paths: "
                 "their samples stay below the kernel, not apportioned among the paths\n",
                 program_invocation_short_name, n, n == 1 ? "" : "s", kGpuMaxPaths);
  return failed;
}

// The database's metrics for metrics/default.yaml as the measurements describe them, in
// order of first appearance: each measured metric (name-only when its profile gave no
// descriptors) and each derived one whose formula names measured metrics only, its #N / $N
// rewritten from the profile's metric ids to indices in plan.metricNames.
static std::vector<MetricDescIn> metricDescs(std::span<const ProfileHeader* const> headers, const Plan& plan) {
  std::unordered_map<std::string, uint32_t> global;
  for (uint32_t i = 0; i < plan.metricNames.size(); ++i) global.emplace(plan.metricNames[i], i);
  std::vector<MetricDescIn> out;
  std::unordered_map<std::string, size_t> seen;
  std::unordered_set<const HeaderShared*> done;  // a table taken again adds nothing
  for (size_t i : plan.live) {
    const HeaderShared& h = *headers[i]->shared;
    if (!done.insert(&h).second) continue;
    if (h.descs.empty())
      for (const std::string& m : h.metrics)
        if (seen.emplace(m, out.size()).second) out.push_back({m, m, "", "", 1, 1});
    for (const MetricDescIn& d : h.descs) {
      MetricDescIn desc = d;
      if (!d.formula.empty()) {
        if (global.count(d.name)) continue;  // measured somewhere: not derived
        std::string f;
        bool good = true;
        for (size_t k = 0; k < d.formula.size();) {
          char c = d.formula[k];
          size_t end = k + 1;
          while (end < d.formula.size() && std::isdigit(static_cast<unsigned char>(d.formula[end]))) ++end;
          if ((c == '#' || c == '$') && end > k + 1) {
            uint64_t local = 0;
            for (size_t j = k + 1; j < end && local <= h.descs.size(); ++j) local = local * 10 + uint64_t(d.formula[j] - '0');
            auto g = local < h.descs.size() ? global.find(h.descs[local].name) : global.end();
            good = good && g != global.end();
            if (g != global.end()) f += c + std::to_string(g->second);
            k = end;
          } else {
            f += c;
            ++k;
          }
        }
        if (!good) continue;
        desc.formula = std::move(f);
      }
      auto [it, added] = seen.emplace(d.name, out.size());
      if (added) out.push_back(std::move(desc));
      else if (out[it->second].description == d.name && out[it->second].format.empty() && d.formula.empty())
        out[it->second] = std::move(desc);  // a name-only entry gets its descriptor
    }
  }
  return out;
}

Expected<Plan> makePlan(std::span<const ProfileHeader* const> headers, const PipelineOptions& options) {
  Plan plan;
  plan.metricMaps.resize(1);  // 0: none (profiles not used)
  plan.mapOf.assign(headers.size(), 0);
  std::unordered_map<std::string, uint32_t> metricIndex;
  std::unordered_map<const HeaderShared*, uint32_t> mapOfTable;
  std::vector<std::vector<IdIn>> rawIds;
  size_t filtered = 0;
  for (size_t i = 0; i < headers.size(); ++i) {
    const ProfileHeader& h = *headers[i];
    if (h.state == ProfileState::Unreadable) ++plan.skipped;
    if (h.state == ProfileState::Filtered) ++filtered;
    if (h.state != ProfileState::Ok) continue;
    plan.live.push_back(i);
    // Metrics in order of first appearance, profiles taken in order (a table met before
    // names no new ones).
    auto [at, added] = mapOfTable.emplace(h.shared.get(), uint32_t(plan.metricMaps.size()));
    if (added) {
      std::vector<uint32_t>& map = plan.metricMaps.emplace_back();
      for (const std::string& m : h.shared->metrics) {
        auto [it, isNew] = metricIndex.emplace(m, uint32_t(plan.metricNames.size()));
        if (isNew) plan.metricNames.push_back(m);
        map.push_back(it->second);
      }
    }
    plan.mapOf[i] = at->second;
    rawIds.push_back(h.ids);
    plan.anyTrace |= h.hasTrace;
  }
  if (plan.live.empty()) {
    std::string why = std::to_string(headers.size()) + (headers.size() == 1 ? " profile" : " profiles");
    if (plan.skipped) why += ", " + std::to_string(plan.skipped) + " unreadable";
    if (filtered) {
      std::set<std::string> programs;
      for (const ProfileHeader* h : headers)
        if (h->state == ProfileState::Filtered && h->shared) programs.insert(h->shared->program);
      std::string names;
      for (const std::string& p : programs) names += (names.empty() ? ": " : ", ") + p;
      why += ", " + std::to_string(filtered) + " of programs --only-exe does not name" + names;
    }
    return Status::error("no usable profiles among the measurements given (" + why + ")");
  }
  // The metrics with values somewhere, each table's marks taken through its map.
  std::vector<uint8_t> measured(plan.metricNames.size(), 0);
  for (const auto& [shared, map] : mapOfTable)
    for (uint32_t l = 0; l < plan.metricMaps[map].size(); ++l)
      if (shared->isUsed(l)) measured[plan.metricMaps[map][l]] = 1;
  std::vector<uint32_t> propagatedOf(plan.metricNames.size(), Plan::kNotPropagated);
  for (uint32_t g = 0; g < measured.size(); ++g)
    if (measured[g]) propagatedOf[g] = plan.propagated++;
  if (plan.propagated == 0 || plan.propagated == plan.metricNames.size()) {
    // Every metric (or none: nothing to propagate, the same either way) at its own place.
    plan.propagated = uint32_t(plan.metricNames.size());
    for (uint32_t g = 0; g < propagatedOf.size(); ++g) propagatedOf[g] = g;
  } else {
    plan.propIds.resize(size_t(plan.propagated) * kNumScopes);
    for (uint32_t g = 0; g < propagatedOf.size(); ++g)
      if (propagatedOf[g] != Plan::kNotPropagated)
        for (uint32_t sc = 0; sc < kNumScopes; ++sc)
          plan.propIds[size_t(propagatedOf[g]) * kNumScopes + sc] = propId(g, Scope(sc));
  }
  plan.propagatedMaps.resize(plan.metricMaps.size());
  for (size_t m = 0; m < plan.metricMaps.size(); ++m)
    for (uint32_t g : plan.metricMaps[m]) plan.propagatedMaps[m].push_back(propagatedOf[g]);
  plan.metricDescs = metricDescs(headers, plan);
  plan.idTuples = resolveIdTuples(rawIds);
  plan.title = options.title.empty() ? headers[plan.live[0]]->shared->program : options.title;
  return plan;
}

Status computeProfile(ProfileSource& source, const Spill& spill, const Unified& u, const ContextIds& ids,
                      const std::vector<uint32_t>& localToPropagated, const std::vector<uint16_t>& propIds,
                      Propagator& propagator, PropagatedProfile& out, TraceLines* lines, uint32_t index) {
  // The row is cleared or overwritten whole, the trace resized to this profile's (its
  // storage kept from profile to profile: only a longer trace than the last fills anything).
  out.hasTrace = u.header.hasTrace;
  out.traceWritten = false;
  if (!out.hasTrace) out.trace.clear();
  thread_local std::vector<uint8_t> rec;
  rec.resize(u.values * sizeof(SpilledValue) + u.traceContexts * sizeof(SpilledTraceNode));
  Status read = u.valuesError.empty() ? spill.read(u.spillAt, rec) : Status::error(u.valuesError);
  if (!read.ok()) {
    warnProfile("values unreadable, profile left empty: ", source.path(), read.message());
    out.row.clear();
    out.hasTrace = false;
    out.trace.clear();
    return Status();
  }
  thread_local std::vector<ContextValue> points;
  points.clear();
  points.reserve(u.values);
  // Each context's id from the tree's table by where it lies (the contexts themselves lie
  // anywhere in memory, mostly outside the caches by now).
  const auto* sv = reinterpret_cast<const SpilledValue*>(rec.data());
  for (uint32_t k = 0; k < u.values; ++k)
    if (sv[k].metric < localToPropagated.size() && localToPropagated[sv[k].metric] != Plan::kNotPropagated)
      points.push_back({ids.id(sv[k].ctx), localToPropagated[sv[k].metric], sv[k].value});
  propagator.run(points, out.row);
  // Ids in the propagated metrics -> the database's (in the same order: rows stay sorted).
  if (!propIds.empty())
    for (uint16_t& m : out.row.metric) m = propIds[m];
  if (u.header.hasTrace) {
    const TraceConverter conv(reinterpret_cast<const SpilledTraceNode*>(rec.data() + u.values * sizeof(SpilledValue)),
                              u.traceContexts, ids);
    if (lines) {
      out.traceWritten = true;
      return streamTrace(source, conv, u.traceRecords, *lines, index, out.trace);
    }
    if (Status st = readWholeTrace(source, conv, UINT64_MAX, out.trace); !st.ok()) {
      warnProfile("trace unreadable now, profile kept without it: ", source.path(), st.message());
      out.hasTrace = false;
      out.trace.clear();
    }
  }
  return Status();
}

uint32_t propagateThreads(const PipelineOptions& options, uint32_t contexts, uint32_t propagated) {
  return threadsWithin(options, Propagator::scratchBytes(contexts, propagated), "pass 2", true);
}

Status writeProfile(DatabaseSink& sink, uint32_t index, const std::vector<IdOut>& idTuple,
                    const PropagatedProfile& p) {
  HPC_RETURN_IF_ERROR(sink.writeProfile(index, idTuple, p.row));
  if (p.hasTrace && !p.traceWritten) return sink.writeTrace(index, p.trace);
  return Status();
}

Status propagateProfile(ProfileSource& source, const Spill& spill, const Unified& u, const ContextIds& ids,
                        const std::vector<uint32_t>& localToPropagated, const std::vector<uint16_t>& propIds,
                        uint32_t index, const std::vector<IdOut>& idTuple, Propagator& propagator,
                        DatabaseSink& sink) {
  thread_local PropagatedProfile p;
  HPC_RETURN_IF_ERROR(
      computeProfile(source, spill, u, ids, localToPropagated, propIds, propagator, p, sink.streamedTraces(), index));
  return writeProfile(sink, index, idTuple, p);
}

// Both sums go over the contexts in ranges on the calling arena's threads (100 profiles of
// 400,000 contexts at -j2: 7-12 ms on one thread, the other one waiting).
constexpr uint32_t kSumRange = 32768;

std::vector<uint64_t> sumCounts(tbb::enumerable_thread_specific<Propagator>& propagators, uint32_t contexts) {
  std::vector<uint64_t> counts(contexts, 0);
  tbb::parallel_for(tbb::blocked_range<uint32_t>(0, contexts, kSumRange), [&](const tbb::blocked_range<uint32_t>& r) {
    for (const Propagator& p : propagators)
      for (uint32_t c = r.begin(); c < r.end(); ++c) counts[c] += p.count(c);
  });
  return counts;
}

std::vector<uint32_t> sumMetricCounts(tbb::enumerable_thread_specific<Propagator>& propagators) {
  std::vector<const std::vector<uint32_t>*> each;
  for (const Propagator& p : propagators) {
    if (p.metricCounts().empty()) return {};
    each.push_back(&p.metricCounts());
  }
  if (each.empty()) return {};
  const size_t n = each[0]->size();
  std::vector<uint32_t> counts(n);
  tbb::parallel_for(tbb::blocked_range<size_t>(0, n, size_t(kSumRange) * 4), [&](const tbb::blocked_range<size_t>& r) {
    std::copy(each[0]->begin() + r.begin(), each[0]->begin() + r.end(), counts.begin() + r.begin());
    for (size_t k = 1; k < each.size(); ++k)
      for (size_t i = r.begin(); i < r.end(); ++i) counts[i] += (*each[k])[i];
  });
  return counts;
}

Expected<PipelineResult> runPipeline(std::vector<std::unique_ptr<ProfileSource>>& profiles,
                                     const StructureSource* structure, DatabaseSink& sink,
                                     const PipelineOptions& options) {
  PhaseTimer timer(options.verbose);
  tbb::task_arena arena(int(std::max(1u, options.threads)));
  auto analysis = std::make_shared<Analysis>();
  Cct& cct = analysis->cct;
  Names& names = analysis->names;
  HPC_ASSIGN_OR_RETURN(std::unique_ptr<Spill> spill, Spill::create(options.scratchDir, std::max(1u, options.threads)));
  std::vector<Unified> unified;
  uint32_t unifyThreadsUsed = 0;
  {
    // The expander's instruction cache (as large as the tree) goes once pass 1 is done: its
    // memory serves the later passes rather than their taking fresh pages.
    Expander expander(cct, names, structure);
    HPC_RETURN_IF_ERROR(unifyProfiles(profiles, expander, *spill, options, arena, unified, &unifyThreadsUsed));
  }
  const double unifySeconds = timer.lap("unify calling contexts");

  std::vector<const ProfileHeader*> headers;
  for (const Unified& u : unified) headers.push_back(&u.header);
  HPC_ASSIGN_OR_RETURN(Plan plan, makePlan(headers, options));
  PipelineResult result;
  result.unifyThreads = unifyThreadsUsed;
  result.unifySeconds = unifySeconds;
  result.skipped = plan.skipped;
  result.profiles = uint32_t(plan.live.size());
  arena.execute([&] { cct.finalize(); });  // on the arena's threads
  cct.releaseLookup();  // done growing: its table's memory serves pass 2
  names.finalize();
  result.contexts = cct.size();
  analysis->metrics = std::make_unique<MetricTable>(plan.metricNames, options.stats);
  const MetricTable& metrics = *analysis->metrics;
  const PropagationShape shape = arena.execute([&] { return PropagationShape(cct); });
  result.finalizeSeconds = timer.lap("finalize tree and metrics");

  const uint32_t numProfiles = uint32_t(plan.live.size() + 1);
  HPC_RETURN_IF_ERROR(sink.begin(numProfiles, cct.size(), plan.anyTrace));
  // Traces written from the propagating threads as they are read, each into its place.
  TraceLines* lines = plan.anyTrace ? sink.streamedTraces() : nullptr;
  if (lines) {
    std::vector<uint64_t> records(plan.live.size());
    for (size_t k = 0; k < plan.live.size(); ++k) records[k] = unified[plan.live[k]].traceRecords;
    HPC_RETURN_IF_ERROR(lines->place(records));
  }
  // Pass 2's threads: as many as their propagators' scratch allows (PipelineOptions::
  // scratchBudget), in an arena of their own where that is fewer than the run's.
  const uint32_t passTwo = propagateThreads(options, shape.size(), plan.propagated);
  std::optional<tbb::task_arena> narrow;
  if (passTwo < std::max(1u, options.threads)) narrow.emplace(int(passTwo));
  tbb::task_arena& passTwoArena = narrow ? *narrow : arena;
  result.propagateThreads = passTwo;
  // The rows by context range for the transpose, each thread's apart (a lane), in buffers of
  // a round's size per lane; with few profiles none (PipelineOptions::rowBucketsAbove): the
  // transpose reads the rows back from profile.db.
  const uint32_t lanes = passTwo;
  std::unique_ptr<RowBuckets> buckets;
  if (plan.live.size() > options.rowBucketsAbove) {
    HPC_ASSIGN_OR_RETURN(buckets, RowBuckets::create(cct.size(), std::min<uint64_t>(options.transposeBudget,
                                                                                    kTransposeRoundBytes * lanes),
                                                     options.scratchDir, lanes));
  }
  tbb::enumerable_thread_specific<Propagator> propagators(std::cref(shape), plan.propagated);
  const ContextIds ids = cct.ids();
  std::vector<Status> errors(plan.live.size());
  Progress progress(options.progress, "writing profiles", plan.live.size());
  // Profiles are propagated in parallel and written in profile order, so that profile.db
  // and trace.db are laid out the same at any -j; a few profiles are in flight at a time.
  struct InFlight {
    size_t k = 0;
    Status status;
    PropagatedProfile p;
  };
  // Ten more than three a thread: a thread that finished a profile while the serial stage
  // below ran several others' in turn found every token taken and spun in the scheduler (at
  // -j2, 8 % of pass 2's samples; with ten more, 1 %: bench/hpcprof_ab.py, 20 runs, 2000
  // profiles median 0.383 -> 0.374 s, 500 0.111 -> 0.109 s, peak +2 MiB).
  const size_t tokens = 3 * size_t(passTwo) + 10;
  size_t next = 0;
  std::mutex spareMu;
  std::vector<std::unique_ptr<InFlight>> spare;
  passTwoArena.execute([&] {
    tbb::parallel_pipeline(
        tokens,
        tbb::make_filter<void, InFlight*>(tbb::filter_mode::serial_in_order,
                                          [&](tbb::flow_control& fc) -> InFlight* {
                                            if (next == plan.live.size()) {
                                              fc.stop();
                                              return nullptr;
                                            }
                                            InFlight* f = nullptr;
                                            {
                                              std::lock_guard lock(spareMu);
                                              if (!spare.empty()) {
                                                f = spare.back().release();
                                                spare.pop_back();
                                              }
                                            }
                                            if (!f) f = new InFlight;
                                            f->k = next++;
                                            return f;
                                          }) &
            tbb::make_filter<InFlight*, InFlight*>(tbb::filter_mode::parallel,
                                                   [&](InFlight* f) {
                                                     size_t i = plan.live[f->k];
                                                     f->status = computeProfile(
                                                         *profiles[i], *spill, unified[i], ids, plan.localToPropagated(i),
                                                         plan.propIds, propagators.local(), f->p, lines,
                                                         uint32_t(f->k + 1));
                                                     // Split while the row is in this core's cache.
                                                     const int lane = tbb::this_task_arena::current_thread_index();
                                                     if (!buckets || !f->status.ok()) return f;
                                                     if (lane >= 0 && uint32_t(lane) < lanes)
                                                       f->status = buckets->add(uint32_t(lane), uint32_t(f->k + 1), f->p.row);
                                                     else
                                                       f->status = Status::error("propagation: a thread outside the arena");
                                                     return f;
                                                   }) &
            // profile.db and trace.db in profile order.
            tbb::make_filter<InFlight*, void>(tbb::filter_mode::serial_in_order, [&](InFlight* f) {
              std::unique_ptr<InFlight> owned(f);
              errors[f->k] = f->status.ok() ? writeProfile(sink, uint32_t(f->k + 1), plan.idTuples[f->k], f->p)
                                            : f->status;
              progress.tick();
              std::lock_guard lock(spareMu);
              spare.push_back(std::move(owned));  // its rows' storage serves another profile
            }));
  });
  for (const Status& e : errors) HPC_RETURN_IF_ERROR(e);
  // The spill is read whole: its pages leave the page cache before cct.db is written, for its
  // writes to take, rather than at the end (fresh pages are dear on a virtual machine). With
  // threads that happens beside the transpose's first rounds (below: closing the file took 3 ms
  // at 500 profiles, which the other thread spent waiting); else now. Each lane's last chunks
  // (a file each) go at once.
  const bool besideTranspose = options.threads > 1;
  if (!besideTranspose) spill.reset();
  std::vector<Status> flushed(lanes);
  if (buckets)
    passTwoArena.execute([&] {
      tbb::parallel_for(0u, lanes, [&](uint32_t lane) { flushed[lane] = buckets->finish(lane); });
    });
  for (const Status& e : flushed) HPC_RETURN_IF_ERROR(e);
  result.propagateSeconds = timer.lap("propagate, write profiles");

  // Class 3 and cct.db: the transpose.
  std::vector<uint64_t> counts;
  std::vector<uint32_t> metricCounts;
  arena.execute([&] {
    counts = sumCounts(propagators, cct.size());
    metricCounts = sumMetricCounts(propagators);
  });
  // Their scratch (tens of MiB a thread on a large tree) serves the transpose and meta.db.
  propagators.clear();
  TransposeOptions topt;
  topt.budgetBytes = options.transposeBudget;
  topt.threads = options.threads;
  topt.shape = &shape;
  topt.verbose = options.verbose;
  topt.buckets = buckets.get();
  const size_t countWidth = plan.propIds.empty() ? metrics.numProp() : plan.propIds.size();
  if (metricCounts.size() == size_t(cct.size()) * countWidth) {
    topt.metricCounts = &metricCounts;
    if (!plan.propIds.empty()) topt.propIds = &plan.propIds;
  }
  std::unique_ptr<uint8_t[]> workspace = buckets ? buckets->releaseMemory(topt.workspaceBytes) : nullptr;
  topt.workspace = workspace.get();
  MetaInput meta{plan.title, &cct, &names, &metrics, plan.skipped, &options.replacePaths, &plan.metricDescs};
  // With threads, meta.db (from the finalized tree alone) is written beside the transpose, in
  // the moments its threads wait for each other's rounds, rather than after it on one core
  // (bench/hpcprof_ab.py, 24 and 6 interleaved runs at -j2: 500 profiles median 0.141 ->
  // 0.134 s, 100 profiles of 400,000 nodes 0.602 -> 0.502 s).
  Status metaEarly;
  const bool metaBeside = besideTranspose;
  if (metaBeside)
    topt.alongside = [&] {
      spill.reset();
      metaEarly = sink.writeMetaEarly(meta);
    };
  SparseRow summary;
  HPC_RETURN_IF_ERROR(transposeRange(sink, metrics, numProfiles, counts, 0, cct.size(), topt, summary));
  HPC_RETURN_IF_ERROR(metaEarly);
  // Every round has read its values: the row buckets' temporary files are closed (their pages
  // given back, 3-4 ms for the benchmark's 54 MB, 6-7 ms a lane at 2000 profiles) a lane a
  // task, on the arena's other threads where there are, while the summary and the files' ends
  // are written; then this thread takes what is left of them (2000 profiles, -j2: "finish the
  // files" 10-13 ms with both lanes' closes in one task).
  Status finished;
  arena.execute([&] {
    tbb::task_group closing;
    if (buckets)
      for (uint32_t lane = 0; lane < buckets->lanes(); ++lane) closing.run([&, lane] { buckets->close(lane); });
    finished = writeSummary(sink, metrics, topt, summary);
    result.transposeSeconds =
        timer.lap(metaBeside ? "transpose, summary statistics, meta.db" : "transpose, summary statistics");
    if (finished.ok()) finished = sink.finish(meta);
    closing.wait();
  });
  buckets.reset();
  HPC_RETURN_IF_ERROR(finished);
  result.finishSeconds = timer.lap(metaBeside ? "finish the files" : "write meta.db");
  result.analysis = std::move(analysis);
  return result;
}

}  // namespace hpc::analysis
