#include "formats/structfile/structfile.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/file.hpp"
#include "formats/structfile/test_files.hpp"

// Designated initializers name only the attributes a test element carries.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace hpc::structfile {
namespace {

namespace fs = std::filesystem;
using testing::conformance_files;

std::string slurp(const fs::path& p) {
  auto t = read_text_file(p);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? *t : std::string();
}

std::string body(const std::string& text) {  // everything after the DTD
  size_t at = text.find("]>\n");
  return at == std::string::npos ? text : text.substr(at + 3);
}

fs::path temp_dir() {
  fs::path d = fs::path(HPC_BINARY_DIR) / "structfile_test_tmp";
  fs::create_directories(d);
  return d;
}

size_t count(const Scope& s) {
  size_t n = 1;
  for (const auto& c : s.children) n += count(c);
  return n;
}

TEST(StructFile, ConformanceFilesExist) { EXPECT_GE(conformance_files().size(), 60u); }

TEST(StructFile, ReadsEveryConformanceFile) {
  for (const auto& f : conformance_files()) {
    auto s = load(f);
    ASSERT_TRUE(s.ok()) << s.status().message();
    EXPECT_EQ(s->kind, Kind::Root);
    EXPECT_EQ(s->version, "4.9");
    ASSERT_EQ(s->children.size(), 1u) << f;
    EXPECT_GT(count(*s), 3u);
  }
}

// Our writer reproduces the reference's text after the DTD byte for byte, and the whole
// file for those written by the reference version whose DTD we carry.
TEST(StructFile, RewriteIsByteIdenticalAfterHeader) {
  int whole = 0;
  for (const auto& f : conformance_files()) {
    std::string orig = slurp(f);
    auto s = parse_model(orig, f.string());
    ASSERT_TRUE(s.ok()) << s.status().message();
    std::string ours = to_string(*s);
    EXPECT_EQ(body(ours), body(orig)) << f;
    if (ours == orig) ++whole;
    auto again = parse_model(ours, "rewritten");
    ASSERT_TRUE(again.ok()) << again.status().message();
    EXPECT_TRUE(*again == *s) << f;
  }
  EXPECT_GE(whole, 12);
}

TEST(StructFile, StreamingReadEqualsInMemoryParse) {
  for (const auto& f : conformance_files()) {
    auto a = load(f);
    auto b = parse_model(slurp(f), f.string());
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_TRUE(*a == *b) << f;
  }
}

// The reference checker's canonical comparison (hpctesttool test struct-compare).
TEST(StructFile, ReferenceCheckerAcceptsOurRewrite) {
  if (std::system("/usr/bin/python3 -c 'import click, ruamel.yaml, pyparsing' 2>/dev/null") != 0)
    GTEST_SKIP() << "python3 with click, ruamel.yaml, pyparsing needed";
  fs::path dir = temp_dir();
  int n = 0;
  for (const auto& f : conformance_files()) {
    auto s = load(f);
    ASSERT_TRUE(s.ok());
    fs::path ours = dir / ("ours-" + std::to_string(n++) + ".hpcstruct");
    ASSERT_TRUE(write(ours, *s).ok());
    std::string cmd = "cd '" + dir.string() + "' && PYTHONPATH='" HPC_SHARED_DIR
                      "/conformance' /usr/bin/python3 -m hpctesttool test struct-compare '" +
                      ours.string() + "' '" + f.string() + "' >/dev/null 2>&1";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << f;
    fs::remove(ours);
  }
}

TEST(StructFile, WriteAssignsNothingImplicitlyAndIsAtomic) {
  Structure s;
  s.kind = Kind::Root;
  s.version = "4.9";
  Scope lm{.kind = Kind::LoadModule, .name = "/bin/x"};
  lm.vranges = VRanges{};
  Scope f{.kind = Kind::File, .name = "a&b<c>\"d\".c"};
  Scope p{.kind = Kind::Procedure, .name = "f\tg\nh", .link_name = "_Zf", .line = 3};
  p.vranges = VRanges{{0, 1}, {0x10, 0x20}};
  Scope st{.kind = Kind::Statement, .line = 4};
  st.vranges = VRanges{{0x10, 0x20}};
  Scope c{.kind = Kind::Call, .line = 5, .target = 0x3260, .device = "NVIDIA sm_75"};
  c.vranges = VRanges{{0x18, 0x20}};
  p.children = {st, c};
  f.children = {p};
  lm.children = {f};
  s.children = {lm};
  assign_ids(s);
  EXPECT_EQ(s.children[0].id, 2u);
  EXPECT_EQ(s.children[0].children[0].children[0].children[1].id, 6u);

  std::string text = to_string(s);
  EXPECT_NE(text.find("<HPCToolkitStructure i=\"0\" version=\"4.9\">\n<LM i=\"2\" n=\"/bin/x\" "
                      "has-calls=\"0\" v=\"{}\">\n<F i=\"3\" n=\"a&amp;b&lt;c&gt;&quot;d&quot;.c\">"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("<P i=\"4\" n=\"f&#x9;g&#xA;h\" ln=\"_Zf\" l=\"3\" v=\"{[0-0x1) [0x10-0x20)}\">"),
            std::string::npos);
  EXPECT_NE(text.find("<C i=\"6\" l=\"5\" v=\"{[0x18-0x20)}\" t=\"0x3260\" d=\"NVIDIA sm_75\"/>\n</P>"),
            std::string::npos);
  auto back = parse_model(text, "t");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(*back == s);

  fs::path out = temp_dir() / "atomic.hpcstruct";
  fs::remove(out);
  {
    auto w = Writer::create(out);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->open(s).ok());
    EXPECT_FALSE((*w)->finish().ok());  // root still open
  }
  EXPECT_FALSE(fs::exists(out));
  ASSERT_TRUE(write(out, s).ok());
  auto loaded = load(out);
  ASSERT_TRUE(loaded.ok());
  EXPECT_TRUE(*loaded == s);
}

TEST(StructFile, WriterRejectsWhatTheDtdForbids) {
  std::ostringstream os;
  Writer w(os);
  Scope root{.kind = Kind::Root};
  EXPECT_FALSE(w.open(Scope{.kind = Kind::LoadModule, .name = "x"}).ok());  // not a root
  ASSERT_TRUE(w.open(root).ok());
  EXPECT_FALSE(w.open(Scope{.kind = Kind::Statement, .line = 1}).ok());  // S in root
  EXPECT_FALSE(w.open(Scope{.kind = Kind::LoadModule}).ok());           // LM without n
  ASSERT_TRUE(w.open(Scope{.kind = Kind::LoadModule, .name = "x"}).ok());
  ASSERT_TRUE(w.open(Scope{.kind = Kind::File, .name = "f"}).ok());
  EXPECT_FALSE(w.open(Scope{.kind = Kind::Loop}).ok());  // L without l
  ASSERT_TRUE(w.close().ok());
  ASSERT_TRUE(w.close().ok());
  ASSERT_TRUE(w.close().ok());
  EXPECT_FALSE(w.close().ok());
  EXPECT_TRUE(w.finish().ok());
  EXPECT_TRUE(parse_model(os.str(), "x").ok());
}

TEST(StructFile, VRanges) {
  EXPECT_EQ(format_vranges({}), "{}");
  EXPECT_EQ(format_vranges({{0, 0x1f}, {0x20, 0x30}}), "{[0-0x1f) [0x20-0x30)}");
  auto r = parse_vranges("{[0x10-0x20)  [0-0x1)}");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (VRanges{{0x10, 0x20}, {0, 1}}));
  for (const char* bad : {"", "{", "[0x1-0x2)", "{[0x1-0x2)", "{[0x2-0x1)}", "{[0x1 0x2)}",
                          "{[0x1-0x2)[0x3-0x4)}", "{[0xg-0x2)}", "{[0x-0x2)}",
                          "{[0x10000000000000000-0x1)}"})
    EXPECT_FALSE(parse_vranges(bad).ok()) << bad;
}

