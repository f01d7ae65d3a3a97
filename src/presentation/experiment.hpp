// A database opened for viewing, read-only and memory-mapped, loading nothing a request
// did not ask for: meta.db is parsed at open except for the context tree, which is
// indexed as 10-12 bytes a context (parent, function, offset of its record in the mapped meta.db) and
// decoded from the mapping on use; profile.db (the summary row included), cct.db and
// trace.db are read from their mappings through the lazy readers of formats/db, row by
// row. release_pages() drops what requests touched from the process (bounded memory).
#pragma once

#include <algorithm>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "common/file.hpp"
#include "formats/db/db.hpp"
#include "formats/db/lazy.hpp"

namespace hpc::present {

inline constexpr uint32_t kNoCtx = UINT32_MAX;
inline constexpr uint16_t kNoMetric = UINT16_MAX;

// One metric of meta.db as the views show it: an inclusive (execution scope) and an
// exclusive (function scope, else lex_aware, else point) column. *Prop ids index
// profile.db/cct.db rows of measured profiles; the Stat ids index the summary profile.
struct MetricView {
  std::string name;
  uint16_t incProp = kNoMetric, excProp = kNoMetric;
  struct Stats {
    uint16_t sum = kNoMetric, count = kNoMetric, sumSq = kNoMetric, min = kNoMetric, max = kNoMetric;
  } inc, exc;
};

// Summary statistics of one context and one column across the measured profiles.
struct StatValues {
  double sum = 0;
  std::optional<double> count, mean, stddev, min, max;
};

enum class NodeKind : uint8_t { Root, Entry, Context };

class Experiment {
public:
  // Maps and indexes meta.db and profile.db of `dir`; errors name the file.
  static Expected<std::unique_ptr<Experiment>> open(const std::filesystem::path& dir);
  Experiment(const Experiment&) = delete;
  Experiment& operator=(const Experiment&) = delete;

  // MT: const methods are thread-safe; the lazy loaders below are too.
  const std::filesystem::path& dir() const { return dir_; }
  const db::Meta& meta() const { return meta_; }
  const std::vector<MetricView>& metrics() const { return metrics_; }
  // Index of the metric named `name` (exact, else unique case-insensitive prefix), or
  // a number; -1 if none.
  int find_metric(const std::string& name) const;
  // The metric a view opens with: the first time metric (TIME, "(sec)") with a non-zero total, else
  // the first metric with one, else 0.
  size_t default_metric() const;

  size_t id_limit() const { return parent_.size(); }  // every listed ctxId is below
  bool has(uint32_t ctx) const { return ctx < parent_.size() && (ctx == 0 || parent_[ctx] != kNoCtx); }
  // Tree accessors; `ctx` must satisfy has().
  uint32_t parent(uint32_t ctx) const { return ctx == 0 ? kNoCtx : parent_[ctx]; }
  NodeKind kind(uint32_t ctx) const;
  std::vector<uint32_t> children(uint32_t ctx) const;
  void children(uint32_t ctx, std::vector<uint32_t>& out) const;
  bool has_children(uint32_t ctx) const;
  uint32_t depth(uint32_t ctx) const;       // tree depth, root 0
  uint32_t call_depth(uint32_t ctx) const;  // function contexts on the path, this one included
  db::Context context(uint32_t ctx) const;  // kind Context; children left empty
  const db::EntryPoint& entry(uint32_t ctx) const;  // kind Entry
  size_t num_contexts() const { return numContexts_; }
  // Function index of a function context (lexical type function, function set).
  uint32_t function_of(uint32_t ctx) const;
  // The display name: "main", "loop at small.c:3", "small.c:11", "main thread", ...
  std::string name(uint32_t ctx) const;
  std::string function_name(uint32_t fn) const;
  // The program's executable among meta.db's modules: the module of a function named main
  // (or "main [file]", as hpcstruct names procedures),
  // else the module whose file name is the database's title (hpcprof's default), else kNone.
  uint32_t program_module() const { return programModule_; }
  // " [file name]" of that module, as hpcstruct ends its procedures' names; empty without one.
  const std::string& program_suffix() const { return programSuffix_; }
  // Source location of a context (file index, line), or kNone.
  std::pair<uint32_t, uint32_t> source_of(uint32_t ctx) const;

