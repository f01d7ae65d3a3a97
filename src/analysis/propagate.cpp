#include "analysis/propagate.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <bit>
#include <utility>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace hpc::analysis {

PropagationShape::PropagationShape(const Cct& cct) {
  uint32_t n = cct.size();
  parent_ = cct.parents();
  lexical_.resize(n);
  loop_.resize(n);
  // Each context's key read where it lies (a miss a context on a large tree): in ranges on
  // the calling arena's threads (400,000 contexts: 5-9 ms on one thread).
  auto fill = [&](uint32_t lo, uint32_t hi) {
    for (uint32_t i = lo; i < hi; ++i) {
      const ContextKey& k = cct.byId(i)->key();
      lexical_[i] = k.kind == NodeKind::Scope && k.relation == Relation::Lexical;
      loop_[i] = k.kind == NodeKind::Scope && k.type == LexType::Loop;
    }
  };
  constexpr uint32_t kRange = 32768;
  if (n <= kRange) {
    fill(0, n);
    return;
  }
  tbb::parallel_for(tbb::blocked_range<uint32_t>(0, n, kRange),
                    [&](const tbb::blocked_range<uint32_t>& r) { fill(r.begin(), r.end()); });
}

Propagator::Propagator(const PropagationShape& shape, uint32_t numMetrics, size_t denseLimit)
    : shape_(shape), numMetrics_(numMetrics), width_(numMetrics * kNumScopes), slotOf_(shape.size(), -1),
      pending_((shape.size() + 63) / 64, 0) {
  if (width_ <= kMaxCountedMetrics && size_t(shape.size()) * width_ <= kMaxMetricCounts)
    metricCounts_.assign(size_t(shape.size()) * width_, 0);
  else
    counts_.assign(shape.size(), 0);
  maskWords_ = (numMetrics + 63) / 64;
  const bool masked = width_ != kNumScopes && width_ != 2 * kNumScopes;
  if (!masked && size_t(shape.size()) * width_ <= denseLimit) {
    dense_.assign(size_t(shape.size()) * width_, 0.0);
    slotOf_ = {};
  }
}

uint64_t Propagator::scratchBytes(uint32_t contexts, uint32_t numMetrics) {
  const uint64_t width = uint64_t(std::max(1u, numMetrics)) * kNumScopes;
  // slotOf_, order_ and the pending bits; counts (by metric where they are kept so, else 8
  // bytes); the row's context and start; then each value's metric and value in the row and
  // in the values by slot (or dense_, alike): every scope of every metric where there are one
  // or two (runDense, runWidth), else (runMasked: scratch as large as the values there are)
  // a context's masks and place, and one metric's scopes.
  const uint64_t counts = width <= kMaxCountedMetrics && uint64_t(contexts) * width <= kMaxMetricCounts ? 4 * width : 8;
  const bool masked = width != kNumScopes && width != 2 * kNumScopes;
  const uint64_t values = masked ? 8 + 8 + kNumScopes * (2 + 8 + 8) : width * (2 + 8 + 8);
  return uint64_t(contexts) * (4 + 4 + 1 + counts + 4 + 8 + values);
}

uint64_t Propagator::count(uint32_t ctx) const {
  if (counts_.empty()) {
    uint64_t n = 0;
    for (uint32_t m = 0; m < width_; ++m) n += metricCounts_[size_t(ctx) * width_ + m];
    return n;
  }
  return counts_[ctx];
}

void Propagator::run(std::span<const ContextValue> points, SparseRow& out) {
  // The common widths (one or two metrics) unrolled by the compiler; more, by their masks.
  if (width_ != kNumScopes && width_ != 2 * kNumScopes) return runMasked(points, out);
  if (!dense_.empty())
    return width_ == kNumScopes ? runDense<kNumScopes>(points, out) : runDense<2 * kNumScopes>(points, out);
  return width_ == kNumScopes ? runWidth<kNumScopes>(points, out) : runWidth<2 * kNumScopes>(points, out);
}

