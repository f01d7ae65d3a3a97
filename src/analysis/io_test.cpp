// The database adapter's handling of -R OLD=NEW for source files: meta.db names the file
// at its rewritten path, and the file is copied from there into the database's src/.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "analysis/io.hpp"
#include "analysis/options.hpp"
#include "common/file.hpp"
#include "formats/db/db.hpp"

namespace hpc::analysis {
namespace {

namespace fs = std::filesystem;

TEST(ReplacePath, FirstMatchingPrefix) {
  std::vector<PathReplacement> r{{"/a/", "/x/"}, {"/a/b/", "/y/"}};
  EXPECT_EQ(replacePath("/a/b/c.c", r), "/x/b/c.c");
  EXPECT_EQ(replacePath("/b/c.c", r), "/b/c.c");
}

TEST(ReplacePath, ArgumentSplitsAtTheFirstUnescapedEquals) {
  auto r = parseReplacement("/build/a=b/src=/home/me/src");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->from, "/build/a");
  EXPECT_EQ(r->to, "b/src=/home/me/src");
  r = parseReplacement("/build/a\\=b/src=/home/me/x\\=y");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->from, "/build/a=b/src");
  EXPECT_EQ(r->to, "/home/me/x=y");
  r = parseReplacement("/old=");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->to, "");
  for (const char* bad : {"/no/equals", "=/new", "/only\\=escaped"}) {
    auto b = parseReplacement(bad);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_NE(b.status().message().find(bad), std::string::npos) << b.status().message();
  }
}

