// For the presentation tests: one request to the API, its reply's body whole (a streamed
// reply run to its end), the status checked.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

// Every row of a profile view ("children", "bottom-up", "structure", "flat") from the request
// `first`, each row with children expanded (its ctx or path, `first`'s other parameters but
// `depth`) while its path of names is shorter than `levels`; by path of names. Rows of one
// name under one parent (threads of one kind) are null: that path names none of them.
inline std::map<std::vector<std::string>, nlohmann::json> api_rows_by_names(Api& api, const std::string& endpoint,
                                                                           const Params& first, size_t levels) {
  std::map<std::vector<std::string>, nlohmann::json> out;
  std::vector<std::pair<Params, std::vector<std::string>>> todo{{first, {}}};
  while (!todo.empty()) {
    auto [q, names] = todo.back();
    todo.pop_back();
    const nlohmann::json j = nlohmann::json::parse(api_body(api, endpoint, q));
    for (const nlohmann::json& r : j[endpoint == "children" ? "children" : "rows"]) {
      std::vector<std::string> p = names;
      p.push_back(r["name"]);
      if (!out.emplace(p, r).second) out[p] = nullptr;
      if (r["hasChildren"] == true && p.size() < levels) {
        Params next = first;
        next.erase("depth");
        if (endpoint == "children") next["ctx"] = std::to_string(r["ctx"].get<uint32_t>());
        else next["path"] = r["path"];
        todo.push_back({next, p});
      }
    }
  }
  return out;
}

}  // namespace hpc::present
