// Damaged inputs: truncations, bit flips and hostile bytes yield a clean error naming the
// input or a valid parse (which then survives a rewrite), never a crash or hang.
#include <gtest/gtest.h>

#include <random>

#include "common/file.hpp"
#include "formats/structfile/structfile.hpp"
#include "formats/structfile/test_files.hpp"

namespace hpc::structfile {
namespace {

constexpr int kMutationsPerFile = 300;

struct Tally {
  int errors = 0, parses = 0;
};

void check(const std::string& bytes, Tally& t) {
  auto s = parse_model(bytes, "mutant.hpcstruct");
  if (!s.ok()) {
    ++t.errors;
    EXPECT_EQ(s.status().message().rfind("mutant.hpcstruct:", 0), 0u) << s.status().message();
    return;
  }
  ++t.parses;
  std::string again = to_string(*s);
  ASSERT_FALSE(again.empty());
  auto back = parse_model(again, "rewritten");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(*back == *s);
}

Tally mutate(const std::string& orig, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Tally t;
  // Half the mutations land after the DTD, where the elements are.
  size_t body = orig.find("]>");
  if (body == std::string::npos) body = 0;
  auto pos = [&](bool in_body) {
    size_t lo = in_body ? body : 0;
    return lo + size_t(rng() % (orig.size() - lo));
  };
  static const char hostile[] = "<>&\"'\0{}[)-x0/=;# \n\xff\xc3";
  for (int m = 0; m < kMutationsPerFile; ++m) {
    std::string b = orig;
    bool in_body = m % 2 == 0;
    switch (m % 5) {
      case 0: b.resize(pos(in_body)); break;
      case 1:
      case 2: {
        int flips = 1 + int(rng() % 4);
        for (int k = 0; k < flips; ++k) b[pos(in_body)] ^= char(1u << (rng() % 8));
        break;
      }
      case 3: b[pos(in_body)] = hostile[rng() % (sizeof hostile - 1)]; break;
      case 4: {
        size_t at = pos(in_body);
        b.erase(at, size_t(rng() % 64));
        break;
      }
    }
    check(b, t);
    if (::testing::Test::HasFatalFailure()) return t;
  }
  return t;
}

TEST(StructFileCorrupt, MutationsGiveErrorsOrValidParses) {
  uint64_t seed = 12345;
  Tally total;
  for (const auto& f : testing::conformance_files()) {
    auto text = read_text_file(f);
    ASSERT_TRUE(text.ok());
    Tally t = mutate(*text, seed++);
    ASSERT_FALSE(HasFatalFailure()) << f;
    total.errors += t.errors;
    total.parses += t.parses;
  }
  EXPECT_GT(total.errors, 0);
  EXPECT_GT(total.parses, 0);
  std::printf("mutants: %d errors, %d valid parses\n", total.errors, total.parses);
}

TEST(StructFileCorrupt, EntityExpansionIsBounded) {
  std::string bomb = "<?xml version=\"1.0\"?>\n<!DOCTYPE HPCToolkitStructure [\n"
                     "<!ENTITY a \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\">\n";
  std::string prev = "a";
  for (char c = 'b'; c <= 'k'; ++c) {
    bomb += std::string("<!ENTITY ") + c + " \"";
    for (int i = 0; i < 10; ++i) bomb += "&" + prev + ";";
    bomb += "\">\n";
    prev = std::string(1, c);
  }
  bomb += "]>\n<HPCToolkitStructure i=\"0\" version=\"4.9\" n=\"&k;\"/>\n";
  auto s = parse_model(bomb, "bomb");
  EXPECT_FALSE(s.ok());
}

}  // namespace
}  // namespace hpc::structfile