std::string error_of(const std::string& text) {
  auto s = parse_model(text, "in.hpcstruct");
  return s.ok() ? std::string("(parsed)") : s.status().message();
}

TEST(StructFile, ErrorsNameFileLineColumnAndProblem) {
  const std::string head = "<?xml version=\"1.0\"?>\n<HPCToolkitStructure i=\"0\" version=\"4.9\">\n";
  EXPECT_EQ(error_of(head + "<LM i=\"2\" n=\"x\" has-calls=\"0\">\n<S i=\"3\" l=\"1\"/>\n"),
            "in.hpcstruct:4:1: <S> is not allowed inside <LM>");
  EXPECT_EQ(error_of(head + "<LM i=\"2\" n=\"x\">"),
            "in.hpcstruct:3:1: <LM> lacks attribute has-calls");
  EXPECT_EQ(error_of(head + "<LM i=\"2\" n=\"x\" has-calls=\"0\" q=\"1\">"),
            "in.hpcstruct:3:1: attribute q is not allowed on <LM>");
  EXPECT_EQ(error_of(head + "<LM i=\"x2\" n=\"x\" has-calls=\"0\">"),
            "in.hpcstruct:3:1: attribute i: not a decimal number");
  EXPECT_NE(error_of(head + "<LM i=\"2\" n=\"x\" has-calls=\"0\" v=\"{[1-\">")
                .find("in.hpcstruct:3:1: attribute v: bad address range set"),
            std::string::npos);
  EXPECT_EQ(error_of(head + "<Q/>"), "in.hpcstruct:3:1: unknown element <Q>");
  EXPECT_EQ(error_of(head + "hello"), "in.hpcstruct:3:1: unexpected text");
  EXPECT_EQ(error_of(head + "<LM i=\"2\" n=\"x\" has-calls=\"0\">\n</F>"),
            "in.hpcstruct:4:3: mismatched tag");
  EXPECT_EQ(error_of(head), "in.hpcstruct:3:1: no element found");
  EXPECT_EQ(error_of(""), "in.hpcstruct:1:1: no element found");
  EXPECT_EQ(error_of("<LM i=\"2\" n=\"x\" has-calls=\"0\"/>"),
            "in.hpcstruct:1:1: <LM> where <HPCToolkitStructure> was expected");
  EXPECT_EQ(error_of("<HPCToolkitStructure i=\"0\"/>"),
            "in.hpcstruct:1:1: <HPCToolkitStructure> lacks attribute version");

  std::string deep = head + "<LM i=\"2\" n=\"x\" has-calls=\"0\">\n<P i=\"3\" n=\"p\">\n";
  for (int i = 0; i < 5000; ++i) deep += "<L i=\"1\" l=\"1\">";
  EXPECT_NE(error_of(deep).find("nested too deeply"), std::string::npos);

  auto missing = load("/nonexistent/x.hpcstruct");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "/nonexistent/x.hpcstruct: cannot open");
}