namespace {

// A context's subtotals added to its parent's: execution flows over every edge; function (and
// lex_aware, equal to it per profile) over lexical edges only, stopping at calls and inlined
// calls.
inline void flowUp(double* to, const double* from, uint32_t width, bool lexical) {
  if (lexical) {
    for (uint32_t m = 0; m < width; m += kNumScopes) {
      to[m + kExecution] += from[m + kExecution];
      to[m + kFunction] += from[m + kFunction];
      to[m + kLexAware] += from[m + kLexAware];
    }
  } else {
    for (uint32_t m = 0; m < width; m += kNumScopes) to[m + kExecution] += from[m + kExecution];
  }
}

// A context's counts by metric: each of its `width` entries that is not zero counts one.
// Four at once where the width is known to be a multiple of 4 (one read-modify-write of 16
// bytes in place of four: the counts of a large tree lie far outside the caches).
template <uint32_t kWidth>
inline void countNonZero(uint32_t* __restrict mc, const double* __restrict v, uint32_t width) {
#if defined(__SSE2__)
  if constexpr (kWidth != 0 && kWidth % 4 == 0) {
    const __m128d zero = _mm_setzero_pd();
    for (uint32_t m = 0; m < kWidth; m += 4) {
      const __m128 lo = _mm_castpd_ps(_mm_cmpneq_pd(_mm_loadu_pd(v + m), zero));
      const __m128 hi = _mm_castpd_ps(_mm_cmpneq_pd(_mm_loadu_pd(v + m + 2), zero));
      const __m128i ones = _mm_castps_si128(_mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)));  // -1 where not zero
      __m128i* at = reinterpret_cast<__m128i*>(mc + m);
      _mm_storeu_si128(at, _mm_sub_epi32(_mm_loadu_si128(at), ones));
    }
    return;
  }
#endif
  for (uint32_t m = 0; m < width; ++m) mc[m] += v[m] != 0;
}

// The sweep: the contexts marked in `pending` (words of bits, all clear after), from the
// highest id down, each one's parent (a smaller id, reached later) marked in turn;
// visit(context, parent) for each as it is reached (the root is its own parent). Callers pass
// what the visit touches by value in its captures, so that the compiler keeps it in
// registers.
template <typename Visit>
inline void sweepMarked(uint64_t* __restrict pending, size_t words, const uint32_t* __restrict parent,
                        Visit&& visit) {
  for (size_t w = words; w-- > 0;) {
    uint64_t bits = pending[w];
    pending[w] = 0;
    while (bits) {
      const unsigned b = 63u - unsigned(__builtin_clzll(bits));
      bits &= ~(uint64_t(1) << b);
      const uint32_t c = uint32_t(w * 64 + b);
      const uint32_t up = parent[c];
      if (up != c) {
        const uint64_t upBit = uint64_t(1) << (up % 64);
        if (up / 64 == w) bits |= upBit;
        else pending[up / 64] |= upBit;
      }
      visit(c, up);
    }
  }
}

}  // namespace

