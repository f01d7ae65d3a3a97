// For tests: a profile held in memory, its tree and values given whole.
#pragma once

#include <algorithm>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "analysis/input.hpp"

namespace hpc::analysis {

class FakeProfile final : public ProfileSource {
public:
  FakeProfile(std::string path, ProfileTree t, ProfileValues v)
      : path_(std::move(path)), tree_(std::move(t)), values_(std::move(v)) {}
  const std::string& path() const override { return path_; }
  Expected<ProfileTree> readTree() override { return tree_; }
  Expected<ProfileValues> readValues() override { return values_; }
  // In chunks of `chunk` records, where set (as a trace file is read).
  Status readTrace(const TraceChunk& each) override {
    if (chunk == 0) return ProfileSource::readTrace(each);
    const std::vector<TraceRecord>& t = values_.trace;
    for (size_t at = 0; at < t.size(); at += chunk) {
      HPC_ASSIGN_OR_RETURN(bool more, each(std::span(t).subspan(at, std::min(chunk, t.size() - at))));
      if (!more) break;
    }
    return Status();
  }
  // Pass 1 as for a long trace: its nodes not listed (any of the tree's may be named).
  Status read(ProfileData& out) override {
    HPC_RETURN_IF_ERROR(ProfileSource::read(out));
    if (allNodes) {
      out.traceNodes.clear();
      out.traceAllNodes = true;
    }
    return Status();
  }
  size_t chunk = 0;
  bool allNodes = false;

private:
  std::string path_;
  ProfileTree tree_;
  ProfileValues values_;
};

}  // namespace hpc::analysis