TEST(StructFile, VisitorCanStopTheParse) {
  struct Stop : Visitor {
    int seen = 0;
    Status enter(const Scope& s, int) override {
      return ++seen == 3 ? Status::error("enough") : Status();
    }
  } v;
  auto files = conformance_files();
  ASSERT_FALSE(files.empty());
  Status st = read(files.front(), v);
  EXPECT_EQ(st.message(), "enough");
  EXPECT_EQ(v.seen, 3);
}

TEST(StructFile, AddressIndexFindsInnermostScope) {
  auto s = load(fs::path(HPC_SHARED_DIR) / "conformance/meas/small.m/structs/testmeas-small.hpcstruct");
  ASSERT_TRUE(s.ok());
  AddressIndex index(s->children.at(0));
  const Scope* in_loop = index.find(0x1150);
  ASSERT_NE(in_loop, nullptr);
  EXPECT_EQ(in_loop->kind, Kind::Statement);
  EXPECT_EQ(in_loop->line, 3u);
  auto path = index.path(0x1150);
  ASSERT_EQ(path.size(), 4u);
  EXPECT_EQ(path[0]->kind, Kind::File);
  EXPECT_EQ(path[1]->name, "spinsleep");
  EXPECT_EQ(path[2]->kind, Kind::Loop);
  EXPECT_EQ(path[3], in_loop);
  // The procedure's entry marker [0x1129, 0x112a) loses to the deeper statement.
  EXPECT_EQ(index.find(0x1129)->line, 1u);
  EXPECT_EQ(index.find(0x1169)->line, 3u);  // loop head marker inside its statement
  EXPECT_EQ(index.path(0x11f0).at(1)->name, "__libc_csu_init");
  EXPECT_EQ(index.find(0xfff), nullptr);
  EXPECT_EQ(index.find(0x1235), nullptr);
  EXPECT_EQ(index.find(0x1225), nullptr);  // gap between __libc_csu_fini and _fini
}

