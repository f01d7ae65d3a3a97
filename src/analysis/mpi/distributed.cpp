#include "analysis/mpi/distributed.hpp"

#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "analysis/mpi/rank_sink.hpp"
#include "analysis/mpi/tree_codec.hpp"
#include "analysis/mpi/wire.hpp"
#include "analysis/stages.hpp"
#include "analysis/transpose.hpp"

namespace hpc::analysis::mpi {

namespace {

class Lap {
public:
  double next() {
    auto now = std::chrono::steady_clock::now();
    double s = std::chrono::duration<double>(now - t0_).count();
    t0_ = now;
    return s;
  }

private:
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

// A header's shared part goes once for a run of headers that share it: 0 none, 1 the last one
// sent again, 2 a new one (`last`: the last one sent, by this writer).
void putHeader(ByteWriter& w, const ProfileHeader& h, const HeaderShared*& last) {
  w.le<uint8_t>(uint8_t(h.state));
  const HeaderShared* s = h.shared.get();
  w.le<uint8_t>(!s ? 0 : s == last ? 1 : 2);
  if (s && s != last) {
    putStr(w, s->program);
    w.le<uint32_t>(uint32_t(s->metrics.size()));
    for (const std::string& m : s->metrics) putStr(w, m);
    w.le<uint32_t>(uint32_t(s->descs.size()));
    for (const MetricDescIn& d : s->descs) {
      putStr(w, d.name);
      putStr(w, d.description);
      putStr(w, d.format);
      putStr(w, d.formula);
      w.le<uint8_t>(d.show);
      w.le<uint8_t>(d.showPercent);
    }
    for (size_t k = 0; k < s->usedWords(); ++k) w.le<uint64_t>(s->used ? s->used[k].load() : 0);
    last = s;
  }
  w.le<uint32_t>(uint32_t(h.ids.size()));
  for (const IdIn& i : h.ids) {
    w.le<uint16_t>(i.kind);
    w.le<uint8_t>(i.interpret);
    w.le<uint64_t>(i.physical);
    w.le<uint64_t>(i.logical);
  }
  w.le<uint8_t>(h.hasTrace);
}

// `last`: the last shared part read (headers from all ranks, read in order).
ProfileHeader getHeader(WireReader& r, std::shared_ptr<const HeaderShared>& last) {
  ProfileHeader h;
  h.state = ProfileState(r.get<uint8_t>());
  const uint8_t shared = r.get<uint8_t>();
  if (shared == 1) {
    h.shared = last;
    if (!last) r.fail();
  } else if (shared == 2) {
    HeaderShared s;
    s.program = r.str();
    for (uint32_t n = r.get<uint32_t>(); n-- && !r.failed();) s.metrics.push_back(r.str());
    for (uint32_t n = r.get<uint32_t>(); n-- && !r.failed();) {
      MetricDescIn d;
      d.name = r.str();
      d.description = r.str();
      d.format = r.str();
      d.formula = r.str();
      d.show = r.get<uint8_t>();
      d.showPercent = r.get<uint8_t>();
      s.descs.push_back(std::move(d));
    }
    if (!r.failed()) {
      s.used = std::make_unique<std::atomic<uint64_t>[]>(s.usedWords());
      for (size_t k = 0; k < s.usedWords(); ++k) s.used[k].store(r.get<uint64_t>(), std::memory_order_relaxed);
    }
    h.shared = internHeader(std::move(s), last);
  } else if (shared != 0) {
    r.fail();
  }
  if (h.state == ProfileState::Ok && !h.shared) r.fail();
  for (uint32_t n = r.get<uint32_t>(); n-- && !r.failed();) {
    IdIn i;
    i.kind = r.get<uint16_t>();
    i.interpret = r.get<uint8_t>();
    i.physical = r.get<uint64_t>();
    i.logical = r.get<uint64_t>();
    h.ids.push_back(i);
  }
  h.hasTrace = r.get<uint8_t>() != 0;
  return h;
}

void putRow(ByteWriter& w, const SparseRow& row) {
  w.le<uint64_t>(row.ctx.size());
  for (size_t j = 0; j < row.ctx.size(); ++j) {
    w.le<uint32_t>(row.ctx[j]);
    w.le<uint32_t>(uint32_t(row.start[j + 1] - row.start[j]));
    for (uint64_t k = row.start[j]; k < row.start[j + 1]; ++k) {
      w.le<uint16_t>(row.metric[k]);
      w.le<double>(row.value[k]);
    }
  }
}

// Appends a row of contexts above those already in `row`.
void getRow(WireReader& r, SparseRow& row) {
  for (uint64_t n = r.get<uint64_t>(); n-- && !r.failed();) {
    row.ctx.push_back(r.get<uint32_t>());
    for (uint32_t m = r.get<uint32_t>(); m-- && !r.failed();) {
      row.metric.push_back(r.get<uint16_t>());
      row.value.push_back(r.get<double>());
    }
    row.start.push_back(row.value.size());
  }
}

// Class 1 across ranks: a reduction tree of the rank-level trees to rank 0 whose arity is the
// number of threads per rank (at least 2). At level `step` a rank r that is a multiple of
// step * arity receives the trees of r + k * step (k = 1 .. arity - 1) and merges them with
// one thread each (Cct and Names are thread-safe); every other rank sends its tree to
// r - r % (step * arity) and is done. Rank 0 then broadcasts the unified tree, which completes
// every rank's own (the numbering: ids depend only on content, not on merge order).
Status reduceTree(Comm& comm, Cct& cct, Names& names, int arity, tbb::task_arena& arena) {
  const long r = comm.rank(), n = comm.size();
  arity = std::max(2, arity);
  Status st;
  for (long step = 1; step < n; step *= arity) {
    const long group = step * arity;
    if (r % group != 0) {
      comm.send(int(r - r % group), encodeTree(cct));
      break;
    }
    std::vector<std::vector<uint8_t>> trees;
    for (long k = 1; k < arity && r + k * step < n; ++k) trees.push_back(comm.recv(int(r + k * step)));
    if (!st.ok()) continue;  // keep the protocol going; the error is agreed on afterwards
    std::vector<Status> errors(trees.size());
    arena.execute([&] {
      tbb::parallel_for(size_t(0), trees.size(), [&](size_t i) { errors[i] = mergeTree(trees[i], cct, names); });
    });
    for (const Status& e : errors)
      if (st.ok() && !e.ok()) st = e;
  }
  std::vector<uint8_t> unified;
  if (r == 0) unified = encodeTree(cct);
  comm.bcast(unified, 0);
  if (r != 0 && st.ok()) st = mergeTree(unified, cct, names);
  return st;
}

}  // namespace

std::vector<size_t> partitionByWeight(std::span<const uint64_t> weights, int parts) {
  parts = std::max(1, parts);
  long double total = 0;
  for (uint64_t w : weights) total += w;
  std::vector<size_t> bounds(size_t(parts) + 1, weights.size());
  bounds[0] = 0;
  size_t i = 0;
  long double prefix = 0;
  for (int p = 1; p < parts; ++p) {
    const long double target = total * p / parts;
    // Advance while taking the next item brings the prefix closer to the target.
    while (i < weights.size() && prefix + weights[i] / 2.0L <= target) prefix += weights[i++];
    bounds[size_t(p)] = std::max(i, bounds[size_t(p) - 1]);
  }
  return bounds;
}

namespace {

// Every profile's row restricted to the contexts [lo, hi), read back from the sink once, in
// row buckets for the transpose: each thread takes a contiguous run of profiles in increasing
// order (one run per lane).
Expected<std::unique_ptr<RowBuckets>> bucketRange(DatabaseSink& sink, uint32_t numProfiles, uint32_t lo,
                                                  uint32_t hi, const PipelineOptions& opt, tbb::task_arena& arena) {
  const uint32_t lanes = std::max(1u, opt.threads);
  HPC_ASSIGN_OR_RETURN(std::unique_ptr<RowBuckets> buckets,
                       RowBuckets::create(hi, std::min<uint64_t>(opt.transposeBudget, kTransposeRoundBytes * lanes),
                                          opt.scratchDir, lanes, lo));
  const uint32_t rows = numProfiles - 1;  // profile indices 1..rows
  std::vector<Status> errors(lanes);
  arena.execute([&] {
    tbb::parallel_for(uint32_t(0), lanes, [&](uint32_t lane) {
      const uint32_t from = 1 + uint32_t(uint64_t(rows) * lane / lanes);
      const uint32_t to = 1 + uint32_t(uint64_t(rows) * (lane + 1) / lanes);
      SparseRow row;
      for (uint32_t p = from; p < to && errors[lane].ok(); ++p) {
        errors[lane] = sink.readProfile(p, lo, hi, row);
        if (errors[lane].ok()) errors[lane] = buckets->add(lane, p, row);
      }
    });
  });
  for (const Status& e : errors) HPC_RETURN_IF_ERROR(e);
  HPC_RETURN_IF_ERROR(buckets->finish());
  return buckets;
}

}  // namespace

Expected<DistributedResult> runDistributed(Comm& comm, Job& job, const std::filesystem::path& dir,
                                           RankReport& report) {
  const PipelineOptions& opt = job.options;
  const int rank = comm.rank();
  tbb::task_arena arena(int(std::max(1u, opt.threads)));
  Lap lap;

  // Pass 1 on this rank's share: contiguous profiles of about equal size.
  const std::vector<size_t> share = partitionByWeight(job.profileBytes, comm.size());
  const size_t first = share[size_t(rank)], last = share[size_t(rank) + 1];
  for (size_t i = first; i < last; ++i) report.inputBytes += job.profileBytes[i];
  Cct cct;
  Names names;
  HPC_ASSIGN_OR_RETURN(std::unique_ptr<Spill> spill, Spill::create(opt.scratchDir));
  std::vector<Unified> unified;
  Status unifiedAll;
  {
    Expander expander(cct, names, job.structure.get());  // its cache freed after pass 1
    unifiedAll = unifyProfiles(std::span(job.profiles).subspan(first, last - first), expander, *spill, opt, arena,
                               unified);
  }
  HPC_RETURN_IF_ERROR(comm.agree(unifiedAll));
  report.unify = lap.next();

  // Every rank derives the same plan from every profile's header.
  ByteWriter mine;
  const HeaderShared* lastSent = nullptr;
  for (const Unified& u : unified) putHeader(mine, u.header, lastSent);
  std::vector<uint8_t> all = comm.allgather(mine.buffer());
  std::vector<ProfileHeader> headers;
  WireReader hr(all);
  std::shared_ptr<const HeaderShared> lastRead;
  while (!hr.done() && !hr.failed()) headers.push_back(getHeader(hr, lastRead));
  if (hr.failed() || headers.size() != job.profiles.size())
    return Status::error("profile headers: received " + std::to_string(headers.size()) + " of " +
                         std::to_string(job.profiles.size()));
  std::vector<const ProfileHeader*> hp;
  for (const ProfileHeader& h : headers) hp.push_back(&h);
  HPC_ASSIGN_OR_RETURN(Plan plan, makePlan(hp, opt));
  report.unify += lap.next();

  const uint64_t before = comm.stats().bytesSent + comm.stats().bytesReceived;
  HPC_RETURN_IF_ERROR(comm.agree(reduceTree(comm, cct, names, arena.max_concurrency(), arena)));
  arena.execute([&] { cct.finalize(); });
  cct.releaseLookup();  // done growing: its table's memory serves pass 2
  names.finalize();
  if (comm.allreduceMin(cct.size()) != comm.allreduceMax(cct.size()))
    return Status::error("internal: ranks disagree on the number of contexts after the reduction");
  report.reduceBytes = comm.stats().bytesSent + comm.stats().bytesReceived - before;
  report.reduce = lap.next();

  // Pass 2 on this rank's live profiles, which hold consecutive indices.
  MetricTable metrics(plan.metricNames, opt.stats);
  PropagationShape shape(cct);
  const size_t klo = size_t(std::lower_bound(plan.live.begin(), plan.live.end(), first) - plan.live.begin());
  const size_t khi = size_t(std::lower_bound(plan.live.begin(), plan.live.end(), last) - plan.live.begin());
  report.profiles = uint32_t(khi - klo);
  const uint32_t numProfiles = uint32_t(plan.live.size() + 1);
  RankSink sink(comm, dir, uint32_t(klo + 1), uint32_t(khi - klo), arena, opt.scratchDir);
  HPC_RETURN_IF_ERROR(comm.agree(sink.begin(numProfiles, cct.size(), plan.anyTrace)));
  // Each trace written into its place in trace.db as it is read (every rank places its lines
  // after those of the ranks before it, by the record counts its pass 1 took).
  if (plan.anyTrace) {
    std::vector<uint64_t> records(plan.live.size(), 0);
    for (size_t k = klo; k < khi; ++k) records[k] = unified[plan.live[k] - first].traceRecords;
    HPC_RETURN_IF_ERROR(comm.agree(sink.place(records)));
  }
  tbb::enumerable_thread_specific<Propagator> propagators(std::cref(shape), plan.propagated);
  const ContextIds ids = cct.ids();
  std::vector<Status> errors(khi - klo);
  // As many threads as their propagators' scratch allows (PipelineOptions::scratchBudget).
  const uint32_t passTwo = propagateThreads(opt, cct.size(), plan.propagated);
  std::optional<tbb::task_arena> narrow;
  if (passTwo < std::max(1u, opt.threads)) narrow.emplace(int(passTwo));
  (narrow ? *narrow : arena).execute([&] {
    tbb::parallel_for(klo, khi, [&](size_t k) {
      size_t i = plan.live[k];
      errors[k - klo] = propagateProfile(*job.profiles[i], *spill, unified[i - first], ids, plan.localToPropagated(i),
                                         plan.propIds,
                                         uint32_t(k + 1), plan.idTuples[k], propagators.local(), sink);
    });
  });
  Status st;
  for (const Status& e : errors)
    if (st.ok() && !e.ok()) st = e;
  HPC_RETURN_IF_ERROR(comm.agree(st));
  report.propagate = lap.next();
  HPC_RETURN_IF_ERROR(sink.placeProfiles());
  report.place = lap.next();

  // Class 3 and cct.db: contiguous context ranges of about equal numbers of values.
  std::vector<uint64_t> counts = sumCounts(propagators, cct.size());
  propagators.clear();  // their scratch serves the transpose
  comm.allreduceSum(counts);
  const std::vector<size_t> ranges = partitionByWeight(counts, comm.size());
  const uint32_t lo = uint32_t(ranges[size_t(rank)]), hi = uint32_t(ranges[size_t(rank) + 1]);
  TransposeOptions topt;
  topt.budgetBytes = opt.transposeBudget;
  topt.threads = opt.threads;
  // The range's part of every row (all ranks' profiles, from profile.db) is read once and kept
  // by context range in row buckets, as hpcprof's pass 2 keeps its rows, so that the rounds
  // read a few large chunks each: a piece of every row per round made rows x rounds small
  // reads (4,000 profiles on 2 ranks: the transpose took 0.38-0.60 s against hpcprof's 0.05 s).
  std::unique_ptr<RowBuckets> buckets;
  std::unique_ptr<uint8_t[]> workspace;
  if (hi > lo) {
    Expected<std::unique_ptr<RowBuckets>> made = bucketRange(sink, numProfiles, lo, hi, opt, arena);
    HPC_RETURN_IF_ERROR(comm.agree(made.ok() ? Status() : made.status()));
    buckets = std::move(*made);
    topt.buckets = buckets.get();
    workspace = buckets->releaseMemory(topt.workspaceBytes);
    topt.workspace = workspace.get();
  } else {
    HPC_RETURN_IF_ERROR(comm.agree(Status()));
  }
  SparseRow part;
  HPC_RETURN_IF_ERROR(comm.agree(transposeRange(sink, metrics, numProfiles, counts, lo, hi, topt, part)));
  buckets.reset();
  report.contexts = hi - lo;
  HPC_RETURN_IF_ERROR(sink.placeContexts());
  // Summary statistics: each range's, gathered in context order to rank 0.
  ByteWriter rowBytes;
  putRow(rowBytes, part);
  std::vector<uint8_t> parts = comm.gather(rowBytes.buffer(), 0);
  if (rank == 0) {
    SparseRow summary;
    WireReader rr(parts);
    while (!rr.done() && !rr.failed()) getRow(rr, summary);
    if (rr.failed()) st = Status::error("summary statistics: malformed rows from the ranks");
    lexAwareSummary(shape, metrics.size(), summary, uint32_t(metrics.kinds().size()));
    if (st.ok()) st = sink.writeSummary(summary);
  }
  HPC_RETURN_IF_ERROR(comm.agree(st));
  report.transpose = lap.next();

  MetaInput meta{plan.title, &cct, &names, &metrics, plan.skipped, &opt.replacePaths, &plan.metricDescs};
  HPC_RETURN_IF_ERROR(sink.finish(meta));
  report.outputBytes = sink.bytesWritten();
  report.finish = lap.next();
  return DistributedResult{uint32_t(plan.live.size()), plan.skipped, cct.size()};
}

}  // namespace hpc::analysis::mpi