template <uint32_t kWidth>
void Propagator::runDense(std::span<const ContextValue> points, SparseRow& out) {
  const uint32_t width = kWidth ? kWidth : width_;
  double* dense = dense_.data();
  // The points' values at their contexts, which are marked in a bitset; the bitset is then
  // swept once from the highest context down. A context's children have higher ids, so its
  // subtotals are complete when the sweep reaches it: they flow on to its parent, which is
  // marked in turn, and its entries are written then, while its values are at hand. One pass,
  // no slots, no list of the contexts touched: values stay by context.
  for (const ContextValue& p : points) {
    if (p.value == 0) continue;
    pending_[p.ctx / 64] |= uint64_t(1) << (p.ctx % 64);
    double* v = dense + size_t(p.ctx) * width + size_t(p.metric) * kNumScopes;
    for (uint32_t s = 0; s < kNumScopes; ++s) v[s] += p.value;
  }
  // The row is written from the end of scratch sized for the whole tree, down: contexts come
  // in decreasing order, each one's metrics are written from the highest down.
  const size_t contexts = shape_.size(), most = contexts * width;
  if (rowValue_.size() < most + width) {
    rowMetric_.resize(most + width);
    rowValue_.resize(most + width);
  }
  if (rowCtx_.size() < contexts) {
    rowCtx_.resize(contexts);
    rowStart_.resize(contexts);
  }
  // Everything the sweep touches as restrict locals, copied into its visit's captures: with
  // members and vectors captured by reference, the compiler loaded each array's address again
  // after every store (propagate_bench 53.5 -> 48 us a profile; with 50 % lexical edges 77 ->
  // 66 us).
  uint16_t* const __restrict metricOut = rowMetric_.data() + width;
  double* const __restrict valueOut = rowValue_.data() + width;
  uint32_t* const __restrict ctxOut = rowCtx_.data();
  uint64_t* const __restrict startOut = rowStart_.data();
  uint32_t* const __restrict byMetric = metricCounts_.empty() ? nullptr : metricCounts_.data();
  uint64_t* const __restrict counts = counts_.data();
  uint64_t* const __restrict pending = pending_.data();
  const uint32_t* const __restrict parent = shape_.parents();
  const uint8_t* const __restrict lexical = shape_.lexicalEdges();
  double* const __restrict values = dense;
  size_t at = most, k = contexts;
  sweepMarked(pending, pending_.size(), parent, [=, &at, &k](uint32_t c, uint32_t up) __attribute__((always_inline)) {
    double* const v = values + size_t(c) * width;
    // The parent, marked by the sweep, takes this context's subtotals.
    if (up != c) flowUp(values + size_t(up) * width, v, width, lexical[c]);
    const size_t before = at;
    uint32_t* const mc = byMetric ? byMetric + size_t(c) * width : nullptr;
    // Every entry is written and only a non-zero one kept (the place moves on): no branch
    // on which are non-zero, which follows no pattern the processor learns (a call passes
    // on execution alone, a measured context has all four; 48 -> 47 us, 66 -> 62 us). The
    // scratch has `width` entries of slack before its start for the entries not kept.
    for (uint32_t m = width; m-- > 0;) {
      metricOut[at - 1] = uint16_t(m);
      valueOut[at - 1] = v[m];
      at -= v[m] != 0;
    }
    if (mc) countNonZero<kWidth>(mc, v, width);
    std::fill_n(v, width, 0.0);
    if (at == before) return;
    if (!mc) counts[c] += before - at;
    --k;
    ctxOut[k] = c;
    startOut[k] = at;
  });
  const size_t n = contexts - k;
  out.ctx.assign(ctxOut + k, ctxOut + contexts);
  out.start.resize(n + 1);
  for (size_t j = 0; j < n; ++j) out.start[j] = startOut[k + j] - at;
  out.start[n] = most - at;
  out.metric.assign(metricOut + at, metricOut + most);
  out.value.assign(valueOut + at, valueOut + most);
}

size_t Propagator::touch(std::span<const ContextValue> points) {
  // The contexts touched: the points' and all their ancestors. The points are marked in a
  // bitset, which is then swept from the highest context down, each context marking its
  // parent (a smaller id, so swept later): no walk up a chain of dependent loads per point.
  // The sweep also gives the slots, in decreasing context order.
  for (const ContextValue& p : points)
    if (p.value != 0) pending_[p.ctx / 64] |= uint64_t(1) << (p.ctx % 64);
  // The sweep over restrict locals (as in runDense), the list sized for the tree.
  if (order_.size() < shape_.size()) order_.resize(shape_.size());
  size_t n = 0;
  uint32_t* const __restrict order = order_.data();
  int32_t* const __restrict slotOf = slotOf_.data();
  sweepMarked(pending_.data(), pending_.size(), shape_.parents(),
              [=, &n](uint32_t c, uint32_t) __attribute__((always_inline)) {
                slotOf[c] = int32_t(n);
                order[n++] = c;
              });
  return n;
}

