// Reads every conformance profile and trace, checks known content, and rewrites them.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "common/file.hpp"
#include "formats/hpcrun/hpcrun.hpp"
#include "formats/hpcrun/test_files.hpp"

namespace hpc::hpcrun {
namespace {

using testing::meas_dir;
using testing::meas_files;

std::vector<uint8_t> slurp(const std::filesystem::path& p) {
  auto f = MappedFile::open(p);
  EXPECT_TRUE(f.ok()) << f.status().message();
  if (!f.ok()) return {};
  return {f->bytes().begin(), f->bytes().end()};
}

TEST(HpcrunConformance, FindsFiles) {
  EXPECT_EQ(meas_files(".hpcrun").size(), 9u);
  EXPECT_EQ(meas_files(".hpctrace").size(), 9u);
}

TEST(HpcrunConformance, EveryProfileReadsAndRewritesIdentically) {
  for (auto& path : meas_files(".hpcrun")) {
    SCOPED_TRACE(path.string());
    auto p = read_profile(path);
    ASSERT_TRUE(p.ok()) << p.status().message();
    EXPECT_EQ(p->version, "04.00");
    ASSERT_NE(p->header_value("program-name"), nullptr);
    EXPECT_EQ(p->header_value("program-name")->rfind("testmeas-", 0), 0u);
    EXPECT_FALSE(p->load_modules.empty());
    EXPECT_FALSE(p->nodes.empty());
    EXPECT_FALSE(p->metrics.empty());
    EXPECT_EQ(p->id_kinds.size(), 8u);
    EXPECT_FALSE(p->id_tuple.empty());
    EXPECT_EQ(p->id_tuple[0].kind(), kIdNode);
    EXPECT_TRUE(p->value_order.empty());  // the reference writes values in node order
    // Every parent is a node of the profile (or 0 for the root).
    std::set<uint32_t> ids;
    for (auto& n : p->nodes) ids.insert(n.id);
    for (auto& n : p->nodes)
      if (n.parent_id) {
        EXPECT_TRUE(ids.count(n.parent_id)) << n.id;
      }

    auto bytes = encode_profile(*p);
    ASSERT_TRUE(bytes.ok()) << bytes.status().message();
    EXPECT_TRUE(*bytes == slurp(path)) << "rewrite differs from the original bytes";
    auto again = parse_profile(*bytes, "rewritten");
    ASSERT_TRUE(again.ok()) << again.status().message();
    EXPECT_TRUE(*again == *p);
  }
}

TEST(HpcrunConformance, SmallProfileContent) {
  auto p = read_profile(meas_dir() / "small.m/testmeas-small-000000-000-11ac0300-5560-0.hpcrun");
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(*p->header_value("program-name"), "testmeas-small");
  EXPECT_EQ(*p->header_value("process-id"), "5560");
  EXPECT_EQ(*p->header_value("trace-min-time"), "1714021984008891000");
  EXPECT_EQ(p->header.size(), 11u);
  ASSERT_EQ(p->metrics.size(), 1u);
  EXPECT_EQ(p->metrics[0].name, "CPUTIME (sec)");
  EXPECT_EQ(p->metrics[0].flags.type, kMetricRaw);
  EXPECT_EQ(p->metrics[0].flags.val_fmt, kValFmtReal);
  EXPECT_EQ(p->metrics[0].period, 1u);
  EXPECT_EQ(p->load_modules.size(), 17u);
  EXPECT_EQ(p->load_modules[0].id, 1);
  EXPECT_EQ(p->load_modules[0].flags, 1u);
  EXPECT_NE(p->load_modules[0].name.find("testmeas-small"), std::string::npos);
  ASSERT_EQ(p->nodes.size(), 13u);
  EXPECT_EQ(p->nodes[0].id, 12u);
  EXPECT_EQ(p->nodes[0].parent_id, 0u);
  EXPECT_EQ(p->nodes[0].lm_ip, 0x5e5072696d617279u);  // "^Primary" placeholder
  EXPECT_EQ(p->nodes[3].id, 22u);
  EXPECT_EQ(p->nodes[3].lm_id, 1);
  EXPECT_EQ(p->nodes[3].lm_ip, 0x119cu);
  size_t nvals = 0;
  double total = 0;
  for (auto& n : p->nodes)
    for (auto& v : n.values) {
      ++nvals;
      total += v.as_real();
    }
  EXPECT_EQ(nvals, 5u);
  EXPECT_GT(total, 0.5);
  EXPECT_LT(total, 5.0);
  ASSERT_EQ(p->id_tuple.size(), 3u);
  EXPECT_EQ(p->id_tuple[0].kind(), kIdNode);
  EXPECT_EQ(p->id_tuple[0].interpret(), 1);
  EXPECT_EQ(p->id_tuple[0].physical, 0x11ac0300u);
  EXPECT_EQ(p->id_tuple[1].kind(), kIdCore);
  EXPECT_EQ(p->id_tuple[2].kind(), kIdThread);
  EXPECT_EQ(p->id_kinds[0].name, "SUMMARY");
  EXPECT_EQ(p->id_kinds[7].name, "CORE");
}

TEST(HpcrunConformance, GpuProfilesHaveGpuMetricsAndStreams) {
  auto host = read_profile(meas_dir() /
                           "loops-cuda-nvidia-t.m/testmeas-loops-cuda-000000-000-590a0502-3293-0.hpcrun");
  ASSERT_TRUE(host.ok()) << host.status().message();
  ASSERT_EQ(host->metrics.size(), 63u);
  EXPECT_EQ(host->metrics[0].name, "GPUOP (sec)");
  EXPECT_EQ(host->metrics[0].flags.move2proc, 1);
  auto stream = read_profile(meas_dir() /
                             "loops-cuda-nvidia-t.m/testmeas-loops-cuda-000000-500-590a0502-3293-0.hpcrun");
  ASSERT_TRUE(stream.ok()) << stream.status().message();
  bool has_stream = false;
  for (auto& id : stream->id_tuple) has_stream |= id.kind() == kIdGpuStream;
  EXPECT_TRUE(has_stream);

  auto pc = read_profile(meas_dir() /
                         "loops-cuda-nvidiapc-t.m/testmeas-loops-cuda-000000-000-590a0502-3471-0.hpcrun");
  ASSERT_TRUE(pc.ok()) << pc.status().message();
  EXPECT_EQ(pc->metrics.size(), 93u);
  EXPECT_EQ(pc->metrics[0].name, "GINS:BLK_EXEC_CNT");
  EXPECT_EQ(pc->metrics[0].flags.val_fmt, kValFmtInt);
  EXPECT_EQ(pc->nodes.size(), 140u);
  size_t not_unwound = 0;
  for (auto& n : pc->nodes) not_unwound += !n.unwound;
  EXPECT_EQ(not_unwound, 131u);  // GPU PC samples are placed without an unwind
}

TEST(HpcrunConformance, EveryTraceReadsAndRewritesIdentically) {
  for (auto& path : meas_files(".hpctrace")) {
    SCOPED_TRACE(path.string());
    auto t = read_trace(path);
    ASSERT_TRUE(t.ok()) << t.status().message();
    EXPECT_EQ(t->version, "01.01");
    for (size_t i = 1; i < t->records.size(); ++i)
      EXPECT_LE(t->records[i - 1].time, t->records[i].time);
    auto bytes = encode_trace(*t);
    ASSERT_TRUE(bytes.ok()) << bytes.status().message();
    EXPECT_TRUE(*bytes == slurp(path));

    // Trace samples name nodes of the thread's profile.
    auto prof_path = path;
    prof_path.replace_extension(".hpcrun");
    auto p = read_profile(prof_path);
    ASSERT_TRUE(p.ok()) << p.status().message();
    std::set<uint32_t> ids;
    for (auto& n : p->nodes) ids.insert(n.id);
    for (auto& r : t->records) EXPECT_TRUE(ids.count(r.cct_id)) << r.cct_id;
  }
}

TEST(HpcrunConformance, SmallTraceContent) {
  auto t = read_trace(meas_dir() / "small.m/testmeas-small-000000-000-11ac0300-5560-0.hpctrace");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->flags, 0u);
  ASSERT_EQ(t->records.size(), 13u);
  EXPECT_EQ(t->records[0].time, 0x17c96de9c60f6a78u);
  EXPECT_EQ(t->records[0].cct_id, 0x13u);
  EXPECT_EQ(t->records[1].cct_id, 0x1bu);
}

TEST(HpcrunFiles, WriteAndReadBack) {
  auto dir = std::filesystem::path(HPC_BINARY_DIR) / "hpcrun_fmt_test_tmp";
  std::filesystem::create_directories(dir);
  auto src = meas_dir() / "small.m/testmeas-small-000000-000-11ac0300-5560-0";
  auto p = read_profile(src.string() + ".hpcrun");
  auto t = read_trace(src.string() + ".hpctrace");
  ASSERT_TRUE(p.ok() && t.ok());
  ASSERT_TRUE(write_profile(*p, dir / "x.hpcrun").ok());
  ASSERT_TRUE(write_trace(*t, dir / "x.hpctrace").ok());
  auto p2 = read_profile(dir / "x.hpcrun");
  auto t2 = read_trace(dir / "x.hpctrace");
  ASSERT_TRUE(p2.ok() && t2.ok());
  EXPECT_TRUE(*p2 == *p);
  EXPECT_TRUE(*t2 == *t);
  std::filesystem::remove_all(dir);
}

// parse_profile_flat with a SectionReuse: a load map byte-equal to the last one parsed keeps
// its modules and generation; another, or one after a damaged one, is parsed again, and
// every parse gives the load map parse_profile gives. The metric table likewise.
TEST(HpcrunFlat, SectionsReusedOnlyWhereTheirBytesAreTheLast) {
  auto src = read_profile(meas_dir() / "small.m/testmeas-small-000000-000-11ac0300-5560-0.hpcrun");
  ASSERT_TRUE(src.ok()) << src.status().message();
  ASSERT_FALSE(src->metrics.empty());
  Profile a = *src, b = *src, c = *src, d = *src;
  b.nodes.pop_back();  // other nodes, the same load map and metrics
  c.load_modules.push_back({99, "/lib/another.so", 0});
  d.metrics[0].description += " (another)";  // another metric table, the same load map
  auto ea = encode_profile(a), eb = encode_profile(b), ec = encode_profile(c), ed = encode_profile(d);
  ASSERT_TRUE(ea.ok() && eb.ok() && ec.ok() && ed.ok());
  // A copy of `bytes` whose string `text` claims `more` bytes more than it has (the length
  // byte before it, the last of a big-endian u32): its section no longer reads.
  auto lengthened = [](std::vector<uint8_t> bytes, const std::string& text, int more) {
    auto at = std::search(bytes.begin(), bytes.end(), text.begin(), text.end());
    EXPECT_NE(at, bytes.end()) << text;
    if (at != bytes.end()) *(at - 1) = uint8_t(*(at - 1) + more);
    return bytes;
  };
  const std::vector<uint8_t> bad = lengthened(*ea, a.load_modules.back().name, 1);  // a load module's name
  const std::vector<uint8_t> badMetrics = lengthened(*ea, a.metrics[0].name, 1);  // a metric's
  SectionReuse reuse;
  Profile p;
  CctView cct;
  Status values;
  auto parse = [&](const std::vector<uint8_t>& bytes) { return parse_profile_flat(bytes, "x", p, cct, values, &reuse); };
  ASSERT_TRUE(parse(*ea).ok());
  const uint64_t g1 = reuse.loadMap.generation, m1 = reuse.metrics.generation;
  EXPECT_NE(g1, 0u);
  EXPECT_NE(m1, 0u);
  EXPECT_EQ(p.load_modules, a.load_modules);
  EXPECT_EQ(p.metrics, a.metrics);
  const std::string* kept = &p.load_modules[0].name;
  const std::string* keptMetric = &p.metrics[0].name;
  ASSERT_TRUE(parse(*eb).ok());
  EXPECT_EQ(reuse.loadMap.generation, g1);
  EXPECT_EQ(reuse.metrics.generation, m1);
  EXPECT_EQ(&p.load_modules[0].name, kept);  // not parsed again
  EXPECT_EQ(&p.metrics[0].name, keptMetric);
  EXPECT_EQ(p.load_modules, b.load_modules);
  EXPECT_EQ(p.metrics, b.metrics);
  EXPECT_EQ(cct.count, b.nodes.size());
  ASSERT_TRUE(parse(*ec).ok());
  EXPECT_GT(reuse.loadMap.generation, g1);
  EXPECT_EQ(reuse.metrics.generation, m1);
  EXPECT_EQ(p.load_modules, c.load_modules);
  ASSERT_TRUE(parse(*ed).ok());
  EXPECT_GT(reuse.metrics.generation, m1);
  EXPECT_EQ(p.metrics, d.metrics);
  EXPECT_EQ(p.load_modules, d.load_modules);
  EXPECT_FALSE(parse(bad).ok());
  EXPECT_EQ(reuse.loadMap.generation, 0u);
  ASSERT_TRUE(parse(*ea).ok());
  EXPECT_NE(reuse.loadMap.generation, 0u);
  EXPECT_EQ(p.load_modules, a.load_modules);
  EXPECT_EQ(p.metrics, a.metrics);
  EXPECT_FALSE(parse(badMetrics).ok());
  EXPECT_EQ(reuse.metrics.generation, 0u);
  ASSERT_TRUE(parse(*eb).ok());
  EXPECT_NE(reuse.metrics.generation, 0u);
  EXPECT_EQ(p.metrics, b.metrics);
  // A file with another load map and metric table that fails before either is read (its
  // header cut short) leaves nothing kept: the next file with the earlier ones reads them.
  Profile e = *src;
  e.load_modules.push_back({98, "/lib/yet-another.so", 0});
  e.metrics[0].description += " (yet another)";
  auto ee = encode_profile(e);
  ASSERT_TRUE(ee.ok());
  // The program's name running past the header.
  EXPECT_FALSE(parse(lengthened(*ee, *e.header_value("program-name"), 100)).ok());
  ASSERT_TRUE(parse(*eb).ok());
  EXPECT_EQ(p.load_modules, b.load_modules);
  EXPECT_EQ(p.metrics, b.metrics);
}

TEST(HpcrunDump, PrintsProfileAndTrace) {
  auto src = meas_dir() / "small.m/testmeas-small-000000-000-11ac0300-5560-0";
  std::ostringstream prof, trace;
  ASSERT_TRUE(dump(src.string() + ".hpcrun", prof).ok());
  ASSERT_TRUE(dump(src.string() + ".hpctrace", trace).ok());
  EXPECT_NE(prof.str().find("program-name: testmeas-small"), std::string::npos);
  EXPECT_NE(prof.str().find("CPUTIME (sec)"), std::string::npos);
  EXPECT_NE(prof.str().find("[cct] 13 nodes, 5 non-zero values"), std::string::npos);
  EXPECT_NE(prof.str().find("\"^Primary\""), std::string::npos);
  EXPECT_NE(prof.str().find("[id tuple] NODE 0/11ac0300:l-local CORE 0/0:logical THREAD 0/0:logical"), std::string::npos);
  EXPECT_NE(trace.str().find("[records] 13"), std::string::npos);
  std::ostringstream none;
  EXPECT_FALSE(dump(meas_dir() / "small.m/original-path", none).ok());
}

}  // namespace
}  // namespace hpc::hpcrun
