// hpcserver's JSON API over an Experiment, independent of HTTP: one call per view
// (seed 000 §7.3, bulk replies). Parameters arrive as strings and are checked here;
// every error is a reply with a status and a JSON {"error": ...}, never an exception.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <string_view>
#include <vector>

#include "presentation/compare.hpp"
#include "presentation/experiment.hpp"
#include "presentation/views.hpp"

namespace hpc::present {

// Where a streamed reply writes its body, piece by piece; false: the client went away.
using Writer = std::function<bool(std::string_view)>;

struct Reply {
  int status = 200;
  std::string contentType = "application/json";
  std::string body;
  // Set instead of `body` for replies that can be large (rows, trace screens): writes the
  // body as it is computed, so no reply is ever held whole. Called at most once, after
  // handle(); returns false when it stopped early. MT: runs on the request's thread.
  std::function<bool(const Writer&)> stream;
};

using Params = std::map<std::string, std::string>;

// Bounds on what one request may ask for, so a request's memory and work stay small.
inline constexpr size_t kMaxPixels = 8192;     // trace width
inline constexpr size_t kMaxTraceLines = 4096;  // default rows of a trace request
inline constexpr size_t kMaxRows = 100000;      // rows of one reply
inline constexpr size_t kMaxPathKeys = 256;     // bottom-up path length
inline constexpr uint64_t kMaxSourceBytes = 16u << 20;

class Api {
public:
  // With `base` (hpcserver --compare BASE), the rows of every profile view (top-down,
  // bottom-up, flat, static structure) also carry the baseline database's values of the
  // contexts and rows that match them by name.
  explicit Api(const Experiment& e, const Experiment* base = nullptr);
  Api(const Api&) = delete;
  Api& operator=(const Api&) = delete;

  // `endpoint` is the path after "/api/" ("info", "children", ...). A reply with a
  // `stream` does its work when that runs; done() after it (or after handle() otherwise)
  // lets go of what the request touched.
  // MT: thread-safe.
  Reply handle(const std::string& endpoint, const Params& q);
  void done() const;

private:
  Reply dispatch(const std::string& endpoint, const Params& q);
  Reply info();
  Reply children(const Params& q);
  Reply context(const Params& q);
  Reply bottom_up(const Params& q);
  Reply flat(const Params& q);
  Reply structure(const Params& q);
  Reply query(const Params& q);
  Reply overview(const Params& q);
  Reply profiles();
  Reply profile_values(const Params& q);
  Reply trace(const Params& q);
  Reply trace_sample(const Params& q);
  Reply trace_depth(const Params& q);
  Reply trace_lines();
  Reply trace_blame(const Params& q);
  Reply source(const Params& q);

  const Experiment& e_;
  const Experiment* base_;
  std::vector<int> baseMetric_;  // each metric's index in base_, -1 where it has none
  std::unique_ptr<const Matcher> match_;  // e_'s names as base_'s indices and keys
  // The asked metrics base_ has (indices into its metrics) and, per asked metric, its column
  // there (SIZE_MAX: none).
  struct BaseColumns {
    std::vector<size_t> metrics, at;
  };
  BaseColumns base_columns(const std::vector<size_t>& ms) const;
  // Values by a row's name (flat_key): inclusive and exclusive per asked metric.
  using BaseValues = std::unordered_map<std::string, std::pair<std::vector<double>, std::vector<double>>>;
  std::shared_ptr<BaseValues> base_flat(FlatBy by, const std::vector<size_t>& ms) const;
  // Values of base columns `c` laid out as the asked metrics (0 where base_ has none).
  static std::pair<std::vector<double>, std::vector<double>> spread(const BaseColumns& c, const std::vector<double>& inc,
                                                                    const std::vector<double>& exc);
};

}  // namespace hpc::present
