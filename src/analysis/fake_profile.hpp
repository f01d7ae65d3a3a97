// For tests: a profile held in memory, its tree and values given whole.
#pragma once

#include <string>
#include <utility>

#include "analysis/input.hpp"

namespace hpc::analysis {

class FakeProfile final : public ProfileSource {
public:
  FakeProfile(std::string path, ProfileTree t, ProfileValues v)
      : path_(std::move(path)), tree_(std::move(t)), values_(std::move(v)) {}
  const std::string& path() const override { return path_; }
  Expected<ProfileTree> readTree() override { return tree_; }
  Expected<ProfileValues> readValues() override { return values_; }

private:
  std::string path_;
  ProfileTree tree_;
  ProfileValues values_;
};

}  // namespace hpc::analysis