template <uint32_t kWidth>
void Propagator::runWidth(std::span<const ContextValue> points, SparseRow& out) {
  const uint32_t width = kWidth ? kWidth : width_;
  const size_t n = touch(points);
  if (values_.size() < n * width) values_.resize(std::max(n * width, 2 * values_.size()));  // grows, never shrinks
  std::fill_n(values_.data(), n * width, 0.0);
  double* values = values_.data();
  for (const ContextValue& p : points) {
    if (p.value == 0) continue;
    double* v = values + size_t(slotOf_[p.ctx]) * width + size_t(p.metric) * kNumScopes;
    for (uint32_t s = 0; s < kNumScopes; ++s) v[s] += p.value;
  }
  // Subtotals flow up once per context, children first (slots in increasing order: contexts
  // in decreasing, a parent's id being smaller).
  {
    const uint32_t* const __restrict order = order_.data();
    const uint32_t* const __restrict parent = shape_.parents();
    const uint8_t* const __restrict lexical = shape_.lexicalEdges();
    const int32_t* const __restrict slotOf = slotOf_.data();
    double* const __restrict v = values;
    for (size_t k = 0; k < n; ++k) {
      const uint32_t c = order[k];
      const uint32_t up = parent[c];
      if (up != c) flowUp(v + size_t(slotOf[up]) * width, v + k * width, width, lexical[c]);
    }
  }

  writeRow<kWidth>(n, [&](size_t j) { return values + j * width; }, out);
}

