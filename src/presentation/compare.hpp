// Two databases side by side, as hpcviewer shows merged databases: one metric's values in a
// baseline (A) and in another run (B), matched by name, so that a change of code, input,
// compiler or machine shows where the time moved. Flat rows match by what names them (a
// function by its name and load module's file name, a module by its file name, a file by its
// path, a line or loop by file path and line; the two programs' executables are one module
// whatever their file names, as two builds of a program); calling contexts match by the names
// on their path from the root (entry point, functions, loops, lines), whatever their ids.
#pragma once

#include <iosfwd>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "presentation/experiment.hpp"
#include "presentation/report.hpp"
#include "presentation/views.hpp"

namespace hpc::present {

struct CompareOptions {
  size_t metricA = 0, metricB = 0;  // the same metric's index in each database
  size_t top = 20;                  // rows per section
  FlatBy by = FlatBy::Function;
  ReportFormat format = ReportFormat::Text;
  bool flat = true, topDown = true;  // the sections (hpcreport --view flat, top-down)
};

struct CompareRow {
  std::string section;  // "flat-function" ... "flat-loop", "top-down"
  uint32_t depth = 0;   // tree depth (top-down), else 0
  std::string name;
  double aInc = 0, bInc = 0, aExc = 0, bExc = 0;
};

// What names a load module in any database: its file name, the program's executable
// (Experiment::program_module) one name whatever its file's, so that two builds of a program
// named otherwise compare.
std::string module_key(const Experiment& e, uint32_t module);
// A context's or function's name as two databases match it: the " [file name]" of the
// program's executable that hpcstruct adds to its procedures' names made one token, so that
// two builds named otherwise match ("main [app]" and "main [app.O3]").
std::string match_name(const Experiment& e, std::string name);
// What names a flat row in any database (its key: ids differ from one database to another).
std::string flat_key(const Experiment& e, FlatBy by, const FlatRow& r);
// The context of `in` with the path of names that `ctx` has in `from` (the root for 0), or
// kNoCtx where `in` has none. Where siblings of `in` share a name on the way (threads of one
// kind), the first whose subtree holds the rest of the path, and `ambiguous` says so. Work:
// the path's length times its contexts' siblings (more where names are shared).
uint32_t matching_context(const Experiment& from, uint32_t ctx, const Experiment& in, bool* ambiguous = nullptr);
// Each metric of `e` as an index into `base`'s metrics, by name; -1 where base has none.
std::vector<int> matching_metrics(const Experiment& e, const Experiment& base);

// The indices and view keys of one database (`from`) as another's (`to`), by name: a load
// module by its file name, a source file by its path (else by its file name, where one file
// of `to` has it), a function by its name and its module's file name (the first of those in
// `to`), an entry point by its name. Built once (an index of `to`'s names); each answer is a
// lookup. MT: const methods are thread-safe.
class Matcher {
public:
  Matcher(const Experiment& from, const Experiment& to);
  uint32_t module(uint32_t m) const;    // db::kNone where `to` has none
  uint32_t file(uint32_t f) const;
  uint32_t function(uint32_t fn) const;
  // A bottom-up key (function, or kEntryKey|entry context) and path (CallerIndex's).
  std::optional<uint64_t> caller_key(uint64_t key) const;
  std::optional<std::vector<uint64_t>> caller_path(const std::vector<uint64_t>& path) const;
  // A bottom-up key of `to` as caller_key answers for what it names: entry points of one name
  // (threads of one kind) are one, the first.
  uint64_t named_in_to(uint64_t toKey) const;
  // A path of the static structure (StaticTree's).
  std::optional<std::vector<uint64_t>> static_path(const std::vector<uint64_t>& path) const;

private:
  const Experiment& from_;
  const Experiment& to_;
  std::unordered_map<std::string, uint32_t> modules_, files_, fileNames_, functions_, entries_;
  IndexMaps maps_;
};

// The flat rows by o.by, the `top` with the largest change of exclusive value (then of
// inclusive), and the calling contexts best-first by the largest change of inclusive value,
// printed as a forest (siblings by the largest change).
std::vector<CompareRow> compare_rows(const Experiment& a, const Experiment& b, const CompareOptions& o);
void print_comparison(const Experiment& a, const Experiment& b, const CompareOptions& o, std::ostream& os);

}  // namespace hpc::present