  // Summary-profile value of a context for a statistic id, 0 when absent.
  double summary(uint32_t ctx, uint16_t statId) const;
  // Value of a context in one profile's row of profile.db (a propagated metric id, incProp
  // or excProp), 0 when absent.
  double profile_value(size_t prof, uint32_t ctx, uint16_t metricId) const;
  // The same summed over some profiles (hpcviewer's thread view).
  double profiles_value(const std::vector<uint32_t>& profiles, uint32_t ctx, uint16_t metricId) const {
    double v = 0;
    for (uint32_t p : profiles) v += profile_value(p, ctx, metricId);
    return v;
  }
  // hpcreport --profiles: from here on every view sums these profiles' values (profile.db
  // rows, 1 and up) instead of reading the summary's; statistics other than sums read 0.
  // MT: not thread-safe; for a tool that analyses one selection (hpcserver never calls it).
  void select_profiles(std::vector<uint32_t> profiles);
  const std::vector<uint32_t>& selected_profiles() const { return selected_; }
  bool profile_selected(size_t prof) const {
    return selected_.empty() || std::binary_search(selected_.begin(), selected_.end(), uint32_t(prof));
  }
  double inclusive(uint32_t ctx, const MetricView& m) const { return summary(ctx, m.inc.sum); }
  double exclusive(uint32_t ctx, const MetricView& m) const { return summary(ctx, m.exc.sum); }
  StatValues stats(uint32_t ctx, const MetricView::Stats& s) const;

  // All rows of profile.db (row 0 is the summary): flags and id tuples; values empty.
  const std::vector<db::Profile>& profiles() const { return profiles_; }
  // An identifier's kind by meta.db's names ("RANK", "THREAD"; "KIND9" past them).
  std::string id_kind_name(uint8_t kind) const;
  // A profile's identity: "RANK 1 THREAD 0" ("summary" for the summary profile).
  std::string profile_label(size_t index) const;
  // The values of one context in cct.db (mapped on first use); empty for a context
  // without values.
  Expected<db::ContextValues> context_values(uint32_t ctx) const;
  // trace.db, mapped on first use; nullptr when the database has no traces.
  Expected<const db::LazyTraceDb*> trace() const;
  // Drops the mapped pages requests touched from the process (they stay in the page cache)
  // once more than 1/1024 of the database (at least 256 KiB) is resident, and with `withHeap`
  // returns freed heap memory to the system (malloc_trim).
  // MT: thread-safe; others' reads fault the pages back in.
  void release_pages(bool withHeap = true) const;
  // All the process holds resident (heap, stacks, file pages), from /proc/self/statm.
  static uint64_t resident_bytes();

private:
  explicit Experiment(std::filesystem::path dir) : dir_(std::move(dir)) {}
  void index_metrics();

  std::filesystem::path dir_;
  std::optional<MappedFile> metaFile_;    // read whole at open
  std::optional<BlockFile> metaBlocks_;   // the contexts' records, read as views ask
  db::MetaLayout layout_;
  db::Meta meta_;  // entry points without children
  std::vector<MetricView> metrics_;
  std::vector<uint32_t> parent_;  // by ctxId; kNoCtx: not listed
  std::vector<uint32_t> at_;      // by ctxId: offset / 8 of its {Ctx} or {EP} record in meta.db
  std::vector<uint32_t> fn_;      // by ctxId: function_of() (trace colours walk up without meta.db)
  std::vector<uint16_t> fn16_;    // the same in 16 bits (0xffff: none) when every index fits, fn_ then empty
  std::vector<std::pair<uint32_t, uint32_t>> entries_;  // (ctxId, index in meta_.entryPoints), sorted
  uint32_t programModule_ = db::kNone;
  std::string programSuffix_;
  size_t numContexts_ = 0;
  uint64_t pageBudget_ = 256u << 10;  // bytes of mapped pages release_pages() lets stay
  uint64_t baseShared_ = UINT64_MAX / 2;  // file pages resident after open
  static uint64_t shared_bytes();
  std::optional<db::LazyProfileDb> prof_;
  std::vector<db::Profile> profiles_;
  std::vector<uint32_t> selected_;                 // select_profiles(), sorted; empty: the summary
  std::vector<std::pair<uint16_t, uint16_t>> sumToProp_;  // (sum statistic id, propagated id), sorted

  template <typename T> struct Lazy {
    std::once_flag once;
    std::optional<Expected<T>> value;
  };
  mutable Lazy<std::optional<db::LazyCctDb>> cct_;
  mutable Lazy<std::optional<db::LazyTraceDb>> trace_;
  mutable std::atomic<const db::LazyCctDb*> cctOpen_{nullptr};  // for release_pages()
  mutable std::atomic<const db::LazyTraceDb*> traceOpen_{nullptr};
};

// Basename of a path, for compact names.
std::string base_name(const std::string& path);

}  // namespace hpc::present
