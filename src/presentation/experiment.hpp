// A database opened for viewing: meta.db and the summary profile at once, the
// per-profile values (cct.db), all profiles (profile.db rows) and trace.db only when a
// view first asks for them. Indexes the context tree by ctxId and names every
// context the way the views print it. All file bytes go through formats/db.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/status.hpp"
#include "formats/db/db.hpp"

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

struct Node {
  uint32_t parent = kNoCtx;
  uint32_t depth = 0;      // tree depth, root 0
  uint32_t callDepth = 0;  // number of function contexts on the path, this one included
  NodeKind kind = NodeKind::Root;
  const db::Context* ctx = nullptr;    // kind Context
  const db::EntryPoint* entry = nullptr;  // kind Entry
  std::vector<uint32_t> children;
};

class Experiment {
public:
  // Reads meta.db and profile.db of `dir` (the summary profile is row 0 of
// profile.db, and the format library reads that file whole); errors name the file.
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

  size_t id_limit() const { return nodes_.size(); }  // every listed ctxId is below
  bool has(uint32_t ctx) const { return ctx < nodes_.size() && (ctx == 0 || nodes_[ctx].parent != kNoCtx); }
  const Node& node(uint32_t ctx) const { return nodes_[ctx]; }
  size_t num_contexts() const { return numContexts_; }
  // Function index of a function context (lexical type function, function set).
  uint32_t function_of(uint32_t ctx) const;
  // The display name: "main", "loop at small.c:3", "small.c:11", "main thread", ...
  std::string name(uint32_t ctx) const;
  std::string function_name(uint32_t fn) const;
  // Source location of a context (file index, line), or kNone.
  std::pair<uint32_t, uint32_t> source_of(uint32_t ctx) const;

  // Summary-profile value of a context for a statistic id, 0 when absent.
  double summary(uint32_t ctx, uint16_t statId) const;
  double inclusive(uint32_t ctx, const MetricView& m) const { return summary(ctx, m.inc.sum); }
  double exclusive(uint32_t ctx, const MetricView& m) const { return summary(ctx, m.exc.sum); }
  StatValues stats(uint32_t ctx, const MetricView::Stats& s) const;

  // All rows of profile.db (row 0 is the summary), id tuples and values.
  const std::vector<db::Profile>& profiles() const { return profiles_; }
  // cct.db, read on first use.
  Expected<const std::vector<db::ContextValues>*> context_values() const;
  // trace.db, read on first use; nullptr when the database has no traces.
  Expected<const db::TraceDb*> trace() const;

private:
  explicit Experiment(std::filesystem::path dir) : dir_(std::move(dir)) {}
  Status index_tree();
  void index_metrics();

  std::filesystem::path dir_;
  db::Meta meta_;
  std::vector<MetricView> metrics_;
  std::vector<Node> nodes_;
  size_t numContexts_ = 0;
  std::vector<db::Profile> profiles_;
  std::vector<uint32_t> summaryRow_;  // by ctxId: row in profiles_[0].values.key, or kNoCtx

  template <typename T> struct Lazy {
    std::once_flag once;
    std::optional<Expected<T>> value;
  };
  mutable Lazy<std::vector<db::ContextValues>> cct_;
  mutable Lazy<std::optional<db::TraceDb>> trace_;
};

// Basename of a path, for compact names.
std::string base_name(const std::string& path);

}  // namespace hpc::present
