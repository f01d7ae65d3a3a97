// For the presentation tests: one request to the API, its reply's body whole (a streamed
// reply run to its end), the status checked.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "presentation/server/api.hpp"

namespace hpc::present {

inline std::string api_body(Api& api, const std::string& endpoint, const Params& q, int status = 200) {
  Reply r = api.handle(endpoint, q);
  std::string body = r.body;
  if (r.stream) {
    EXPECT_TRUE(r.stream([&](std::string_view s) {
      body += s;
      return true;
    }));
    api.done();
  }
  EXPECT_EQ(r.status, status) << endpoint << ": " << body.substr(0, 300);
  return body;
}

}  // namespace hpc::present