// Bit counts are one instruction where the processor has it (x86-64-v2 on), a library call
// in the baseline x86-64 this is built for: a clone for each, chosen when the program loads.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("popcnt", "default")))
#endif
void Propagator::runMasked(std::span<const ContextValue> points, SparseRow& out) {
  const uint32_t width = width_, words = maskWords_;
  const size_t n = touch(points);
  if (masks_.size() < n * words) masks_.resize(std::max(n * words, 2 * masks_.size()));
  std::fill_n(masks_.data(), n * words, 0);
  if (place_.size() < n + 1) place_.resize(std::max(n + 1, 2 * place_.size()));
  uint64_t* const __restrict masks = masks_.data();
  uint64_t* const __restrict place = place_.data();
  const int32_t* const __restrict slotOf = slotOf_.data();
  const uint32_t* const __restrict order = order_.data();
  const uint32_t* const __restrict parent = shape_.parents();
  const uint8_t* const __restrict lexical = shape_.lexicalEdges();
  // Each slot's metrics: its points' and, children first (slots in increasing order), its
  // children's. A slot keeps the scopes of those alone, in metric order, at place[k] (a
  // GPU measurement's context has values of a few of its dozens of metrics: a slot of every
  // metric's scopes was ten times the memory, every access to it a miss).
  for (const ContextValue& p : points)
    if (p.value != 0) masks[size_t(slotOf[p.ctx]) * words + p.metric / 64] |= uint64_t(1) << (p.metric % 64);
  for (size_t k = 0; k < n; ++k) {
    const uint32_t c = order[k], up = parent[c];
    if (up == c) continue;
    const size_t kp = size_t(slotOf[up]);
    for (uint32_t w = 0; w < words; ++w) masks[kp * words + w] |= masks[k * words + w];
  }
  place[0] = 0;
  for (size_t k = 0; k < n; ++k) {
    uint64_t bits = 0;
    for (uint32_t w = 0; w < words; ++w) bits += uint64_t(std::popcount(masks[k * words + w]));
    place[k + 1] = place[k] + bits;
  }
  const size_t entries = size_t(place[n]) * kNumScopes;
  if (values_.size() < entries) {  // scratch: made anew, nothing copied (tens of MB on a large tree)
    std::vector<double>().swap(values_);
    values_.resize(entries + entries / 4);
  }
  std::fill_n(values_.data(), entries, 0.0);
  double* const __restrict values = values_.data();
  // A metric's scopes within its slot: its rank among the slot's metrics.
  auto rank = [](const uint64_t* mask, uint32_t m) {
    uint32_t r = 0;
    for (uint32_t w = 0; w < m / 64; ++w) r += uint32_t(std::popcount(mask[w]));
    return r + uint32_t(std::popcount(mask[m / 64] & ((uint64_t(1) << (m % 64)) - 1)));
  };
  for (const ContextValue& p : points) {
    if (p.value == 0) continue;
    const size_t k = size_t(slotOf[p.ctx]);
    double* v = values + (place[k] + rank(masks + k * words, p.metric)) * kNumScopes;
    for (uint32_t s = 0; s < kNumScopes; ++s) v[s] += p.value;
  }
  // Each context's metrics to its parent, children first: execution over every edge,
  // function and lex_aware over lexical ones (flowUp's rule). A child's metrics are among its
  // parent's, so both are walked in metric order at once.
  for (size_t k = 0; k < n; ++k) {
    const uint32_t c = order[k], up = parent[c];
    if (up == c) continue;
    const size_t kp = size_t(slotOf[up]);
    const bool lex = lexical[c];
    const double* from = values + place[k] * kNumScopes;
    double* const toSlot = values + place[kp] * kNumScopes;
    uint32_t before = 0;  // the parent's metrics in the words before
    for (uint32_t w = 0; w < words; ++w) {
      const uint64_t upWord = masks[kp * words + w];
      for (uint64_t bits = masks[k * words + w]; bits; bits &= bits - 1) {
        const uint64_t below = (bits & -bits) - 1;
        double* to = toSlot + (before + uint32_t(std::popcount(upWord & below))) * kNumScopes;
        to[kExecution] += from[kExecution];
        if (lex) {
          to[kFunction] += from[kFunction];
          to[kLexAware] += from[kLexAware];
        }
        from += kNumScopes;
      }
      before += uint32_t(std::popcount(upWord));
    }
  }
  // The row in increasing context order: each slot's metrics, ascending, each one's non-zero
  // scopes, written straight into `out` once counted (no scratch of the most there could be
  // and copy: tens of MB a thread on a large tree).
  size_t rows = 0, nonZero = 0;
  for (size_t j = 0; j < n; ++j) {
    const double* const v = values + place[j] * kNumScopes;
    size_t here = 0;
    for (size_t e = 0; e < size_t(place[j + 1] - place[j]) * kNumScopes; ++e) here += v[e] != 0;
    nonZero += here;
    rows += here != 0;
  }
  out.ctx.resize(rows);
  out.start.resize(rows + 1);
  out.metric.resize(nonZero);
  out.value.resize(nonZero);
  uint16_t* const __restrict metricOut = out.metric.data();
  double* const __restrict valueOut = out.value.data();
  uint32_t* const __restrict ctxOut = out.ctx.data();
  uint64_t* const __restrict startOut = out.start.data();
  uint32_t* const __restrict byMetric = metricCounts_.empty() ? nullptr : metricCounts_.data();
  uint64_t* const __restrict counts = counts_.data();
  size_t at = 0, row = 0;
  startOut[0] = 0;
  // A context's counts by metric lie a context's width apart, mostly outside the caches:
  // fetched a few contexts ahead.
  constexpr size_t kAhead = 8;
  for (size_t j = n; j-- > 0;) {
    const uint32_t c = order[j];
    if (byMetric && j >= kAhead) __builtin_prefetch(byMetric + size_t(order[j - kAhead]) * width, 1);
    const size_t before = at;
    const double* v = values + place[j] * kNumScopes;
    for (uint32_t w = 0; w < words; ++w)
      for (uint64_t bits = masks[j * words + w]; bits; bits &= bits - 1) {
        const uint32_t m = w * 64 + uint32_t(std::countr_zero(bits));
        for (uint32_t s = 0; s < kNumScopes; ++s) {
          if (v[s] == 0) continue;
          const uint32_t id = m * kNumScopes + s;
          metricOut[at] = uint16_t(id);
          valueOut[at] = v[s];
          ++at;
          if (byMetric) ++byMetric[size_t(c) * width + id];
        }
        v += kNumScopes;
      }
    if (at == before) continue;
    if (!byMetric) counts[c] += at - before;
    ctxOut[row] = c;
    startOut[++row] = at;
  }
}

