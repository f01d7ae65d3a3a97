// The runtime's streaming encoder and the offline writer must produce the same bytes.
#include <gtest/gtest.h>

#include <cstring>

#include "formats/hpcrun/encode.hpp"
#include "formats/hpcrun/hpcrun.hpp"
#include "formats/hpcrun/test_files.hpp"

namespace hpc::hpcrun {
namespace {

// A fixed buffer, as the runtime would use: no allocation, fails when full.
struct FixedBuffer {
  uint8_t data[1 << 16];
  size_t size = 0;
  static bool write(void* ctx, const void* p, size_t n) {
    auto* b = static_cast<FixedBuffer*>(ctx);
    if (n > sizeof b->data - b->size) return false;
    std::memcpy(b->data + b->size, p, n);
    b->size += n;
    return true;
  }
  enc::Sink sink() { return {this, &write}; }
  std::vector<uint8_t> bytes() const { return {data, data + size}; }
};

uint64_t bits(double d) { return std::bit_cast<uint64_t>(d); }

Profile sample_profile() {
  Profile p;
  p.header = {{"program-name", "app"}, {"process-id", "42"}, {"job-id", ""}};
  p.load_modules = {{1, "/bin/app", 1}, {2, "/lib/libc.so.6", 0}};
  p.metrics.resize(2);
  p.metrics[0].name = p.metrics[0].description = "CPUTIME (sec)";
  p.metrics[0].period = 1;
  p.metrics[1].name = "CYCLES";
  p.metrics[1].description = "cycles";
  p.metrics[1].flags.val_fmt = kValFmtInt;
  p.metrics[1].flags.partner = 0x0102;  // little-endian in the file
  p.metrics[1].period = 1000003;
  p.metrics[1].is_frequency_metric = 1;
  p.metrics[1].threshold_mean = 2.5;
  p.metrics[1].num_samples = 77;
  CctNode root{12, 0, 0, 0x5e5072696d617279, 1, {}};
  CctNode main{20, 12, 1, 0x1000, 1, {{0, bits(0.25)}}};
  CctNode leaf{22, 20, 2, 0x2abc, 0, {{0, bits(1.5)}, {1, 123456}}};
  CctNode empty{24, 20, 1, 0x1010, 1, {}};
  p.nodes = {root, main, leaf, empty};
  for (auto& k : enc::kStandardIdKinds) p.id_kinds.push_back({k.kind, std::string(k.name.data, k.name.size)});
  p.id_tuple = {{(1 << 14) | kIdNode, 0xabcdef, 0}, {(3 << 14) | kIdThread, 0, 3}};
  return p;
}

// What the measurement runtime does: stream the same content through the encoder.
std::vector<uint8_t> encode_like_runtime(const Profile& p, FixedBuffer& buf) {
  enc::ProfileEncoder e(buf.sink());
  enc::NvPair nvs[8];
  for (size_t i = 0; i < p.header.size(); ++i)
    nvs[i] = {p.header[i].name.c_str(), p.header[i].value.c_str()};
  EXPECT_TRUE(e.header(nvs, static_cast<uint32_t>(p.header.size())));
  e.loadmap_begin(static_cast<uint32_t>(p.load_modules.size()));
  for (auto& lm : p.load_modules) e.loadmap_entry({lm.id, lm.name.c_str(), lm.flags});
  e.cct_begin(p.nodes.size());
  for (auto& n : p.nodes) e.cct_node({n.id, n.parent_id, n.lm_id, n.lm_ip, n.unwound});
  e.metrics_begin(static_cast<uint32_t>(p.metrics.size()));
  for (auto& m : p.metrics) {
    enc::MetricDescRec r;
    r.name = m.name.c_str();
    r.description = m.description.c_str();
    r.flags.val_fmt = m.flags.val_fmt;
    r.flags.partner = m.flags.partner;
    r.period = m.period;
    r.is_frequency_metric = m.is_frequency_metric;
    r.threshold_mean = m.threshold_mean;
    r.num_samples = m.num_samples;
    e.metric(r);
  }
  e.idtuple_dictionary();
  enc::IdRec ids[2] = {{(1 << 14) | kIdNode, 0xabcdef, 0}, {(3 << 14) | kIdThread, 0, 3}};
  e.sparse_begin(ids, 2, 3, 2);
  e.sparse_value_real(0.25, 0);  // node 20
  e.sparse_value_real(1.5, 0);   // node 22
  e.sparse_value(123456, 1);
  e.sparse_node(20, 0);
  e.sparse_node(22, 1);
  EXPECT_TRUE(e.finish());
  EXPECT_TRUE(e.ok());
  EXPECT_EQ(e.position(), buf.size);
  return buf.bytes();
}

TEST(HpcrunEncode, RuntimeEncoderMatchesOfflineWriter) {
  Profile p = sample_profile();
  auto offline = encode_profile(p);
  ASSERT_TRUE(offline.ok()) << offline.status().message();
  static FixedBuffer buf;
  buf.size = 0;
  EXPECT_TRUE(encode_like_runtime(p, buf) == *offline);
  auto back = parse_profile(*offline, "sample");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(*back == p);
  EXPECT_EQ(offline->size() % enc::kSectionAlign, enc::kFooterSize);
}

TEST(HpcrunEncode, TraceEncoderMatchesOfflineWriter) {
  Trace t;
  t.records = {{100, 5, 0}, {200, 7, 0}, {300, 5, 0}};
  FixedBuffer buf;
  ASSERT_TRUE(enc::write_trace_header(buf.sink(), 0));
  for (auto& r : t.records) ASSERT_TRUE(enc::write_trace_record(buf.sink(), 0, {r.time, r.cct_id, 0}));
  auto offline = encode_trace(t);
  ASSERT_TRUE(offline.ok());
  EXPECT_TRUE(buf.bytes() == *offline);
  EXPECT_EQ(offline->size(), 32u + 3 * 12);

  t.flags = kTraceDataCentric;
  t.records[1].metric_id = 9;
  auto dc = encode_trace(t);
  ASSERT_TRUE(dc.ok());
  EXPECT_EQ(dc->size(), 32u + 3 * 16);
  auto back = parse_trace(*dc, "dc");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(*back == t);

  Trace old;
  old.version = "01.00";
  old.records = {{1, 2, 0}};
  auto ob = encode_trace(old);
  ASSERT_TRUE(ob.ok());
  EXPECT_EQ(ob->size(), 24u + 12);
  auto oback = parse_trace(*ob, "old");
  ASSERT_TRUE(oback.ok()) << oback.status().message();
  EXPECT_TRUE(*oback == old);
}

TEST(HpcrunEncode, EncoderRejectsMisuse) {
  FixedBuffer buf;
  {
    enc::ProfileEncoder e(buf.sink());
    EXPECT_FALSE(e.loadmap_begin(0));  // header first
    EXPECT_EQ(e.error(), enc::ProfileEncoder::Error::OutOfOrder);
  }
  {
    enc::ProfileEncoder e(buf.sink());
    e.header(nullptr, 0);
    e.loadmap_begin(2);
    e.loadmap_entry({1, "a", 0});
    EXPECT_FALSE(e.cct_begin(0));  // one load module missing
    EXPECT_EQ(e.error(), enc::ProfileEncoder::Error::CountMismatch);
    EXPECT_FALSE(e.finish());  // sticky
  }
  {
    enc::ProfileEncoder e(buf.sink());
    e.header(nullptr, 0);
    e.loadmap_begin(0);
    e.cct_begin(0);
    e.metrics_begin(0);
    e.idtuple_dictionary();
    e.sparse_begin(nullptr, 0, 2, 2);
    e.sparse_value(1, 0);
    e.sparse_value(2, 0);
    e.sparse_node(1, 1);
    EXPECT_FALSE(e.sparse_node(2, 0));  // indices must not decrease
    EXPECT_EQ(e.error(), enc::ProfileEncoder::Error::BadValueIndex);
  }
  {
    FixedBuffer* tiny = &buf;
    tiny->size = sizeof tiny->data - 10;  // nearly full
    enc::ProfileEncoder e(tiny->sink());
    EXPECT_FALSE(e.header(nullptr, 0));
    EXPECT_EQ(e.error(), enc::ProfileEncoder::Error::SinkFailed);
  }
}

TEST(HpcrunEncode, WriterRejectsInconsistentModels) {
  Profile p = sample_profile();
  p.value_order = {22};  // node 20 has values but is not listed
  EXPECT_FALSE(encode_profile(p).ok());
  p.value_order = {22, 20};
  auto b = encode_profile(p);
  ASSERT_TRUE(b.ok()) << b.status().message();
  auto back = parse_profile(*b, "reordered");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(*back == p);
  p.value_order = {22, 20, 99};
  EXPECT_FALSE(encode_profile(p).ok());
  p.value_order.clear();
  p.version = "4.0";
  EXPECT_FALSE(encode_profile(p).ok());
}

}  // namespace
}  // namespace hpc::hpcrun
