// Damaged inputs: every truncation and bit flip yields a clean error or a valid parse
// (which then survives a rewrite), never a crash, hang or huge allocation.
#include <gtest/gtest.h>

#include <random>

#include "common/file.hpp"
#include "formats/hpcrun/encode.hpp"
#include "formats/hpcrun/hpcrun.hpp"
#include "formats/hpcrun/test_files.hpp"

namespace hpc::hpcrun {
namespace {

constexpr int kMutationsPerFile = 300;

struct Tally {
  int errors = 0, parses = 0;
};

void check_profile(std::span<const uint8_t> b, Tally& t) {
  auto p = parse_profile(b, "mutant.hpcrun");
  if (!p.ok()) {
    ++t.errors;
    EXPECT_NE(p.status().message().find("mutant.hpcrun"), std::string::npos);
    return;
  }
  ++t.parses;
  auto again = encode_profile(*p);
  ASSERT_TRUE(again.ok()) << again.status().message();
  auto back = parse_profile(*again, "rewritten");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(*back == *p);
}

void check_trace(std::span<const uint8_t> b, Tally& t) {
  auto tr = parse_trace(b, "mutant.hpctrace");
  if (!tr.ok()) {
    ++t.errors;
    EXPECT_NE(tr.status().message().find("mutant.hpctrace"), std::string::npos);
    return;
  }
  ++t.parses;
  auto again = encode_trace(*tr);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_TRUE(std::equal(again->begin(), again->end(), b.begin(), b.end()));
}

// Mutations aimed where they matter: anywhere, the footer, or a section's first bytes
// (where the counts and lengths live).
template <typename Check>
Tally mutate(const std::vector<uint8_t>& orig, uint64_t seed, Check check) {
  std::mt19937_64 rng(seed);
  Tally t;
  std::vector<uint32_t> hot;  // offsets of counts: section starts from the footer, if any
  if (orig.size() >= enc::kFooterSize) {
    size_t fo = orig.size() - enc::kFooterSize;
    for (int i = 0; i < 12; ++i) {
      uint64_t v = 0;
      for (int k = 0; k < 8; ++k) v = (v << 8) | orig[fo + 8 * i + k];
      if (v < orig.size()) hot.push_back(static_cast<uint32_t>(v));
    }
  }
  for (int i = 0; i < kMutationsPerFile; ++i) {
    std::vector<uint8_t> b = orig;
    switch (rng() % 5) {
      case 0:  // truncate
        b.resize(rng() % b.size());
        break;
      case 1:  // flip a bit anywhere
        b[rng() % b.size()] ^= uint8_t(1u << (rng() % 8));
        break;
      case 2: {  // flip a bit in the last 112 bytes (the profile footer)
        size_t n = std::min<size_t>(b.size(), enc::kFooterSize);
        b[b.size() - 1 - rng() % n] ^= uint8_t(1u << (rng() % 8));
        break;
      }
      case 3: {  // smash a byte near a section start (counts, lengths)
        size_t at = hot.empty() ? rng() % b.size() : hot[rng() % hot.size()] + rng() % 64;
        if (at < b.size()) b[at] = static_cast<uint8_t>(rng());
        break;
      }
      default: {  // a run of 0xff (huge counts) at a random place
        size_t at = rng() % b.size();
        for (size_t k = at; k < b.size() && k < at + 4; ++k) b[k] = 0xff;
        break;
      }
    }
    check(std::span<const uint8_t>(b), t);
  }
  return t;
}

std::vector<uint8_t> load(const std::filesystem::path& p) {
  auto f = MappedFile::open(p);
  if (!f.ok()) return {};
  return {f->bytes().begin(), f->bytes().end()};
}

TEST(HpcrunCorruption, ProfilesNeverCrash) {
  int errors = 0, parses = 0;
  uint64_t seed = 1;
  for (auto& path : testing::meas_files(".hpcrun")) {
    SCOPED_TRACE(path.string());
    auto orig = load(path);
    ASSERT_FALSE(orig.empty());
    Tally t = mutate(orig, seed++, check_profile);
    errors += t.errors;
    parses += t.parses;
  }
  // Both outcomes occur: damage to counts is caught, damage to padding is harmless.
  EXPECT_GT(errors, 100);
  EXPECT_GT(parses, 100);
  std::printf("profiles: %d mutants rejected, %d parsed\n", errors, parses);
}

TEST(HpcrunCorruption, TracesNeverCrash) {
  int errors = 0, parses = 0;
  uint64_t seed = 1000;
  for (auto& path : testing::meas_files(".hpctrace")) {
    SCOPED_TRACE(path.string());
    auto orig = load(path);
    ASSERT_FALSE(orig.empty());
    Tally t = mutate(orig, seed++, check_trace);
    errors += t.errors;
    parses += t.parses;
  }
  EXPECT_GT(errors, 100);
  EXPECT_GT(parses, 100);
  std::printf("traces: %d mutants rejected, %d parsed\n", errors, parses);
}

TEST(HpcrunCorruption, EmptyAndTinyInputs) {
  for (size_t n : {0, 1, 17, 24, 31, 32, 111, 112, 136}) {
    std::vector<uint8_t> b(n, 0);
    EXPECT_FALSE(parse_profile(b, "tiny").ok());
    if (n >= 18) std::memcpy(b.data(), enc::kTraceMagic, 18);
    auto t = parse_trace(b, "tiny");
    EXPECT_FALSE(t.ok());
  }
}

TEST(HpcrunCorruption, ErrorsNameFileOffsetAndExpectation) {
  auto orig = load(testing::meas_dir() / "small.m/testmeas-small-000000-000-11ac0300-5560-0.hpcrun");
  ASSERT_FALSE(orig.empty());
  auto b = orig;
  b[0x400] = 0x7f;  // load module count: huge
  auto p = parse_profile(b, "x.hpcrun");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message().rfind("x.hpcrun: offset 0x404: load module count", 0), 0u)
      << p.status().message();
  b = orig;
  b.resize(b.size() - 1);
  p = parse_profile(b, "x.hpcrun");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("footer"), std::string::npos) << p.status().message();
}

