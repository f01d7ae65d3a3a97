#include "common/bytes.hpp"

#include <gtest/gtest.h>

using namespace hpc;

TEST(ByteView, ReadsBothEndiannessesAndChecksBounds) {
  const uint8_t raw[] = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 'h', 'i', 0};
  ByteView v({raw, sizeof raw}, "x.bin");
  EXPECT_EQ(*v.le<uint32_t>(0, "a"), 0x04030201u);
  EXPECT_EQ(*v.be<uint32_t>(0, "a"), 0x01020304u);
  EXPECT_EQ(*v.be<uint64_t>(0, "a"), 0x0102030405060708ull);
  EXPECT_EQ(*v.cstr(8, sizeof raw, "s"), "hi");
  auto bad = v.le<uint64_t>(4, "field nValues");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "x.bin: offset 0x4: expected field nValues (8 bytes), but the file ends at 0xb");
  EXPECT_FALSE(v.cstr(8, 10, "name").ok());   // no NUL before limit
  EXPECT_FALSE(v.le<uint8_t>(~0ull, "huge").ok());  // no overflow on offset+len
}

TEST(ByteWriter, RoundTripsThroughView) {
  ByteWriter w;
  w.be<uint16_t>(0xbeef);
  w.le<uint32_t>(0xdeadbeef);
  w.le<double>(2.5);
  w.be<double>(-1.25);
  w.align(8);
  EXPECT_EQ(w.size() % 8, 0u);
  w.patch_le<uint16_t>(0, 0x1234);
  ByteView v(w.buffer(), "mem");
  EXPECT_EQ(*v.le<uint16_t>(0, ""), 0x1234);
  EXPECT_EQ(*v.le<uint32_t>(2, ""), 0xdeadbeefu);
  EXPECT_EQ(*v.le<double>(6, ""), 2.5);
  EXPECT_EQ(*v.be<double>(14, ""), -1.25);
  ByteCursor c(v, 2);
  EXPECT_EQ(*c.le<uint32_t>(""), 0xdeadbeefu);
  EXPECT_EQ(c.offset(), 6u);
}