TEST(StructFile, AddressIndexOverlapsAndInlining) {
  Scope lm{.kind = Kind::LoadModule, .name = "m"};
  Scope p{.kind = Kind::Procedure, .name = "p"};
  p.vranges = VRanges{{0x100, 0x200}};
  Scope a{.kind = Kind::Alien, .name = "inl"};
  Scope s1{.kind = Kind::Statement, .line = 1};
  s1.vranges = VRanges{{0x110, 0x120}, {0x180, 0x190}};
  a.children = {s1};
  Scope s2{.kind = Kind::Statement, .line = 2};
  s2.vranges = VRanges{{0x118, 0x130}};  // overlaps s1 at a lower depth: s1 wins there
  p.children = {a, s2};
  lm.children = {p};
  AddressIndex index(lm);
  EXPECT_EQ(index.find(0x100), &lm.children[0]);
  EXPECT_EQ(index.find(0x118)->line, 1u);
  EXPECT_EQ(index.find(0x120)->line, 2u);
  EXPECT_EQ(index.find(0x185)->line, 1u);
  EXPECT_EQ(index.path(0x185).size(), 3u);
  EXPECT_EQ(index.find(0x1ff), &lm.children[0]);
  EXPECT_EQ(index.find(0x200), nullptr);
  for (const auto& f : conformance_files()) {
    auto st = load(f);
    ASSERT_TRUE(st.ok());
    AddressIndex big(st->children.at(0));
    EXPECT_GT(big.segments(), 0u) << f;
  }
}

TEST(StructFile, DumpIsAnIndentedTree) {
  std::ostringstream os;
  ASSERT_TRUE(dump(fs::path(HPC_SHARED_DIR) / "conformance/meas/small.m/structs/testmeas-small.hpcstruct", os).ok());
  std::string d = os.str();
  EXPECT_EQ(d.rfind("HPCToolkitStructure i=0 version=4.9 n=\"\"\n", 0), 0u) << d.substr(0, 200);
  EXPECT_NE(d.find("\n      P i=4 n=\"spinsleep\" l=1 v={[0x1129-0x112a)}\n"), std::string::npos);
  EXPECT_NE(d.find("\n          S i=10 l=3 v={[0x1147-0x1172)}\n"), std::string::npos);
  std::ostringstream bad;
  EXPECT_FALSE(dump("/nonexistent", bad).ok());
}

}  // namespace
}  // namespace hpc::structfile