void Propagator::reserveRow(size_t entries, size_t contexts) {
  if (rowMetric_.size() < entries) {
    // Scratch: nothing to keep. A quarter more than asked, so that profiles slightly larger
    // than the last do not each make it anew.
    const size_t size = entries + entries / 4;
    std::vector<uint16_t>().swap(rowMetric_);
    std::vector<double>().swap(rowValue_);
    rowMetric_.resize(size);
    rowValue_.resize(size);
  }
  if (rowCtx_.size() < contexts + 1) {
    rowCtx_.resize(contexts + 1);
    rowStart_.resize(contexts + 2);
  }
}

void Propagator::copyRow(size_t rows, size_t entries, SparseRow& out) const {
  out.ctx.assign(rowCtx_.data(), rowCtx_.data() + rows);
  out.start.assign(rowStart_.data(), rowStart_.data() + rows + 1);
  out.metric.assign(rowMetric_.data(), rowMetric_.data() + entries);
  out.value.assign(rowValue_.data(), rowValue_.data() + entries);
}

template <uint32_t kWidth, typename ValuesOf>
void Propagator::writeRow(size_t n, ValuesOf&& valuesOf, SparseRow& out) {
  const uint32_t width = kWidth ? kWidth : width_;
  // The row, in increasing context order, into scratch sized for the most there can be, then
  // copied out.
  const size_t most = n * width;
  // `width` entries of slack past the end: every entry is written, only a non-zero one kept.
  reserveRow(most + width, n);
  // Restrict locals, as in runDense.
  uint16_t* const __restrict metricOut = rowMetric_.data();
  double* const __restrict valueOut = rowValue_.data();
  uint32_t* const __restrict ctxOut = rowCtx_.data();
  uint64_t* const __restrict startOut = rowStart_.data();
  uint32_t* const __restrict byMetric = metricCounts_.empty() ? nullptr : metricCounts_.data();
  uint64_t* const __restrict counts = counts_.data();
  const uint32_t* const __restrict order = order_.data();
  size_t at = 0, k = 0;
  startOut[0] = 0;
  // A large tree's counts by metric are far larger than the caches (400,000 contexts: 6.4 MB):
  // each context's are fetched a few contexts ahead of their update.
  constexpr size_t kAhead = 8;
  for (size_t j = n; j-- > 0;) {  // increasing context order
    const uint32_t c = order[j];
    if (byMetric && j >= kAhead) __builtin_prefetch(byMetric + size_t(order[j - kAhead]) * width, 1);
    const double* const __restrict v = valuesOf(j);
    const size_t before = at;
    uint32_t* const mc = byMetric ? byMetric + size_t(c) * width : nullptr;
    // Every entry written, only a non-zero one kept (as in runDense).
    for (uint32_t m = 0; m < width; ++m) {
      metricOut[at] = uint16_t(m);
      valueOut[at] = v[m];
      at += v[m] != 0;
    }
    if (mc) countNonZero<kWidth>(mc, v, width);
    if (!mc) counts[c] += at - before;
    ctxOut[k] = c;
    startOut[k + 1] = at;
    k += at != before;
  }
  copyRow(k, at, out);
}

