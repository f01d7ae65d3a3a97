// Fuzz target: any request to hpcserver's API over the kit's loops-cputime-t.d (traces,
// threads, loops, inlined code), against small.d as a baseline; errors are replies, crashes
// and hangs are not. The input: an endpoint on its first line, then `key=value` lines.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "presentation/experiment.hpp"
#include "presentation/server/api.hpp"

using namespace hpc::present;

namespace {
struct Fixture {
  std::unique_ptr<Experiment> e, base;
  std::unique_ptr<Api> api, compare;
  Fixture() {
    const std::string dbase = std::string(HPC_SHARED_DIR) + "/conformance/dbase/";
    auto a = Experiment::open(dbase + "loops-cputime-t.d");
    auto b = Experiment::open(dbase + "small.d");
    if (!a.ok() || !b.ok()) __builtin_trap();
    e = std::move(*a), base = std::move(*b);
    api = std::make_unique<Api>(*e);
    compare = std::make_unique<Api>(*e, base.get());
  }
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture f;
  const std::string text(reinterpret_cast<const char*>(data), size);
  size_t at = text.find('\n');
  const std::string endpoint = text.substr(0, at);
  Params q;
  while (at != std::string::npos && at < text.size()) {
    const size_t end = text.find('\n', at + 1);
    const std::string line = text.substr(at + 1, end == std::string::npos ? std::string::npos : end - at - 1);
    if (const size_t eq = line.find('='); eq != std::string::npos) q[line.substr(0, eq)] = line.substr(eq + 1);
    at = end;
  }
  for (Api* api : {f.api.get(), f.compare.get()}) {
    Reply r = api->handle(endpoint, q);
    size_t bytes = r.body.size();
    if (r.stream) {
      r.stream([&](std::string_view s) {
        bytes += s.size();
        return bytes < (64u << 20);  // a client that goes away past 64 MiB
      });
      api->done();
    }
  }
  return 0;
}