namespace hpc::structfile {
namespace {

namespace fs = std::filesystem;

// A unit's own document drops the file's DTD only where nothing but an XML declaration
// comes before it: a "<!DOCTYPE" inside a comment (or a processing instruction) before the
// real one is no DTD to drop (found by the fuzzer: the unit documents did not parse).
TEST(StructFile, UnitPrologDropsOnlyTheRealDtd) {
  const std::string body = R"(<!DOCTYPE HPCToolkitStructure [
<!ELEMENT HPCToolkitStructure (LM)*>
]>
<HPCToolkitStructure i="0" version="4.9" n="">
<LM i="2" n="/bin/x" has-calls="0" v="{}">
<F i="3" n="x.c">
<P i="4" n="f" l="1" v="{[0x10-0x11)}">
<S i="5" l="2" v="{[0x10-0x20)}"/>
</P>
</F>
</LM>
</HPCToolkitStructure>
)";
  const std::string decl = "<?xml version=\"1.0\"?>\n";
  const fs::path file = fs::temp_directory_path() / ("hpc-unit-prolog-" + std::to_string(::getpid()) + ".xml");
  for (const std::string& before : {std::string(), std::string("<!-- <!DOCTYPE fake [ ]> -->\n"),
                                    std::string("<?x <!DOCTYPE fake ?>\n")}) {
    const std::string text = decl + before + body;
    {
      std::ofstream f(file, std::ios::binary | std::ios::trunc);
      f << text;
    }
    auto index = index_units(file);
    ASSERT_TRUE(index.ok()) << index.status().message();
    ASSERT_EQ(index->units.size(), 1u);
    const std::string prolog = unit_prolog(std::string_view(text).substr(0, index->prolog_end), *index);
    // Dropped where it is the real one and nothing else precedes it, kept otherwise.
    if (before.empty()) EXPECT_EQ(prolog.find("<!DOCTYPE"), std::string::npos) << prolog;
    else EXPECT_EQ(prolog, text.substr(0, index->prolog_end));
    ReadBytes read = [&](uint64_t offset, uint64_t length, std::string& out) {
      out.append(text, offset, length);
      return hpc::Status();
    };
    const uint32_t first = 0;
    auto doc = units_document(read, *index, prolog, std::span(&first, 1));
    ASSERT_TRUE(doc.ok());
    auto unit = parse_model(*doc, "unit");
    ASSERT_TRUE(unit.ok()) << unit.status().message() << "\n" << *doc;
    ASSERT_EQ(unit->children.size(), 1u);
    ASSERT_EQ(unit->children[0].children.size(), 1u);
    ASSERT_EQ(unit->children[0].children[0].children.size(), 1u);
    EXPECT_EQ(unit->children[0].children[0].children[0].name, std::optional<std::string>("f"));
  }
  fs::remove(file);
}