void lexAwareSummary(const PropagationShape& shape, uint32_t numMetrics, SparseRow& summary,
                     uint32_t statsPerProp) {
  // Summary lex_aware of a loop: its own statements only, i.e. its point value plus the
  // function values of its non-loop children. Everything else keeps function's value.
  const uint32_t n = shape.size();
  std::vector<int64_t> rowOf(n, -1);
  for (size_t j = 0; j < summary.ctx.size(); ++j) rowOf[summary.ctx[j]] = int64_t(j);
  auto get = [&](uint32_t c, uint16_t id) -> double {
    if (rowOf[c] < 0) return 0;
    size_t j = size_t(rowOf[c]);
    for (uint64_t k = summary.start[j]; k < summary.start[j + 1]; ++k)
      if (summary.metric[k] == id) return summary.value[k];
    return 0;
  };
  auto sumId = [&](uint32_t m, Scope s) { return uint16_t(propId(m, s) * statsPerProp); };
  std::vector<std::pair<uint32_t, std::vector<double>>> loops;
  std::vector<int64_t> loopIndex(n, -1);
  for (uint32_t c = 0; c < n; ++c) {
    if (!shape.isLoop(c)) continue;
    loopIndex[c] = int64_t(loops.size());
    std::vector<double> v(numMetrics);
    for (uint32_t m = 0; m < numMetrics; ++m) v[m] = get(c, sumId(m, kPoint));
    loops.emplace_back(c, std::move(v));
  }
  if (loops.empty()) return;
  for (uint32_t c = 0; c < n; ++c) {
    uint32_t p = shape.parent(c);
    if (p == c || loopIndex[p] < 0 || shape.isLoop(c) || !shape.lexicalEdge(c) || rowOf[c] < 0) continue;
    auto& v = loops[size_t(loopIndex[p])].second;
    for (uint32_t m = 0; m < numMetrics; ++m) v[m] += get(c, sumId(m, kFunction));
  }
  // In place, unless a loop lacks a lex_aware entry it now needs (no second copy of a row as
  // large as the tree): values set, the entries that became zero dropped, rows compacted.
  bool inPlace = true;
  for (const auto& [c, lv] : loops) {
    if (rowOf[c] < 0) continue;
    const size_t j = size_t(rowOf[c]);
    for (uint32_t m = 0; m < numMetrics && inPlace; ++m) {
      const uint16_t id = sumId(m, kLexAware);
      bool found = false;
      for (uint64_t k = summary.start[j]; k < summary.start[j + 1] && !found; ++k) found = summary.metric[k] == id;
      inPlace = found || lv[m] == 0;
    }
    if (!inPlace) break;
  }
  if (inPlace) {
    size_t w = 0, rows = 0;
    uint64_t b = summary.start[0];
    for (size_t j = 0; j < summary.ctx.size(); ++j) {
      const uint32_t c = summary.ctx[j];
      const uint64_t e = summary.start[j + 1];  // read before start[] is written over
      const size_t before = w;
      const std::vector<double>* lv = loopIndex[c] >= 0 ? &loops[size_t(loopIndex[c])].second : nullptr;
      for (uint64_t k = std::exchange(b, e); k < e; ++k) {
        const uint16_t id = summary.metric[k];
        double v = summary.value[k];
        if (lv)
          for (uint32_t m = 0; m < numMetrics; ++m)
            if (id == sumId(m, kLexAware)) v = (*lv)[m];
        if (v == 0) continue;
        summary.metric[w] = id;
        summary.value[w] = v;
        ++w;
      }
      if (w == before) continue;
      summary.ctx[rows] = c;
      summary.start[rows + 1] = w;
      ++rows;
    }
    summary.ctx.resize(rows);
    summary.start.resize(rows + 1);
    summary.metric.resize(w);
    summary.value.resize(w);
    return;
  }
  SparseRow out;
  auto emit = [&](uint32_t c, std::vector<std::pair<uint16_t, double>>& vals) {
    std::sort(vals.begin(), vals.end());
    size_t before = out.value.size();
    for (auto& [id, v] : vals)
      if (v != 0) out.metric.push_back(id), out.value.push_back(v);
    if (out.value.size() != before) out.ctx.push_back(c), out.start.push_back(out.value.size());
  };
  std::vector<std::pair<uint16_t, double>> vals;
  for (size_t j = 0; j <= summary.ctx.size(); ++j) {
    // A loop without a summary row has nothing below it, so it needs no lex_aware.
    if (j == summary.ctx.size()) break;
    uint32_t c = summary.ctx[j];
    vals.clear();
    for (uint64_t k = summary.start[j]; k < summary.start[j + 1]; ++k)
      vals.emplace_back(summary.metric[k], summary.value[k]);
    if (loopIndex[c] >= 0) {
      const auto& lv = loops[size_t(loopIndex[c])].second;
      for (uint32_t m = 0; m < numMetrics; ++m) {
        uint16_t id = sumId(m, kLexAware);
        auto it = std::find_if(vals.begin(), vals.end(), [&](auto& e) { return e.first == id; });
        if (it != vals.end()) it->second = lv[m];
        else vals.emplace_back(id, lv[m]);
      }
    }
    emit(c, vals);
  }
  summary = std::move(out);
}

}  // namespace hpc::analysis