TEST(DefaultDatabase, NamedAsTheReferenceNamesIt) {
  fs::path tmp = fs::temp_directory_path() / ("hpc-default-db-" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  for (const char* d : {"hpctoolkit-my-app-measurements", "hpctoolkit-my-app-measurements-1234", "runs",
                        "hpctoolkit-x-measurements-12a"})
    fs::create_directories(tmp / d);
  const fs::path profile = "my-app-000000-001-7f000101-4242-0.hpcrun";
  EXPECT_EQ(defaultDatabase({tmp / "hpctoolkit-my-app-measurements"}, profile),
            tmp / "hpctoolkit-my-app-database");
  EXPECT_EQ(defaultDatabase({tmp / "hpctoolkit-my-app-measurements/"}, profile),
            tmp / "hpctoolkit-my-app-database");
  EXPECT_EQ(defaultDatabase({tmp / "hpctoolkit-my-app-measurements-1234"}, profile),
            tmp / "hpctoolkit-my-app-database-1234");
  EXPECT_EQ(defaultDatabase({tmp / "hpctoolkit-x-measurements-12a"}, profile),
            tmp / "hpctoolkit-x-measurements-12a-database");
  EXPECT_EQ(defaultDatabase({tmp / "runs"}, profile), tmp / "runs-database");
  // Several inputs, or a profile: the program's name, dashes and all.
  EXPECT_EQ(defaultDatabase({tmp / "runs", tmp / "hpctoolkit-my-app-measurements"}, profile),
            "hpctoolkit-my-app-database");
  EXPECT_EQ(defaultDatabase({tmp / "runs" / profile}, profile), "hpctoolkit-my-app-database");
  EXPECT_EQ(defaultDatabase({}, "short-1.hpcrun"), "hpctoolkit-short-database");

  // An existing default is never replaced: the first free -N beside it.
  const fs::path db = tmp / "hpctoolkit-my-app-database";
  EXPECT_EQ(unusedPath(db), db);
  fs::create_directories(db);
  fs::create_directories(tmp / "hpctoolkit-my-app-database-2");
  std::ofstream(tmp / "hpctoolkit-my-app-database-3") << "a file\n";
  EXPECT_EQ(unusedPath(db), tmp / "hpctoolkit-my-app-database-4");
  fs::remove_all(tmp);
}

TEST(WriteMeta, SourcesFollowReplacePath) {
  fs::path tmp = fs::temp_directory_path() / ("hpc-io-test-" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp / "now" / "src");
  std::ofstream(tmp / "now" / "src" / "small.c") << "int main() {}\n";

  Names names;
  names.file("/measured/src/small.c");
  names.file("/elsewhere/gone.c");
  names.finalize();
  Cct cct;
  cct.finalize();
  MetricTable metrics({"CPUTIME (sec)"}, false);
  std::vector<PathReplacement> replace{{"/measured/", (tmp / "now").string() + "/"}};
  MetaInput meta{"t", &cct, &names, &metrics, 0, &replace};
  fs::create_directories(tmp / "db");
  ASSERT_TRUE(writeMeta(tmp / "db", meta).ok());

  const std::string moved = (tmp / "now" / "src" / "small.c").string();
  EXPECT_TRUE(fs::is_regular_file(tmp / "db" / "src" / fs::path(moved).relative_path()));
  auto file = MappedFile::open(tmp / "db" / "meta.db");
  ASSERT_TRUE(file.ok());
  auto m = db::read_meta(file->view());
  ASSERT_TRUE(m.ok()) << m.status().message();
  std::vector<std::string> paths;
  for (const db::File& f : m->files) paths.push_back(f.path);
  EXPECT_NE(std::find(paths.begin(), paths.end(), moved), paths.end());
  EXPECT_NE(std::find(paths.begin(), paths.end(), "/elsewhere/gone.c"), paths.end());
  fs::remove_all(tmp);
}

// Deep recursion in an application makes call chains of hundreds of thousands of contexts:
// building, listing, writing, reading, printing and freeing such a tree must not recurse
// (each of these overflowed an 8 MiB stack before). Every fourth context is hidden (an
// instruction below a line), so meta.db lists its child in its place.
TEST(WriteMeta, DeepChainWithoutRecursion) {
  fs::path tmp = fs::temp_directory_path() / ("hpc-io-deep-" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp / "db");
  constexpr uint32_t kDepth = 600000;
  uint32_t listed = 0;
  {
    Names names;
    const File* file = names.file("/deep/rec.c");
    const Module* module = names.module("/deep/rec");
    Cct cct;
    ContextKey entry;
    entry.kind = NodeKind::Entry;
    entry.entry = EntryKind::MainThread;
    Context* at = cct.root()->child(entry);
    for (uint32_t i = 0; i < kDepth; ++i) {
      ContextKey k;
      if (i % 4 == 3) {
        k.type = LexType::Instruction;
        k.module = module;
        k.offset = i;
        k.hidden = true;
      } else {
        k.type = LexType::Line;
        k.file = file;
        k.line = i + 1;
        ++listed;
      }
      at = at->child(k);
    }
    cct.finalize();
    names.finalize();
    ASSERT_EQ(cct.size(), kDepth + 2);
    MetricTable metrics({"CPUTIME (sec)"}, false);
    MetaInput meta{"deep", &cct, &names, &metrics, 0, nullptr};
    ASSERT_TRUE(writeMeta(tmp / "db", meta).ok());
  }  // the tree is freed here
  auto file = MappedFile::open(tmp / "db" / "meta.db");
  ASSERT_TRUE(file.ok());
  {
    auto m = db::read_meta(file->view());
    ASSERT_TRUE(m.ok()) << m.status().message();
    ASSERT_EQ(m->entryPoints.size(), 1u);
    uint32_t depth = 0, lastLine = 0;
    const db::ContextList* level = &m->entryPoints[0].children;
    while (!level->empty()) {
      ASSERT_EQ(level->size(), 1u) << "at depth " << depth;
      const db::Context& c = level->front();
      ASSERT_NE(c.file, db::kNone);
      EXPECT_GT(c.line, lastLine);  // the lines in order, hidden instructions left out
      lastLine = c.line;
      ++depth;
      level = &c.children;
    }
    EXPECT_EQ(depth, listed);
    std::ostringstream text;
    ASSERT_TRUE(db::dump(tmp / "db" / "meta.db", text).ok());
    EXPECT_NE(text.str().find("|line " + std::to_string(lastLine) + "|"), std::string::npos);
  }  // the read tree is freed here
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace hpc::analysis