// A large file's index is made from chunks parsed at once, each beginning at an F (with the
// prolog and the LM it is in before it, the end tags it lacks after): the very index of the
// one pass, on every conformance file cut into chunks of 2 KB and on a file of two LMs
// whose chunks begin in either. A damaged copy the one pass refuses is never indexed in
// chunks; one it accepts gets its index or none.
TEST(StructFile, IndexInChunksIsTheOnePassIndex) {
  ForEachIndex each = [](size_t n, const std::function<void(size_t)>& f) {
    for (size_t i = n; i-- > 0;) f(i);  // the last first: no chunk may lean on one before it
  };
  std::vector<fs::path> files = conformance_files();
  // Two modules, the second begun inside a chunk, one with a '>' in a quoted name.
  const fs::path two = fs::temp_directory_path() / ("hpc-chunks-" + std::to_string(::getpid()) + ".xml");
  {
    std::ofstream f(two, std::ios::binary | std::ios::trunc);
    f << "<?xml version=\"1.0\"?>\n<HPCToolkitStructure i=\"0\" version=\"4.9\" n=\"\">\n";
    uint64_t id = 1, addr = 0x1000;
    for (const char* lm : {"/bin/a>b", "/lib/c"}) {
      f << "<LM i=\"" << id++ << "\" n=\"" << (std::string(lm) == "/bin/a>b" ? "/bin/a&gt;b" : lm)
        << "\" has-calls=\"0\" v=\"{}\">\n";
      for (int file = 0; file < 40; ++file) {
        f << "<F i=\"" << id++ << "\" n=\"f" << file << ".c\">\n";
        for (int p = 0; p < 3; ++p, addr += 0x40, id += 2)
          f << "<P i=\"" << id << "\" n=\"p" << p << "\" l=\"1\" v=\"{[0x" << std::hex << addr << "-0x" << addr + 1
            << ")}\">\n<S i=\"" << std::dec << id + 1 << "\" l=\"2\" v=\"{[0x" << std::hex << addr << "-0x"
            << addr + 0x40 << ")}\"/>\n</P>\n" << std::dec;
        f << "</F>\n";
      }
      f << "</LM>\n";
    }
    f << "</HPCToolkitStructure>\n";
  }
  files.push_back(two);
  size_t chunked = 0;
  for (const fs::path& file : files) {
    auto whole = index_units(file);
    ASSERT_TRUE(whole.ok()) << whole.status().message();
    auto parts = index_units_in_chunks(file, 2048, each);
    if (!parts) continue;  // too small, or no F
    ++chunked;
    EXPECT_TRUE(*whole == *parts) << file;
    auto viaIndexUnits = index_units(file, 2048, each);
    ASSERT_TRUE(viaIndexUnits.ok());
    EXPECT_TRUE(*whole == *viaIndexUnits) << file;
  }
  EXPECT_GE(chunked, 10u);
  // Damaged copies of the two-module file.
  std::string text;
  {
    std::ifstream f(two, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    text = ss.str();
  }
  const fs::path bad = two.string() + ".bad";
  std::vector<std::string> damaged;
  for (size_t cut : {text.size() / 3, text.size() / 2, text.size() - 30}) damaged.push_back(text.substr(0, cut));
  auto replaced = [&](std::string_view from, std::string_view to, size_t nth) {
    std::string t = text;
    size_t at = 0;
    for (size_t k = 0; k <= nth; ++k) at = t.find(from, k ? at + 1 : 0);
    t.replace(at, from.size(), to);
    return t;
  };
  damaged.push_back(replaced("</F>", "", 30));           // an F left open
  damaged.push_back(replaced("</LM>", "", 0));          // an LM left open: the next one inside it
  damaged.push_back(replaced("<F ", "<P ", 50));        // a P (its end tag an F's)
  damaged.push_back(replaced("n=\"p1\"", "n=\"p<1\"", 20));  // a '<' in a value
  damaged.push_back(replaced("<S ", "<!-- --><S ", 70)); // a comment (then one pass only)
  damaged.push_back(replaced("</HPCToolkitStructure>", "</HPCToolkitStructure><x/>", 0));
  size_t refused = 0;
  for (const std::string& t : damaged) {
    {
      std::ofstream f(bad, std::ios::binary | std::ios::trunc);
      f << t;
    }
    auto whole = index_units(bad);
    auto parts = index_units_in_chunks(bad, 2048, each);
    if (!whole.ok()) {
      ++refused;
      EXPECT_FALSE(parts.has_value()) << t.size();
      auto again = index_units(bad, 2048, each);
      ASSERT_FALSE(again.ok());
      EXPECT_EQ(again.status().message(), whole.status().message());
    } else if (parts) {
      EXPECT_TRUE(*whole == *parts);
    }
  }
  EXPECT_GE(refused, damaged.size() - 1);  // all but the comment's
  fs::remove(two);
  fs::remove(bad);
}

// The checker reuses each depth's scope: an element takes nothing from the one before it at
// its depth (ranges, names, numbers), by either reader.
TEST(StructFile, SiblingsTakeNothingFromTheOneBefore) {
  const std::string body =
      "<HPCToolkitStructure i=\"0\" version=\"4.9\" n=\"\">\n<LM i=\"1\" n=\"/lib/a\" has-calls=\"1\">\n"
      "<F i=\"2\" n=\"a.c\">\n"
      "<P i=\"3\" n=\"f\" ln=\"_Z1fv\" l=\"7\" s=\"9\" v=\"{[0x10-0x20)}\">\n"
      "<S i=\"4\" l=\"2\" v=\"{[0x10-0x18)}\"/>\n<S i=\"5\" l=\"3\"/>\n"
      "<C i=\"6\" l=\"4\" v=\"{[0x18-0x1c)}\" t=\"0x40\" d=\"gpu\"/>\n<C i=\"7\" l=\"5\"/>\n</P>\n"
      "<P i=\"8\" n=\"g\">\n</P>\n</F>\n</LM>\n<LM i=\"9\" n=\"/lib/b\" has-calls=\"0\">\n</LM>\n"
      "</HPCToolkitStructure>\n";
  for (bool expat : {false, true}) {
    const std::string text = "<?xml version=\"1.0\"?>\n" + body;
    auto s = expat ? parse_model_expat(text, "t") : parse_model(text, "t");
    ASSERT_TRUE(s.ok()) << s.status().message();
    ASSERT_EQ(s->children.size(), 2u);
    EXPECT_TRUE(s->children[0].has_calls);
    EXPECT_FALSE(s->children[1].has_calls);
    EXPECT_EQ(s->children[1].name, std::optional<std::string>("/lib/b"));
    const Scope& f = s->children[0].children.at(0);
    ASSERT_EQ(f.children.size(), 2u);
    const Scope& p1 = f.children[0];
    const Scope& p2 = f.children[1];
    EXPECT_EQ(p1.link_name, std::optional<std::string>("_Z1fv"));
    EXPECT_EQ(p1.static_id, std::optional<uint64_t>(9));
    EXPECT_EQ(p2.id, 8u);
    EXPECT_FALSE(p2.link_name || p2.line || p2.static_id || p2.vranges) << expat;
    ASSERT_EQ(p1.children.size(), 4u);
    EXPECT_TRUE(p1.children[0].vranges && p1.children[0].vranges->size() == 1u);
    EXPECT_FALSE(p1.children[1].vranges) << expat;
    EXPECT_EQ(p1.children[1].line, std::optional<uint64_t>(3));
    EXPECT_TRUE(p1.children[2].target && p1.children[2].device);
    EXPECT_FALSE(p1.children[3].target || p1.children[3].device || p1.children[3].vranges) << expat;
  }
}

// The scanner reads the body of every conformance file, and of files in any form the
// writers give (references, UTF-8, both quotes, white space inside tags), to expat's very
// index; and it reads nothing expat refuses or would read otherwise (each such file: no
// index from it, and index_units gives expat's error).
TEST(StructFile, ScannerIndexIsExpatsAndDeclinesWhatItCannotTell) {
  size_t scanned = 0;
  for (const fs::path& file : conformance_files()) {
    auto expat = index_units_expat(file);
    ASSERT_TRUE(expat.ok()) << expat.status().message();
    auto fast = index_units_scanned(file);
    ASSERT_TRUE(fast.has_value()) << file;
    EXPECT_TRUE(*fast == *expat) << file;
    scanned += fast->units.size();
  }
  EXPECT_GT(scanned, 100u);
  const fs::path file = fs::temp_directory_path() / ("hpc-scan-" + std::to_string(::getpid()) + ".xml");
  auto write = [&](const std::string& text) {
    std::ofstream f(file, std::ios::binary | std::ios::trunc);
    f << text;
  };
  const std::string head = "<?xml version=\"1.0\"?>\n<!DOCTYPE HPCToolkitStructure [\n<!ELEMENT LM (F|P)*>\n]>\n";
  auto doc = [&](const std::string& lm, const std::string& inside) {
    return head + "<HPCToolkitStructure i=\"0\" version=\"4.9\" n=\"\">\n<LM i=\"1\" n=\"" + lm +
           "\" has-calls=\"0\">\n<F i=\"2\" n=\"a.c\">\n" + inside + "</F>\n</LM>\n</HPCToolkitStructure>\n";
  };
  const std::string p = "<P i=\"3\" n=\"f\" v=\"{[0x10-0x20)}\">\n<S i=\"4\" l=\"2\" v=\"{[0x10-0x20)}\"/>\n</P>\n";
  // Read alike by both.
  for (const std::string& text : {
           doc("/lib/a&amp;b&lt;&gt;&quot;&apos;&#65;&#x42;&#x10FFFF;", p),
           doc("/lib/\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", p),
           doc("/lib/\x7f\xc2\x85&#x7f;&#x85;&#xFFFD;", p),  // DEL and C1: characters to expat too
           doc("/lib/a", "<P  i = '3'\tn=\"f&#9;&#10;\"  v=\"{[0x10-0x20)}\" >\r\n<S i=\"4\" l=\"2\" v=\"{[0x10-0x20)}\" />\n</P >\n"),
           doc("/lib/a", "<P i=\"3\" n=\"x>y\" v=\"{[0x10-0x20)}\"></P>\n"),
       }) {
    write(text);
    auto expat = index_units_expat(file);
    ASSERT_TRUE(expat.ok()) << expat.status().message() << "\n" << text;
    auto fast = index_units_scanned(file);
    ASSERT_TRUE(fast.has_value()) << text;
    EXPECT_TRUE(*fast == *expat) << text;
    EXPECT_EQ(fast->modules[0].name, expat->modules[0].name);
    // Without its DTD, as a unit's document: parse_model's scanner reads the same scopes.
    const std::string bare = "<?xml version=\"1.0\"?>\n" + text.substr(head.size());
    auto scopes = parse_model(bare, "bare");
    auto scopesExpat = parse_model_expat(bare, "bare");
    ASSERT_TRUE(scopes.ok() && scopesExpat.ok()) << bare;
    EXPECT_TRUE(*scopes == *scopesExpat) << bare;
  }
  // Declined: expat refuses these, or reads them in ways the scanner does not.
  const std::string dtd_default = "<?xml version=\"1.0\"?>\n<!DOCTYPE HPCToolkitStructure [\n"
                                  "<!ATTLIST LM has-calls CDATA \"1\">\n]>\n";
  const std::string dtd_entity = "<?xml version=\"1.0\"?>\n<!DOCTYPE HPCToolkitStructure [\n"
                                 "<!ENTITY lib \"/lib/x\">\n]>\n";
  const std::string plain = doc("/lib/a", p).substr(head.size());
  for (const std::string& text : {
           doc("/lib/a&foo;", p),                 // an entity never declared
           doc("/lib/a&#1;", p),                  // not a character
           doc("/lib/a&#xD800;", p),              // a surrogate
           doc("/lib/a&#X41;", p),                // 'X'
           doc("/lib/a\xc0\xaf", p),              // overlong UTF-8
           doc("/lib/a\xed\xa0\x80", p),          // an encoded surrogate
           doc("/lib/a\xef\xbf\xbe", p),          // U+FFFE
           doc("/lib/a\xff", p),                  // not UTF-8
           doc("/lib/a\tb", p),                   // a tab, which expat reads as a space
           doc("/lib/a<b", p),                    // '<' in a value
           doc("/lib/a", "<P i=\"3\" n=\"f\"v=\"{}\"></P>\n"),   // no space between attributes
           doc("/lib/a", "<P i=\"3\" n=\"f\" n=\"g\"></P>\n"),   // a duplicate
           doc("/lib/a", "<P i=\"3\" n=\"f\"></Q>\n"),           // a mismatched end tag
           doc("/lib/a", "<P i=\"3\" n=\"f\"/ >\n"),             // '/' then space
           doc("/lib/a", "<!-- c -->" + p),                       // a comment
           doc("/lib/a", "<?pi x?>" + p),                         // an instruction
           doc("/lib/a", "x" + p),                                // text
           doc("/lib/a", "<P2 i=\"3\" n=\"f\"></P2>\n"),          // another element
           doc("/lib/a", "<P i=\"3\" n=\"f\" xml:lang=\"en\"></P>\n"),
           doc("/lib/a", p) + "<HPCToolkitStructure i=\"0\" version=\"4.9\"/>\n",  // a second root
           doc("/lib/a", p).substr(0, doc("/lib/a", p).size() - 10),             // cut short
           dtd_default + plain,
           dtd_entity + plain,
       }) {
    write(text);
    auto fast = index_units_scanned(file);
    EXPECT_FALSE(fast.has_value()) << text;
    const size_t root = text.find("<HPCToolkitStructure");
    const std::string bare = "<?xml version=\"1.0\"?>\n" + text.substr(root);
    auto scopes = parse_model(bare, "bare");
    auto scopesExpat = parse_model_expat(bare, "bare");
    EXPECT_EQ(scopes.ok(), scopesExpat.ok()) << bare;
    if (!scopesExpat.ok()) EXPECT_EQ(scopes.status().message(), scopesExpat.status().message());
    else EXPECT_TRUE(*scopes == *scopesExpat);
    auto expat = index_units_expat(file);
    auto both = index_units(file);
    EXPECT_EQ(both.ok(), expat.ok()) << text;
    if (!expat.ok()) EXPECT_EQ(both.status().message(), expat.status().message());
    else EXPECT_TRUE(*both == *expat) << text;
  }
  fs::remove(file);
}

}  // namespace
}  // namespace hpc::structfile