// A trace cut short (a crash while it was written): view_trace keeps the whole records before
// the cut and names the trailing bytes; parse_trace, which promises the whole file, refuses.
TEST(HpcrunCorruption, TraceCutShortKeepsItsWholeRecords) {
  Trace t;
  t.version = "01.01";
  for (uint32_t k = 0; k < 5; ++k) t.records.push_back({1000 + k, 10 + k, 0});
  auto bytes = encode_trace(t);
  ASSERT_TRUE(bytes.ok());
  std::vector<uint8_t> cut = *bytes;
  cut.resize(cut.size() - 5);  // the last record loses 5 of its 12 bytes
  TraceView view;
  ASSERT_TRUE(view_trace(cut, "x.hpctrace", view).ok());
  EXPECT_EQ(view.count, 4u);
  EXPECT_EQ(view.trailing, 7u);
  EXPECT_EQ(view.record(3).cct_id, 13u);
  EXPECT_EQ(view.trailingError.message(),
            "x.hpctrace: offset 0x50: expected whole 12-byte trace records, found 7 trailing bytes (truncated file?)");
  auto parsed = parse_trace(cut, "x.hpctrace");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(), view.trailingError.message());
  // Whole: nothing trailing, and the view of a later whole trace forgets the cut one's error.
  ASSERT_TRUE(view_trace(*bytes, "y.hpctrace", view).ok());
  EXPECT_EQ(view.count, 5u);
  EXPECT_EQ(view.trailing, 0u);
  EXPECT_TRUE(view.trailingError.ok());
}

}  // namespace
}  // namespace hpc::hpcrun
