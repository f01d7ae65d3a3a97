// Whole-analysis tests on small C programs built -g -O2 by CMake (testdata/), each
// checked for the exact loop/inline skeleton, plus loop-finder tests on hand-made CFGs.
#include <elf.h>
#include <gtest/gtest.h>

#include <map>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>

#include "structure/cfg.hpp"
#include "structure/debug_info.hpp"
#include "structure/elf_image.hpp"
#include "structure/emit.hpp"
#include "structure/gpu_cfg.hpp"
#include "structure/loops.hpp"
#include "structure/sass.hpp"
#include "structure/structure.hpp"

namespace hpc::structure {
namespace {

std::string lib(const std::string& name) { return std::string(HPC_STRUCTURE_TESTLIBS) + "/lib" + name + ".so"; }

// Line of the source line carrying "// MARKER".
uint32_t line_of(const std::string& source, const std::string& marker) {
  std::ifstream in(std::string(HPC_SOURCE_DIR) + "/src/structure/testdata/" + source);
  std::string text;
  for (uint32_t n = 1; std::getline(in, text); ++n)
    if (text.find("// " + marker) != std::string::npos) return n;
  ADD_FAILURE() << marker << " not found in " << source;
  return 0;
}

// Loops and inlined calls, with their lines, statements left out: "L6{L7{}}".
std::string skeleton(const Scope& s) {
  std::vector<std::string> parts;
  for (const auto& c : s.children) {
    std::string inner = skeleton(*c);
    switch (c->kind) {
      case Scope::Kind::Loop: parts.push_back("L" + std::to_string(c->line) + "{" + inner + "}"); break;
      case Scope::Kind::Inline:
        parts.push_back("A" + std::to_string(c->line) + ":" + c->callee + "{" + inner + "}");
        break;
      case Scope::Kind::Guard: parts.push_back("G{" + inner + "}"); break;
      case Scope::Kind::Procedure: break;
    }
  }
  std::sort(parts.begin(), parts.end());
  std::string r;
  for (const auto& p : parts) r += p;
  return r;
}

Structure analyze(const std::string& name, int jobs = 1) {
  Options opt;
  opt.jobs = jobs;
  auto s = analyze_binary(lib(name), opt);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return std::move(s).value();
}

const Procedure* find(const Structure& s, const std::string& name) {
  for (const auto& p : s.procedures)
    if (p.name == name) return &p;
  return nullptr;
}

std::string L(uint32_t line, const std::string& inner = "") { return "L" + std::to_string(line) + "{" + inner + "}"; }

// Symbol names as rustc 1.9x writes them (taken from a -O -g build's symbol table): v0, and
// legacy with its hash; C++'s and C's are left to the C++ demangler, as before.
TEST(Demangle, RustSymbolsReadAsRust) {
#ifdef HPC_HAVE_LIBIBERTY
  EXPECT_EQ(demangle("_RNvNtNtCsfEOYDRpO4Ta_11miniz_oxide7inflate4core15decompress_fast"),
            "miniz_oxide::inflate::core::decompress_fast");
  EXPECT_EQ(demangle("_RNvNvMs0_NtNtNtCsjrHSEGnQ3l9_3std3sys6thread4unixNtB7_6Thread3new12thread_start"),
            "<std::sys::thread::unix::Thread>::new::thread_start");
  EXPECT_EQ(demangle("_RINvNtNtCsduwmD7cSIQq_5gimli4read4unit15parse_attributeINtNtB4_12endian_slice11EndianSlice"
                     "NtNtB6_9endianity12LittleEndianEECsjrHSEGnQ3l9_3std"),
            "gimli::read::unit::parse_attribute::<gimli::read::endian_slice::EndianSlice<gimli::endianity::"
            "LittleEndian>>");
  EXPECT_EQ(demangle("_ZN1r4work17hc6f1c8741319930bE"), "r::work");
  EXPECT_EQ(demangle("_ZN4core3ops8function6FnOnce40call_once$u7b$$u7b$vtable.shim$u7d$$u7d$17h018382932c6ab3a0E"),
            "core::ops::function::FnOnce::call_once{{vtable.shim}}");
#else
  GTEST_SKIP() << "built without libiberty";
#endif
  EXPECT_EQ(demangle("_ZN3foo3barEv"), "foo::bar()");
  EXPECT_EQ(demangle("_ZN3foo3barE"), "foo::bar");
  EXPECT_EQ(demangle("main"), "main");
  EXPECT_EQ(demangle("_Rubbish"), "_Rubbish");  // not a v0 symbol: left as it is
}

TEST(Structure, LoopNestOfDepthThree) {
  auto s = analyze("nest3");
  const Procedure* p = find(s, "nest3");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(skeleton(p->root),
            L(line_of("nest3.c", "LOOP_I"), L(line_of("nest3.c", "LOOP_J"), L(line_of("nest3.c", "LOOP_K")))));
}

TEST(Structure, InlinedFunctionWithLoopInLoop) {
  auto s = analyze("inline_loops");
  const Procedure* p = find(s, "outer");
  ASSERT_NE(p, nullptr);
  const std::string f = "inline_loops.c";
  std::string inlined = "A" + std::to_string(line_of(f, "CALL_BODY")) + ":body{" +
                        L(line_of(f, "INNER_J"), L(line_of(f, "INNER_K"))) + "}";
  EXPECT_EQ(skeleton(p->root), L(line_of(f, "OUTER_I"), inlined));
}

TEST(Structure, TwoLoopsOnOneLine) {
  auto s = analyze("same_line");
  const Procedure* p = find(s, "two");
  ASSERT_NE(p, nullptr);
  uint32_t line = line_of("same_line.c", "BOTH");
  EXPECT_EQ(skeleton(p->root), L(line) + L(line));
}

TEST(Structure, StrippedLibraryKeepsProceduresAndLoops) {
  auto s = analyze("stripped_s");
  const Procedure* visible = find(s, "visible");
  ASSERT_NE(visible, nullptr);
  EXPECT_EQ(skeleton(visible->root), "L0{}");
  // The static function has no symbol left; its FDE still bounds it.
  const Procedure* hidden = nullptr;
  for (const auto& p : s.procedures)
    if (p.name.rfind("targ", 0) == 0 && skeleton(p.root) == "L0{L0{}}") hidden = &p;
  ASSERT_NE(hidden, nullptr);
  EXPECT_EQ(hidden->line, 0u);
}

TEST(Structure, StrippedCodeReachedOnlyByACall) {
  // No symbol, no FDE, no DWARF: the call from visible() is all that says hidden() is there.
  auto s = analyze("called_only");
  const Procedure* visible = find(s, "visible");
  ASSERT_NE(visible, nullptr);
  EXPECT_EQ(skeleton(visible->root), "L0{}");
  const Procedure* hidden = nullptr;
  for (const auto& p : s.procedures)
    if (p.name.rfind("targ", 0) == 0 && p.entry < visible->entry && skeleton(p.root) == "L0{L0{}}") hidden = &p;
  ASSERT_NE(hidden, nullptr);
  char want[32];
  std::snprintf(want, sizeof want, "targ%llx", static_cast<unsigned long long>(hidden->entry));
  EXPECT_EQ(hidden->name, want);
  EXPECT_EQ(hidden->link_name, want);
}

// A stripped program's main is no longer "targ<addr>" at the top of every path: found from
// the entry point (lea main(%rip),%rdi in a position-independent program, mov $main,%rdi
// otherwise), at the address its symbol had before stripping, with its loop.
TEST(Structure, StrippedProgramsMainAndStartAreNamed) {
  for (const char* kind : {"pie", "nopie"}) {
    SCOPED_TRACE(kind);
    const std::string dir = HPC_STRUCTURE_TESTLIBS;
    auto full = ElfImage::open(dir + "/main_" + std::string(kind) + "_full");
    ASSERT_TRUE(full.ok()) << full.status().message();
    uint64_t mainAt = 0, startAt = 0;
    for (const auto& f : (*full)->functions()) {
      if (f.name == "main") mainAt = f.addr;
      if (f.name == "_start") startAt = f.addr;
    }
    ASSERT_NE(mainAt, 0u);
    ASSERT_EQ(startAt, (*full)->entry());
    Options opt;
    auto s = analyze_binary(dir + "/main_" + std::string(kind), opt);
    ASSERT_TRUE(s.ok()) << s.status().message();
    const Procedure* m = find(*s, "main");
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->entry, mainAt);
    EXPECT_EQ(skeleton(m->root), "L0{}");
    const Procedure* start = find(*s, "_start");
    ASSERT_NE(start, nullptr);
    EXPECT_EQ(start->entry, startAt);
    for (const auto& p : s->procedures) EXPECT_NE(p.name, "targ" + [&] {
      char b[32];
      std::snprintf(b, sizeof b, "%llx", static_cast<unsigned long long>(mainAt));
      return std::string(b);
    }());
  }
}

TEST(Structure, JumpTableSwitchInsideLoop) {
  auto s = analyze("switch_loop");
  const Procedure* p = find(s, "dispatch");
  ASSERT_NE(p, nullptr);
  uint32_t loop = line_of("switch_loop.c", "LOOP");
  ASSERT_EQ(skeleton(p->root), L(loop));
  // Every case body was reached through the table, so it lies in the loop (outside
  // it are only the alignment bytes between cases).
  const Scope& l = *p->root.children.at(0);
  for (uint32_t line = loop + 2; line <= loop + 9; ++line)
    EXPECT_TRUE(l.stmts.count(line)) << "case on line " << line << " is not in the loop";

  // And the dispatching block has one successor per table entry.
  auto img = ElfImage::open(lib("switch_loop"));
  ASSERT_TRUE(img.ok());
  uint64_t end = p->entry;
  for (const auto& q : s.procedures)
    if (q.entry > p->entry && (end == p->entry || q.entry < end)) end = q.entry;
  auto bytes = (*img)->code(p->entry, end - p->entry);
  Cfg cfg = build_cfg(CodeRange{p->entry, p->entry + bytes.size(), bytes}, p->entry, {},
                      [&](uint64_t a, uint64_t n) { return (*img)->code(a, n); });
  size_t widest = 0;
  for (const auto& b : cfg.blocks) widest = std::max(widest, b.succs.size());
  EXPECT_GE(widest, 7u);
}

// The structure file's text with the library's name replaced by "LIB" (to compare builds).
std::string text(const Structure& s, const std::string& name) {
  std::string path = (std::filesystem::temp_directory_path() / ("hpcstruct_" + name + ".xml")).string();
  EXPECT_TRUE(write_structure_file(s, path).ok());
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string t = ss.str();
  for (size_t at; (at = t.find(name)) != std::string::npos;) t.replace(at, name.size(), "LIB");
  return t;
}

// Split DWARF (-gsplit-dwarf): the library holds the line table and a skeleton unit, the
// .dwo beside its object file the subprograms and inlined calls. The structure is the plain
// build's (before: no line at all, every statement at line 0 of "[binary]"); without the
// .dwo, lines still, and a warning naming it. The same with the debug sections compressed,
// and with them in a separate debug file.
TEST(Structure, SplitCompressedOrSeparateDwarfAsThePlainBuild) {
  const std::string plain = text(analyze("inline_loops"), "libinline_loops.so");
  const Structure split = analyze("inline_loops_split");
  EXPECT_EQ(text(split, "libinline_loops_split.so"), plain);
  // Compressed debug sections (-gz=zlib): libdw decompresses them in place, which killed
  // hpcstruct by SIGSEGV in the read-only mapping of the file.
  EXPECT_EQ(text(analyze("inline_loops_gz"), "libinline_loops_gz.so"), plain);
  // Stripped of all, its symbols and DWARF in a file named by .gnu_debuglink beside it
  // (before: procedures named by .dynsym and FDEs alone, no line).
  EXPECT_EQ(text(analyze("inline_loops_dbg"), "libinline_loops_dbg.so"), plain);
  const Procedure* outer = find(split, "outer");
  ASSERT_NE(outer, nullptr);
  EXPECT_NE(skeleton(outer->root).find("A"), std::string::npos) << skeleton(outer->root);

  // The debug file found by the library's build ID under a directory of
  // $HPCTOOLKIT_DEBUG_DIRS, the library copied away from the file its .gnu_debuglink names.
  {
    namespace fs = std::filesystem;
    const fs::path tmp = fs::temp_directory_path() / "hpcstruct-debug-dirs";
    fs::remove_all(tmp);
    fs::create_directories(tmp / "bin");
    fs::copy_file(lib("inline_loops_dbg"), tmp / "bin" / "libinline_loops_dbg.so");
    auto img = ElfImage::open((tmp / "bin" / "libinline_loops_dbg.so").string());
    ASSERT_TRUE(img.ok());
    const std::vector<uint8_t> id = (*img)->build_id();
    ASSERT_GE(id.size(), 2u) << "the test library has no build ID";
    char hex[3];
    std::string rest;
    for (size_t i = 1; i < id.size(); ++i) {
      std::snprintf(hex, sizeof hex, "%02x", id[i]);
      rest += hex;
    }
    std::snprintf(hex, sizeof hex, "%02x", id[0]);
    fs::create_directories(tmp / "dbg" / ".build-id" / hex);
    fs::copy_file(std::string(HPC_STRUCTURE_TESTLIBS) + "/libinline_loops_dbg.debug",
                  tmp / "dbg" / ".build-id" / hex / (rest + ".debug"));
    auto at = [&](const char* dirs) {
      if (dirs) setenv("HPCTOOLKIT_DEBUG_DIRS", dirs, 1);
      else unsetenv("HPCTOOLKIT_DEBUG_DIRS");
      Options opt;
      auto st = analyze_binary((tmp / "bin" / "libinline_loops_dbg.so").string(), opt);
      EXPECT_TRUE(st.ok());
      std::string t = text(*st, "libinline_loops_dbg.so");
      const std::string dir = (tmp / "bin").string();
      if (size_t where = t.find(dir); where != std::string::npos) t.replace(where, dir.size(), HPC_STRUCTURE_TESTLIBS);
      return t;
    };
    EXPECT_NE(at(nullptr), plain) << "no debug file found: the stripped library's structure";
    EXPECT_EQ(at(("/nonexistent:" + (tmp / "dbg").string()).c_str()), plain);
    unsetenv("HPCTOOLKIT_DEBUG_DIRS");
    fs::remove_all(tmp);
  }

  // The .dwo out of the way for a moment (its name from the library's skeleton unit).
  std::string dwo;
  for (auto& e : std::filesystem::recursive_directory_iterator(HPC_BINARY_DIR))
    if (e.path().extension() == ".dwo" && e.path().string().find("structtest_inline_loops_split") != std::string::npos)
      dwo = e.path().string();
  ASSERT_FALSE(dwo.empty());
  std::filesystem::rename(dwo, dwo + ".hidden");
  Options opt;
  std::string warnings;
  auto lines = analyze_binary(lib("inline_loops_split"), opt, &warnings);
  std::filesystem::rename(dwo + ".hidden", dwo);
  ASSERT_TRUE(lines.ok()) << lines.status().message();
  EXPECT_NE(warnings.find("1 of its 1 split-DWARF units have no .dwo file here"), std::string::npos) << warnings;
  const Procedure* p = find(*lines, "outer");
  ASSERT_NE(p, nullptr);
  const Structure plainS = analyze("inline_loops");
  EXPECT_EQ(p->line, find(plainS, "outer")->line) << "lines come from the library itself";
  EXPECT_GT(p->line, 0u);
}

// Split DWARF packed by dwp into "<library>.dwp", the .dwo files gone: libdw (0.188) reads
// no package, and before every unit came out as lines only (inlined calls guessed, named
// "<inline>"). Each split unit is now read from the package: the structure is the plain
// build's, for GNU's DWARF 4 form (binutils' dwp, index version 2) and clang's DWARF 5
// (llvm-dwp, index version 5, where installed), two units each (the second's addresses
// start past the first's in .debug_addr). Without the package, or with a damaged one, a
// warning says so and the lines are still read.
TEST(Structure, SplitDwarfPackageAsThePlainBuild) {
  namespace fs = std::filesystem;
  int tested = 0;
  for (const std::string name : {"packed4", "packed5"}) {
    if (!fs::exists(lib(name))) continue;  // packed5: no clang or llvm-dwp here
    ++tested;
    SCOPED_TRACE(name);
    const std::string plain = text(analyze(name + "_plain"), "lib" + name + "_plain.so");
    Options opt;
    std::string warnings;
    auto packed = analyze_binary(lib(name), opt, &warnings);
    ASSERT_TRUE(packed.ok()) << packed.status().message();
    EXPECT_EQ(warnings, "");
    EXPECT_EQ(text(*packed, "lib" + name + ".so"), plain);
    const Procedure* outer = find(*packed, "outer");
    const Procedure* second = find(*packed, "second");
    ASSERT_NE(outer, nullptr);
    ASSERT_NE(second, nullptr);
    EXPECT_NE(skeleton(outer->root).find(":body{"), std::string::npos) << skeleton(outer->root);
    EXPECT_NE(skeleton(second->root).find(":add{"), std::string::npos) << skeleton(second->root);
    EXPECT_GT(second->line, 0u);

    // The package away: lines only, and the warning. Then a damaged one (cut short).
    const fs::path tmp = fs::temp_directory_path() / ("hpcstruct-dwp-" + name);
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    const fs::path copy = tmp / ("lib" + name + ".so");
    fs::copy_file(lib(name), copy);
    warnings.clear();
    auto bare = analyze_binary(copy.string(), opt, &warnings);
    ASSERT_TRUE(bare.ok());
    EXPECT_NE(warnings.find("2 of its 2 split-DWARF units have no .dwo file here (a.dwo, ...): their source lines"),
              std::string::npos) << warnings;
    EXPECT_NE(text(*bare, "lib" + name + ".so"), plain);
    EXPECT_EQ(find(*bare, "second")->line, second->line) << "lines come from the library itself";
    {
      std::ifstream in(lib(name) + ".dwp", std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      std::ofstream out(copy.string() + ".dwp", std::ios::binary);
      out.write(bytes.data(), 100);
    }
    warnings.clear();
    auto damaged = analyze_binary(copy.string(), opt, &warnings);
    ASSERT_TRUE(damaged.ok());
    EXPECT_NE(warnings.find("(" + copy.string() + ".dwp: its section headers lie outside the file)"), std::string::npos)
        << warnings;
    EXPECT_EQ(text(*damaged, "lib" + name + ".so"), text(*bare, "lib" + name + ".so"));
    fs::remove_all(tmp);
  }
  EXPECT_GE(tested, 1) << "no package was built (binutils' dwp missing?)";
}

TEST(Structure, OutputDoesNotDependOnThreads) {
  auto dir = std::filesystem::temp_directory_path();
  auto a = (dir / "hpcstruct_j1.xml").string(), b = (dir / "hpcstruct_j4.xml").string();
  ASSERT_TRUE(write_structure_file(analyze("inline_loops", 1), a).ok());
  ASSERT_TRUE(write_structure_file(analyze("inline_loops", 4), b).ok());
  std::ifstream fa(a), fb(b);
  std::stringstream sa, sb;
  sa << fa.rdbuf();
  sb << fb.rdbuf();
  EXPECT_EQ(sa.str(), sb.str());
  EXPECT_FALSE(sa.str().empty());
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string cubin(const std::string& name) {
  return std::string(HPC_SHARED_DIR) + "/conformance/struct/bin/" + name;
}

TEST(Structure, BatchedWriteIsByteIdentical) {
  auto dir = std::filesystem::temp_directory_path();
  for (const char* name : {"inline_loops", "switch_loop", "stripped_s"}) {
    auto whole = (dir / "hpcstruct_whole.xml").string(), batched = (dir / "hpcstruct_batched.xml").string();
    ASSERT_TRUE(write_structure_file(analyze(name, 1), whole).ok());
    for (int jobs : {1, 3})
      for (size_t hold : {size_t(16) << 20, size_t(0)}) {
        Options opt;
        opt.jobs = jobs;
        opt.batch = 3;         // few procedures in flight even for a small library
        opt.hold_bytes = hold;  // 0: every procedure not written at once waits in the spill file
        auto st = write_binary_structure(lib(name), opt, batched);
        ASSERT_TRUE(st.ok()) << st.message();
        EXPECT_EQ(slurp(whole), slurp(batched)) << name << " -j" << jobs << " hold " << hold;
      }
  }
  // A binary of many units, analysed unit by unit and written by file, the units read
  // once even with a tiny DWARF budget; a cubin, whose output order is known only at the end.
  for (const std::string& bin : {std::string("/proc/self/exe"), cubin("inlines+loops-sm_75-nvcc112-0")}) {
    auto whole = (dir / "hpcstruct_whole.xml").string(), batched = (dir / "hpcstruct_batched.xml").string();
    auto s = analyze_binary(bin, Options{});
    ASSERT_TRUE(s.ok()) << s.status().message();
    ASSERT_TRUE(write_structure_file(*s, whole).ok());
    for (int jobs : {1, 2}) {
      Options opt;
      opt.jobs = jobs;
      opt.hold_bytes = 0;
      opt.debug_cache = 1;
      auto st = write_binary_structure(bin, opt, batched);
      ASSERT_TRUE(st.ok()) << st.message();
      EXPECT_TRUE(slurp(whole) == slurp(batched)) << bin << " -j" << jobs;
    }
  }
  auto st = write_binary_structure(lib("nest3"), Options{}, (dir / "no-such-dir" / "x.hpcstruct").string());
  EXPECT_FALSE(st.ok());
}

TEST(Structure, DebugInfoReadPerUnitWithinItsBudget) {
  // This test program has many compilation units. A cache of one byte keeps no unit after
  // its views are gone: the same questions give the same answers, the units read again.
  auto image = ElfImage::open("/proc/self/exe");
  ASSERT_TRUE(image.ok()) << image.status().message();
  auto tiny = DebugInfo::load(**image, 1);
  auto ample = DebugInfo::load(**image);
  ASSERT_TRUE(tiny.ok() && ample.ok());
  std::vector<uint64_t> entries;
  for (const auto& f : (*image)->functions())
    if (f.size > 0 && !f.plt) entries.push_back(f.addr);
  ASSERT_GT(entries.size(), 100u);
  std::vector<uint64_t> probe;
  for (size_t i = 0; i < entries.size(); i += entries.size() / 25) probe.push_back(entries[i]);
  for (int pass = 0; pass < 2; ++pass)
    for (uint64_t a : probe) {
      auto t = (*tiny)->view(a, a + 16), m = (*ample)->view(a, a + 16);
      EXPECT_EQ(t.line_at(a), m.line_at(a)) << std::hex << a;
      EXPECT_EQ(t.next_row_after(a), m.next_row_after(a));
      auto ts = t.subprograms_in(a, a + 16), ms = m.subprograms_in(a, a + 16);
      ASSERT_EQ(ts.size(), ms.size());
      for (size_t k = 0; k < ts.size(); ++k) EXPECT_EQ(ts[k]->link_name, ms[k]->link_name);
    }
  EXPECT_GT((*tiny)->units_read(), (*ample)->units_read());
  auto lines = (*tiny)->lines_at(probe);
  ASSERT_EQ(lines.size(), probe.size());
  for (size_t k = 0; k < probe.size(); ++k)
    EXPECT_EQ(lines[k], (*ample)->view(probe[k], probe[k] + 1).line_at(probe[k]));
}

TEST(Structure, MalformedBinaryIsNamed) {
  auto bad = (std::filesystem::temp_directory_path() / "hpcstruct_not_elf.bin").string();
  std::ofstream(bad) << "this is not an ELF file";
  auto s = analyze_binary(bad, Options{});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find(bad), std::string::npos) << s.status().message();
}

// A binary cut short loses its section headers (at the end of the file): an error that says
// so, not an empty structure.
TEST(Structure, TruncatedBinaryIsAnErrorNotAnEmptyStructure) {
  std::ifstream in(cubin("inlines+loops-x86_64-gcc10-d"), std::ios::binary);  // the kit's binaries
  std::string whole((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(whole.size(), 4096u);
  auto cut = (std::filesystem::temp_directory_path() / "hpcstruct_cut.elf").string();
  std::ofstream(cut, std::ios::binary) << whole.substr(0, whole.size() / 2);
  auto s = analyze_binary(cut, Options{});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find(cut + ": section header table at offset"), std::string::npos)
      << s.status().message();
  EXPECT_NE(s.status().message().find("truncated?"), std::string::npos) << s.status().message();
  std::filesystem::remove(cut);
}


TEST(Cuda, InlinedCallsFromTheLineTable) {
  // nvcc 11.2 -lineinfo: no .debug_info; the inlined call is in the line table's vendor opcode.
  auto s = analyze_binary(cubin("inlines+loops-sm_75-nvcc112-dr"), Options{});
  ASSERT_TRUE(s.ok()) << s.status().message();
  const Procedure* p = find(*s, "f4_1()");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->line, 48u);  // line-only procedures: their smallest line
  std::string callee = "_INTERNAL_48_tmpxft_00000012_00000000_7_inlines_loops_cpp1_ii_d1d8cd7d::f4_inline()";
  EXPECT_EQ(skeleton(p->root), "A54:" + callee + "{}");
  const Scope& site = *p->root.children.at(0);
  EXPECT_EQ(site.callee_line, 48u);
  EXPECT_TRUE(site.stmts.count(48) && site.stmts.count(49));
}

TEST(Cuda, ProcedureLineFromShallowInlinedCode) {
  auto s = analyze_binary(cubin("inlines+loops-sm_75-nvcc112-0"), Options{});
  ASSERT_TRUE(s.ok()) << s.status().message();
  // f2's inlined printf (line 9) is directly in the kernel: it names the procedure;
  // f4_2's inlined loop sits two loops deep: the entry's line does.
  ASSERT_NE(find(*s, "f2()"), nullptr);
  ASSERT_NE(find(*s, "f4_2()"), nullptr);
  EXPECT_EQ(find(*s, "f2()")->line, 9u);
  EXPECT_EQ(find(*s, "f4_2()")->line, 57u);
}

// --gpucfg=yes with PATH set to `path` (no nvdisasm there).
Expected<Structure> gpucfg_without_nvdisasm(const std::string& binary, std::string& warnings) {
  std::string saved = std::getenv("PATH") ? std::getenv("PATH") : "";
  setenv("PATH", "/nonexistent", 1);
  Options opt;
  opt.gpucfg = true;
  auto s = analyze_binary(binary, opt, &warnings);
  setenv("PATH", saved.c_str(), 1);
  return s;
}

TEST(Cuda, GpucfgWithoutNvdisasmReadsTheSass) {
  if (std::filesystem::exists("/usr/local/cuda/bin/nvdisasm")) GTEST_SKIP() << "nvdisasm is found off PATH";
  std::string warnings;
  auto s = gpucfg_without_nvdisasm(cubin("inlines+loops-sm_75-nvcc112-0"), warnings);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(warnings, "");
  // The reference's loops (conformance kit, +gpucfg): three nested in f3_3 at these headers.
  const Procedure* p = find(*s, "f3_3()");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(skeleton(p->root), "L36{L37{L38{}}}");
  const Scope* l = p->root.children.at(0).get();
  std::vector<uint64_t> headers;
  for (; l; l = l->children.empty() ? nullptr : l->children.back().get())
    if (l->kind == Scope::Kind::Loop) headers.push_back(l->loop_header);
  EXPECT_EQ(headers, (std::vector<uint64_t>{0x13970, 0x13b00, 0x13c90}));
  // Calls to vprintf (an undefined symbol) are no call sites.
  for (const auto& q : s->procedures) EXPECT_TRUE(q.root.calls.empty()) << q.name;

  // nvcc 11.2 -O3 -lineinfo: CALL.REL sites, each with its callee and line.
  auto r = gpucfg_without_nvdisasm(cubin("recursion-sm_75-nvcc112-dr"), warnings);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Procedure* k = find(*r, "kernmain()");
  ASSERT_NE(k, nullptr);
  ASSERT_EQ(k->root.calls.size(), 1u);
  EXPECT_EQ(k->root.calls[0].begin, 0x2db0u);
  EXPECT_EQ(k->root.calls[0].end, 0x2dc0u);
  EXPECT_EQ(k->root.calls[0].target, 0x3260u);
  EXPECT_EQ(k->root.calls[0].line, 51u);
  EXPECT_EQ(k->device, "NVIDIA sm_75");
}

TEST(Cuda, GpucfgWithoutNvdisasmForAnUnknownSmWarns) {
  if (std::filesystem::exists("/usr/local/cuda/bin/nvdisasm")) GTEST_SKIP() << "nvdisasm is found off PATH";
  // The sm_75 cubin relabelled sm_100, whose encoding sass.cpp does not claim to know.
  std::string bytes = slurp(cubin("inlines+loops-sm_75-nvcc112-0"));
  const uint32_t sm100 = 0x640564;
  std::memcpy(bytes.data() + 0x30, &sm100, 4);  // e_flags of a 64-bit ELF header
  auto path = (std::filesystem::temp_directory_path() / "hpcstruct_sm100.cubin").string();
  std::ofstream(path, std::ios::binary) << bytes;
  std::string warnings;
  auto s = gpucfg_without_nvdisasm(path, warnings);
  std::filesystem::remove(path);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_NE(warnings.find(path + ": --gpucfg=yes: the control flow of sm_100 code needs CUDA's nvdisasm"),
            std::string::npos) << warnings;
  EXPECT_NE(find(*s, "f3_3()"), nullptr);
  for (const auto& p : s->procedures)
    for (const auto& c : p.root.children) EXPECT_NE(c->kind, Scope::Kind::Loop) << p.name;
}

TEST(Sass, SmFromTheElfFlags) {
  EXPECT_EQ(cuda_sm_of_flags(0x4b054b), 75u);    // nvcc 11.2
  EXPECT_EQ(cuda_sm_of_flags(0x3e053e), 62u);    // nvcc 10.2
  EXPECT_EQ(cuda_sm_of_flags(0x9005a04), 90u);   // nvcc 13.0
  EXPECT_TRUE(sass_decodable(62) && sass_decodable(75) && sass_decodable(80) && sass_decodable(90));
  EXPECT_FALSE(sass_decodable(100) || sass_decodable(120) || sass_decodable(63) || sass_decodable(0));
}

// The loop nest as "header{child header{...}} ...", headers in hex.
std::string nest(const Cfg& cfg) {
  LoopForest f = find_loops(cfg);
  std::function<std::string(int)> one = [&](int l) {
    std::ostringstream o;
    o << std::hex << cfg.blocks[f.loops[l].header].begin << "{";
    for (size_t c = 0; c < f.loops.size(); ++c)
      if (f.loops[c].parent == l) o << one(int(c));
    return o.str() + "}";
  };
  std::string out;
  for (size_t l = 0; l < f.loops.size(); ++l)
    if (f.loops[l].parent < 0) out += one(int(l));
  return out;
}

TEST(Sass, Sm90AgreesWithNvdisasm13) {
  // The graph CUDA 13.0's nvdisasm printed for this cubin (an H100 machine) against our
  // reading of the same code: the same blocks, edges and loops.
  const std::string dir = std::string(HPC_SOURCE_DIR) + "/src/structure/testdata/";
  auto g = parse_nvdisasm_cfg(slurp(dir + "nvdisasm13_cfg_sm90.dot"));
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto image = ElfImage::open(dir + "gpu_loops_sm90_nvcc13.cubin");
  ASSERT_TRUE(image.ok()) << image.status().message();
  const Section* text = (*image)->section_named(".text._Z9axpy_loopPfPKffii");
  ASSERT_NE(text, nullptr);
  Cfg theirs = cfg_from_nvgraph(*g, text->addr, text->addr, text->addr + text->size);
  ASSERT_EQ(cuda_sm_of_flags((*image)->flags()), 90u);
  auto ours = cfg_from_sass((*image)->code(text->addr, text->size), text->addr, 90, {});
  ASSERT_TRUE(ours.has_value());
  EXPECT_EQ(nest(*ours), "1e70{}2540{}26c0{}2800{29d0{}}");
  EXPECT_EQ(nest(theirs), "1e70{}26c0{}2540{}2800{29d0{}}");  // the same loops, found in another order
  // Every block nvdisasm shows, with its successors, is one of ours (ours also has the
  // unreachable tail nvdisasm leaves out).
  for (const Block& b : theirs.blocks) {
    int k = ours->block_at(b.begin);
    ASSERT_GE(k, 0) << std::hex << b.begin;
    const Block& o = ours->blocks[k];
    EXPECT_EQ(o.begin, b.begin);
    EXPECT_EQ(o.end, b.end) << std::hex << b.begin;
    std::vector<uint64_t> a, c;
    for (uint32_t s : b.succs) a.push_back(theirs.blocks[s].begin);
    for (uint32_t s : o.succs) c.push_back(ours->blocks[s].begin);
    std::sort(a.begin(), a.end());
    std::sort(c.begin(), c.end());
    EXPECT_EQ(a, c) << std::hex << b.begin;
  }
}

// Little-endian words of an instruction stream.
std::vector<uint8_t> words(std::initializer_list<uint64_t> ws) {
  std::vector<uint8_t> out;
  for (uint64_t w : ws)
    for (int i = 0; i < 8; ++i) out.push_back(uint8_t(w >> (8 * i)));
  return out;
}

TEST(Sass, Sm75BranchesExitsAndCalls) {
  const uint64_t nop = 0x7918, pt = 0x000fc00003800000;  // NOP; the high word: PT as BRA's own predicate
  auto bra = [](int64_t rel, unsigned guard) { return (uint64_t(rel) << 32) | (uint64_t(guard) << 12) | 0x947; };
  auto code = words({nop | 0x7000, pt,                                      // 0x00
                     0x944 | 0x7000 | (uint64_t(0x40) << 32), pt,           // 0x10 CALL.REL 0x60
                     nop | 0x7000, pt,                                      // 0x20
                     bra(-0x30, 0), pt | 0x3ffff,                           // 0x30 @P0 BRA 0x10
                     0x94d | 0x7000, pt,                                    // 0x40 EXIT
                     bra(-0x10, 7), pt | 0x3ffff});                         // 0x50 BRA self
  auto cfg = cfg_from_sass(code, 0x1000, 75, {});
  ASSERT_TRUE(cfg.has_value());
  // [0x1000,0x1010) | [0x1010,0x1040) | [0x1040,0x1050) | [0x1050,0x1060)
  ASSERT_EQ(cfg->blocks.size(), 4u);
  EXPECT_EQ(cfg->blocks[1].begin, 0x1010u);
  EXPECT_EQ(cfg->blocks[1].succs.vector(), (std::vector<uint32_t>{2, 1}));  // falls through, then taken
  EXPECT_TRUE(cfg->blocks[2].succs.empty());                               // EXIT
  EXPECT_EQ(cfg->blocks[3].succs.vector(), (std::vector<uint32_t>{3}));
  EXPECT_EQ(nest(*cfg), "1010{}");  // the self-loop after EXIT is not reached
  ASSERT_EQ(cfg->call_sites.size(), 1u);
  EXPECT_EQ(cfg->call_sites[0].addr, 0x1010u);
  EXPECT_EQ(cfg->call_sites[0].target, 0x1060u);
  // CALL.ABS takes its callee from the relocation there, none where that symbol is undefined.
  auto abs = words({0x943 | 0x7000, pt, 0x943 | 0x7000, pt});
  auto calls = cfg_from_sass(abs, 0x2000, 75, [](uint64_t a) -> std::optional<uint64_t> {
    if (a == 0x2000) return 0x5000;
    return std::nullopt;
  });
  ASSERT_EQ(calls->call_sites.size(), 1u);
  EXPECT_EQ(calls->call_sites[0].target, 0x5000u);
}

// sm_86, checked against real code: the branches, exit and calls of a trap handler as
// cuobjdump printed them for sm_86 (each instruction's two 64-bit words and its target), the
// rest NOPs. Conditional BRA.U forward, unconditional BRA.U backward (two, to one loop
// header) and forward, RTT, EXIT, a BRA to itself; CALL.ABS with its callee from a
// relocation.
TEST(Sass, Sm86BranchesAsCuobjdumpDecodesThem) {
  struct Insn {
    uint64_t addr, lo, hi;
  };
  const uint64_t fwd = 0x000fea0003800000, back = 0x000fea000383ffff;
  const Insn real[] = {
      {0x110, 0x0000013100004947, 0x000fc00003800000},  // @P4 BRA.U 0x250
      {0x2d0, 0x000000f100009947, fwd},                 // @!P1 BRA.U 0x3d0
      {0x410, 0x32f6ac0000007943, 0x000fc00003807fac},  // CALL.ABS
      {0x450, 0x0000003100008947, fwd},                 // @!P0 BRA.U 0x490
      {0x4a0, 0x0000005100008947, fwd},                 // @!P0 BRA.U 0x500
      {0x510, 0x0000003100008947, fwd},                 // @!P0 BRA.U 0x550
      {0x560, 0x0000004100008947, fwd},                 // @!P0 BRA.U 0x5b0
      {0x5a0, 0xfffffe5100007947, back},                // BRA.U 0x400
      {0x5c0, 0x0000004100008947, fwd},                 // @!P0 BRA.U 0x610
      {0x600, 0x0000023100007947, fwd},                 // BRA.U 0x840
      {0x620, 0x0000004100008947, fwd},                 // @!P0 BRA.U 0x670
      {0x660, 0xfffffd9100007947, back},                // BRA.U 0x400
      {0x680, 0x0000005100008947, fwd},                 // @!P0 BRA.U 0x6e0
      {0x6f0, 0x0000003100008947, fwd},                 // @!P0 BRA.U 0x730
      {0x830, 0x000000000000794f, 0x000fc00000000000},  // RTT
      {0x840, 0x000000000000794d, 0x000fc00003e00000},  // EXIT.PREEMPTED.NO_ATEXIT
      {0x850, 0xfffffff000007947, 0x000fc0000383ffff},  // BRA 0x850
  };
  std::vector<uint64_t> ws(2 * 0x86);
  for (size_t k = 0; k < 0x86; ++k) {
    ws[2 * k] = 0x7918;                  // NOP
    ws[2 * k + 1] = 0x000fc00000000000;
  }
  for (const Insn& i : real) {
    ws[i.addr / 8] = i.lo;
    ws[i.addr / 8 + 1] = i.hi;
  }
  std::vector<uint8_t> code(ws.size() * 8);
  std::memcpy(code.data(), ws.data(), code.size());
  auto cfg = cfg_from_sass(code, 0, 86, [](uint64_t a) -> std::optional<uint64_t> {
    if (a == 0x410) return 0x8000;
    return std::nullopt;
  });
  ASSERT_TRUE(cfg.has_value());
  // Each block that ends in a branch or an exit, by its last instruction: its successors'
  // first addresses, the fall-through first.
  std::map<uint64_t, std::vector<uint64_t>> succs;
  for (const Block& b : cfg->blocks) {
    std::vector<uint64_t> to;
    for (uint32_t s : b.succs.vector()) to.push_back(cfg->blocks[s].begin);
    succs[b.last] = to;
  }
  const std::map<uint64_t, std::vector<uint64_t>> expected = {
      {0x110, {0x120, 0x250}}, {0x2d0, {0x2e0, 0x3d0}}, {0x450, {0x460, 0x490}}, {0x4a0, {0x4b0, 0x500}},
      {0x510, {0x520, 0x550}}, {0x560, {0x570, 0x5b0}}, {0x5a0, {0x400}},         {0x5c0, {0x5d0, 0x610}},
      {0x600, {0x840}},        {0x620, {0x630, 0x670}}, {0x660, {0x400}},         {0x680, {0x690, 0x6e0}},
      {0x6f0, {0x700, 0x730}}, {0x830, {}},             {0x840, {}},              {0x850, {0x850}}};
  for (const auto& [last, to] : expected) {
    ASSERT_TRUE(succs.count(last)) << std::hex << "no block ends at 0x" << last;
    EXPECT_EQ(succs[last], to) << std::hex << "the block ending at 0x" << last;
  }
  ASSERT_EQ(cfg->call_sites.size(), 1u);
  EXPECT_EQ(cfg->call_sites[0].addr, 0x410u);
  EXPECT_EQ(cfg->call_sites[0].target, 0x8000u);
}

// The tab-separated fields of each line of a testdata table, comments (#) and blank lines
// left out.
std::vector<std::vector<std::string>> table_rows(const std::string& name) {
  std::ifstream in(std::string(HPC_SOURCE_DIR) + "/src/structure/testdata/" + name);
  EXPECT_TRUE(in.good()) << name;
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f;
    std::stringstream fields(line);
    for (std::string x; std::getline(fields, x, '\t');) f.push_back(x);
    rows.push_back(std::move(f));
  }
  return rows;
}

// Every branch of those functions' listing (testdata/sass_sm86_branches.tsv: 94 BRA.U and
// 13 BRA, forward and backward, guarded and not), each decoded alone among NOPs: its taken
// edge goes to the target cuobjdump printed.
TEST(Sass, Sm86EveryListedBranch) {
  size_t branches = 0;
  for (const auto& f : table_rows("sass_sm86_branches.tsv")) {
    ASSERT_EQ(f.size(), 4u) << f[0];
    const uint64_t addr = std::stoull(f[0], nullptr, 16), lo = std::stoull(f[1], nullptr, 16),
                   hi = std::stoull(f[2], nullptr, 16), target = std::stoull(f[3], nullptr, 16);
    std::vector<uint64_t> ws((std::max(addr, target) + 0x20) / 8);
    for (size_t k = 0; k < ws.size(); k += 2) {
      ws[k] = 0x7918;  // NOP
      ws[k + 1] = 0x000fc00000000000;
    }
    ws[addr / 8] = lo;
    ws[addr / 8 + 1] = hi;
    std::vector<uint8_t> code(ws.size() * 8);
    std::memcpy(code.data(), ws.data(), code.size());
    auto cfg = cfg_from_sass(code, 0, 86, {});
    ASSERT_TRUE(cfg.has_value());
    bool taken = false;
    for (const Block& b : cfg->blocks)
      if (b.last == addr)
        for (uint32_t s : b.succs.vector()) taken = taken || cfg->blocks[s].begin == target;
    EXPECT_TRUE(taken) << f[0];
    ++branches;
  }
  EXPECT_EQ(branches, 107u);
}

// Real sm_90 code (testdata/sass_sm90_call_switch.tsv): kernel 0 calls a device function
// twice (CALL.REL) and that function loops and returns (RET.REL); kernel 1 is a switch of
// seven cases through a jump table (BRX), inside a BSSY/BSYNC region. `kernel`'s code, NOPs
// after it up to `size` bytes, and its listed targets by instruction address.
struct Sm90Listing {
  std::vector<uint8_t> code;
  std::map<uint64_t, std::string> target;  // "x" for EXIT and RET, "i" for the BRX
};

Sm90Listing sm90_listing(int kernel, size_t size) {
  std::vector<uint64_t> ws(size / 8);
  for (size_t k = 0; k < ws.size(); k += 2) {
    ws[k] = 0x7918;  // NOP
    ws[k + 1] = 0x000fc00000000000;
  }
  Sm90Listing out;
  for (const auto& f : table_rows("sass_sm90_call_switch.tsv")) {
    EXPECT_EQ(f.size(), 5u) << f[0];
    if (f.size() != 5 || std::stoi(f[0]) != kernel) continue;
    const uint64_t addr = std::stoull(f[1], nullptr, 16);
    ws[addr / 8] = std::stoull(f[2], nullptr, 16);
    ws[addr / 8 + 1] = std::stoull(f[3], nullptr, 16);
    if (f[4] != "-") out.target[addr] = f[4];
  }
  out.code.resize(ws.size() * 8);
  std::memcpy(out.code.data(), ws.data(), out.code.size());
  return out;
}

// The jump table of kernel 1's BRX at 0x140, as its EIATTR_INDIRECT_BRANCH_TARGETS lists it.
const std::vector<uint64_t> kSwitchTargets = {0x1f0, 0x270, 0x320, 0x380, 0x3d0, 0x480, 0x150};

std::map<uint64_t, std::vector<uint64_t>> successors_by_last(const Cfg& cfg) {
  std::map<uint64_t, std::vector<uint64_t>> succs;
  for (const Block& b : cfg.blocks) {
    std::vector<uint64_t> to;
    for (uint32_t s : b.succs.vector()) to.push_back(cfg.blocks[s].begin);
    succs[b.last] = to;
  }
  return succs;
}

std::vector<bool> reachable(const Cfg& cfg) {
  std::vector<bool> seen(cfg.blocks.size(), false);
  std::vector<uint32_t> work = {cfg.entry};
  seen[cfg.entry] = true;
  while (!work.empty()) {
    uint32_t b = work.back();
    work.pop_back();
    for (uint32_t s : cfg.blocks[b].succs)
      if (!seen[s]) seen[s] = true, work.push_back(s);
  }
  return seen;
}

TEST(Sass, Sm90CallsAndBranchesAsCuobjdumpDecodesThem) {
  for (int kernel : {0, 1}) {
    Sm90Listing l = sm90_listing(kernel, 0x600);
    auto cfg = cfg_from_sass(l.code, 0, 90, {});
    ASSERT_TRUE(cfg.has_value());
    auto succs = successors_by_last(*cfg);
    std::vector<uint64_t> calls;
    for (const auto& [addr, target] : l.target) {
      if (target == "i") continue;
      if (target == "x") {  // EXIT, RET.REL: the block ends there and goes nowhere
        ASSERT_TRUE(succs.count(addr)) << std::hex << addr;
        EXPECT_TRUE(succs[addr].empty()) << std::hex << addr;
        continue;
      }
      const uint64_t to = std::stoull(target, nullptr, 16);
      if (cfg->block_at(addr) >= 0 && succs.count(addr)) {  // a branch: its taken edge
        const auto& s = succs[addr];
        EXPECT_NE(std::find(s.begin(), s.end(), to), s.end()) << std::hex << addr << " -> " << to;
      } else if (to == 0x180) {  // kernel 0's calls of its device function
        calls.push_back(addr);
      } else {  // BSSY: where its threads meet again begins a block
        EXPECT_EQ(cfg->blocks[cfg->block_at(to)].begin, to) << std::hex << addr;
      }
    }
    std::vector<uint64_t> sites;
    for (const auto& c : cfg->call_sites) {
      EXPECT_EQ(c.target, 0x180u);
      EXPECT_EQ(c.size, 16u);
      sites.push_back(c.addr);
    }
    EXPECT_EQ(sites, calls);
    EXPECT_EQ(calls.size(), kernel == 0 ? 2u : 0u);
  }
}

TEST(Sass, Sm90SwitchGoesToItsListedTargets) {
  Sm90Listing l = sm90_listing(1, 0x600);
  auto indirect = [](uint64_t a) {
    return a == 0x140 ? std::span<const uint64_t>(kSwitchTargets) : std::span<const uint64_t>();
  };
  auto cfg = cfg_from_sass(l.code, 0, 90, {}, indirect);
  ASSERT_TRUE(cfg.has_value());
  // The blocks the listing's own analysis shows (by instruction: 0-16, 17-20, 21-30, ...,
  // 84-88), then the self-branch and the padding after the EXIT.
  std::vector<uint64_t> begins;
  for (const Block& b : cfg->blocks) begins.push_back(b.begin);
  EXPECT_EQ(begins, (std::vector<uint64_t>{0, 0x110, 0x150, 0x1f0, 0x270, 0x320, 0x380, 0x3d0, 0x480, 0x500,
                                           0x530, 0x540, 0x590, 0x5a0}));
  auto succs = successors_by_last(*cfg);
  EXPECT_EQ(succs[0x140], kSwitchTargets);  // the BRX: every case, in the table's order
  EXPECT_EQ(succs[0x100], (std::vector<uint64_t>{0x110, 0x500}));  // past the table: the default
  for (uint64_t last : {0x1e0, 0x260, 0x310, 0x370, 0x3c0, 0x470, 0x4f0})
    EXPECT_EQ(succs[last], (std::vector<uint64_t>{0x530})) << std::hex << last;
  auto seen = reachable(*cfg);
  for (size_t b = 0; b < cfg->blocks.size(); ++b)
    EXPECT_EQ(seen[b], cfg->blocks[b].begin < 0x590) << std::hex << cfg->blocks[b].begin;

  // Without the listed targets the BRX goes nowhere and no case is reached.
  auto blind = cfg_from_sass(l.code, 0, 90, {});
  ASSERT_TRUE(blind.has_value());
  EXPECT_TRUE(successors_by_last(*blind)[0x140].empty());
  auto unseen = reachable(*blind);
  EXPECT_FALSE(unseen[blind->block_at(0x150)] || unseen[blind->block_at(0x480)]);

  // The switch in a loop (the EXIT made `@P1 BRA 0x110`): only through the BRX's edges do
  // the cases close it.
  std::vector<uint8_t> looped = l.code;
  const uint64_t bra[2] = {0xfffffffb00201947, 0x000fea000383ffff};  // -5 x 256 + 0x20 x 4 from 0x590
  std::memcpy(looped.data() + 0x580, bra, 16);
  auto loop = cfg_from_sass(looped, 0, 90, {}, indirect);
  ASSERT_TRUE(loop.has_value());
  EXPECT_EQ(successors_by_last(*loop)[0x580], (std::vector<uint64_t>{0x590, 0x110}));
  EXPECT_EQ(nest(*loop), "110{}590{}");  // and the self-branch after the code, now reached
  LoopForest f = find_loops(*loop);
  const int head = f.innermost[loop->block_at(0x110)];
  ASSERT_GE(head, 0);
  for (uint64_t in : {0x150, 0x1f0, 0x270, 0x320, 0x380, 0x3d0, 0x480, 0x530, 0x540})
    EXPECT_EQ(f.innermost[loop->block_at(in)], head) << std::hex << in;
  EXPECT_EQ(f.innermost[loop->block_at(0x500)], -1);  // the default's block: only the way in
  EXPECT_EQ(nest(*cfg_from_sass(looped, 0, 90, {})), "590{}");
}

// .nv.info attributes: format, attribute, then nothing (1), a 16-bit value (3), or a 16-bit
// size and that many bytes (4).
std::vector<uint8_t> nv_attr(uint8_t format, uint8_t attr, std::vector<uint32_t> words = {}) {
  std::vector<uint8_t> out = {format, attr};
  if (format == 3) out.push_back(0xff), out.push_back(0x00);
  if (format == 4) {
    const size_t n = words.size() * 4;
    out.push_back(uint8_t(n)), out.push_back(uint8_t(n >> 8));
    for (uint32_t w : words)
      for (int i = 0; i < 4; ++i) out.push_back(uint8_t(w >> (8 * i)));
  }
  return out;
}

TEST(Sass, IndirectTargetsFromNvInfo) {
  std::vector<uint8_t> info;
  auto add = [&](const std::vector<uint8_t>& a) { info.insert(info.end(), a.begin(), a.end()); };
  add(nv_attr(4, 0x17, {0, 0x100002, 0x21f000}));  // KPARAM_INFO
  add(nv_attr(3, 0x1b));                           // MAXREG_COUNT
  add(nv_attr(1, 0x30));                           // a flag
  add(nv_attr(4, 0x1c, {0x580}));                  // EXIT_INSTR_OFFSETS
  std::vector<uint32_t> record = {0x140, 0, 7};
  record.insert(record.end(), kSwitchTargets.begin(), kSwitchTargets.end());
  record.insert(record.end(), {0x400, 0, 2, 0x410, 0x420});  // a second branch in the record
  add(nv_attr(4, 0x34, record));
  add(nv_attr(4, 0x05, {256, 1, 1}));  // MAX_THREADS
  auto t = nv_info_indirect_targets(info, 0x7000, 0x600);
  ASSERT_EQ(t.size(), 2u);
  std::vector<uint64_t> expected;
  for (uint64_t a : kSwitchTargets) expected.push_back(0x7000 + a);
  EXPECT_EQ(t[0x7140], expected);
  EXPECT_EQ(t[0x7400], (std::vector<uint64_t>{0x7410, 0x7420}));

  // Outside the code, or a count past the record: left out; every cut of the bytes is safe.
  auto none = nv_info_indirect_targets(nv_attr(4, 0x34, {0x140, 0, 1, 0x900}), 0, 0x600);
  EXPECT_TRUE(none.empty());
  EXPECT_TRUE(nv_info_indirect_targets(nv_attr(4, 0x34, {0x700, 0, 1, 0x10}), 0, 0x600).empty());
  EXPECT_TRUE(nv_info_indirect_targets(nv_attr(4, 0x34, {0x140, 0, 9, 0x10}), 0, 0x600).empty());
  for (size_t n = 0; n < info.size(); ++n) {
    auto cut = nv_info_indirect_targets(std::span<const uint8_t>(info.data(), n), 0, 0x600);
    EXPECT_TRUE(cut.empty() || cut.size() == 2) << n;
  }
  // An attribute of an unknown format ends the walk.
  std::vector<uint8_t> odd = {2, 0x99, 0, 0};
  odd.insert(odd.end(), info.begin(), info.end());
  EXPECT_TRUE(nv_info_indirect_targets(odd, 0, 0x600).empty());
  // Random bytes, and the record with random words changed: every branch and target found
  // lies within the code.
  std::mt19937 rng(7);
  for (int round = 0; round < 2000; ++round) {
    std::vector<uint8_t> b = round % 2 ? info : std::vector<uint8_t>(rng() % 200);
    for (size_t k = 0; k < b.size(); ++k)
      if (round % 2 == 0 || rng() % 16 == 0) b[k] = uint8_t(round % 4 == 0 ? rng() % 5 : rng());
    for (const auto& [branch, to] : nv_info_indirect_targets(b, 0x1000, 0x600)) {
      EXPECT_TRUE(branch >= 0x1000 && branch < 0x1600);
      for (uint64_t x : to) EXPECT_TRUE(x >= 0x1000 && x < 0x1600);
    }
  }
}

// A cubin of one code section, written here: sm_90, `.text.<name>` holding `code`, and
// `.nv.info.<name>` holding `info` (its sh_info naming that code section); its function
// symbols `name` over the whole code and each of `more` (name, offset, size).
struct CubinSymbol {
  std::string name;
  uint64_t offset, size;
};
void write_cubin(const std::string& path, const std::string& name, const std::vector<uint8_t>& code,
                 const std::vector<uint8_t>& info, const std::vector<CubinSymbol>& more = {}) {
  const std::string shstr = std::string("\0.shstrtab\0.strtab\0.symtab\0", 27) + ".nv.info." + name + '\0' +
                            ".text." + name + '\0';
  std::vector<CubinSymbol> all = {{name, 0, code.size()}};
  all.insert(all.end(), more.begin(), more.end());
  std::string str(1, '\0');
  std::vector<Elf64_Sym> symbols(1 + all.size(), Elf64_Sym{});
  for (size_t k = 0; k < all.size(); ++k) {
    Elf64_Sym& y = symbols[k + 1];
    y.st_name = uint32_t(str.size());
    y.st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
    y.st_shndx = 5;
    y.st_value = all[k].offset;
    y.st_size = all[k].size;
    str += all[k].name + '\0';
  }
  const Elf64_Sym* syms = symbols.data();
  const size_t syms_size = symbols.size() * sizeof(Elf64_Sym);
  std::string out(sizeof(Elf64_Ehdr), '\0');
  auto put = [&](const void* p, size_t n, size_t align) {
    while (out.size() % align) out.push_back('\0');
    const size_t at = out.size();
    out.append(static_cast<const char*>(p), n);
    return at;
  };
  Elf64_Shdr sh[6] = {};
  sh[1] = {1, SHT_STRTAB, 0, 0, put(shstr.data(), shstr.size(), 1), shstr.size(), 0, 0, 1, 0};
  sh[2] = {11, SHT_STRTAB, 0, 0, put(str.data(), str.size(), 1), str.size(), 0, 0, 1, 0};
  sh[3] = {19, SHT_SYMTAB, 0, 0, put(syms, syms_size, 8), syms_size, 2, 1, 8, sizeof(Elf64_Sym)};
  sh[4] = {27, 0x70000000, 0, 0, put(info.data(), info.size(), 4), info.size(), 3, 5, 4, 0};
  sh[5] = {uint32_t(27 + 10 + name.size()), SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, 0,
           put(code.data(), code.size(), 128), code.size(), 3, 0, 128, 0};
  const size_t shoff = put(sh, sizeof sh, 8);
  Elf64_Ehdr eh = {};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = ET_EXEC;
  eh.e_machine = 190;  // EM_CUDA
  eh.e_version = EV_CURRENT;
  eh.e_flags = 0x5a055a;  // sm_90
  eh.e_ehsize = sizeof(Elf64_Ehdr);
  eh.e_shoff = shoff;
  eh.e_shentsize = sizeof(Elf64_Shdr);
  eh.e_shnum = 6;
  eh.e_shstrndx = 1;
  std::memcpy(out.data(), &eh, sizeof eh);
  std::ofstream(path, std::ios::binary) << out;
}

TEST(Cuda, SwitchInALoopThroughTheCubinsListedTargets) {
  // The sm_90 switch in a loop (above), in a cubin whose .nv.info lists the BRX's targets:
  // hpcstruct --gpucfg=yes reads them and finds the loop, the cases in it.
  Sm90Listing l = sm90_listing(1, 0x600);
  const uint64_t bra[2] = {0xfffffffb00201947, 0x000fea000383ffff};  // @P1 BRA 0x110
  std::memcpy(l.code.data() + 0x580, bra, 16);
  std::vector<uint32_t> record = {0x140, 0, 7};
  record.insert(record.end(), kSwitchTargets.begin(), kSwitchTargets.end());
  std::vector<uint8_t> info = nv_attr(4, 0x1c, {0x580});
  for (uint8_t b : nv_attr(4, 0x34, record)) info.push_back(b);
  const auto path = (std::filesystem::temp_directory_path() / "hpcstruct_sm90_switch.cubin").string();
  write_cubin(path, "t0_switch", l.code, info);
  auto image = ElfImage::open(path);
  ASSERT_TRUE(image.ok()) << image.status().message();
  const Section* text = (*image)->section_named(".text.t0_switch");
  ASSERT_NE(text, nullptr);
  auto targets = cuda_indirect_branch_targets(**image);
  ASSERT_EQ(targets.size(), 1u);
  std::vector<uint64_t> expected;
  for (uint64_t a : kSwitchTargets) expected.push_back(text->addr + a);
  EXPECT_EQ(targets[text->addr + 0x140], expected);
  const uint64_t base = text->addr;
  image = Status::error("closed");  // the file is written again below

  // The loops' headers, from the whole analysis (no nvdisasm: our SASS reading).
  auto headers = [&](const std::vector<uint8_t>& nv_info) {
    write_cubin(path, "t0_switch", l.code, nv_info);
    std::string warnings;
    auto s = gpucfg_without_nvdisasm(path, warnings);
    std::filesystem::remove(path);
    EXPECT_TRUE(s.ok()) << s.status().message();
    EXPECT_EQ(warnings, "");
    std::vector<uint64_t> out;
    const Procedure* p = s.ok() ? find(*s, "t0_switch") : nullptr;
    EXPECT_NE(p, nullptr);
    if (p)
      for (const auto& c : p->root.children)
        if (c->kind == Scope::Kind::Loop) out.push_back(c->loop_header - base);
    std::sort(out.begin(), out.end());
    return out;
  };
  EXPECT_EQ(headers(info), (std::vector<uint64_t>{0x110, 0x590}));
  EXPECT_EQ(headers(nv_attr(4, 0x1c, {0x580})), (std::vector<uint64_t>{0x590}));  // no targets listed
}

TEST(Cuda, Sm90CallSitesForTheCallingContextsOfPcSamples) {
  // Kernel 0 of the sm_90 listing calls its device function (at 0x180) twice: hpcprof's
  // reading of a cubin's calls alone (ProcedureAnalyzer::call_sites, what rebuilds the
  // calling contexts of PC samples in called device functions) finds both.
  Sm90Listing l = sm90_listing(0, 0x300);
  const auto path = (std::filesystem::temp_directory_path() / "hpcstruct_sm90_call.cubin").string();
  write_cubin(path, "t0_call", l.code, nv_attr(4, 0x1c, {0x170}), {{"t0_call_helper", 0x180, 0x180}});
  std::string saved = std::getenv("PATH") ? std::getenv("PATH") : "";
  setenv("PATH", "/nonexistent", 1);
  Options opt;
  opt.gpucfg = true;
  auto a = ProcedureAnalyzer::open(path, opt);
  setenv("PATH", saved.c_str(), 1);
  ASSERT_TRUE(a.ok()) << a.status().message();
  auto kernel = (*a)->find((*a)->begin(0));
  ASSERT_TRUE(kernel.has_value());
  const uint64_t base = (*a)->begin(*kernel);
  auto helper = (*a)->find(base + 0x180);
  ASSERT_TRUE(helper.has_value());
  EXPECT_EQ((*a)->begin(*helper), base + 0x180);
  auto sites = (*a)->call_sites(*kernel);
  ASSERT_EQ(sites.size(), 2u);
  EXPECT_EQ(sites[0].addr, base + 0xd0);
  EXPECT_EQ(sites[1].addr, base + 0x130);
  for (const CallSite& c : sites) EXPECT_EQ(c.target, base + 0x180);
  EXPECT_TRUE((*a)->call_sites(*helper).empty());
  a = Status::error("closed");
  std::filesystem::remove(path);
}

TEST(Sass, Sm70KernelAsCuobjdumpListsIt) {
  // A whole sm_70 kernel as a public cuobjdump listing printed it (words lo, hi): EXIT at
  // 0x60, then `BRA 0x70`, the branch to itself after every function's code.
  const uint64_t ws[] = {0x00000a00ff017624, 0x000fe400078e00ff, 0x000000fffffff389, 0x000fe200000e00ff,
                         0x00000020ff057424, 0x000fe200078e00ff, 0x0000580000027a02, 0x000fe40000000f00,
                         0x0000590000037a02, 0x000fd00000000f00, 0x0000000502007386, 0x000fe2000010e900,
                         0x000000000000794d, 0x000fea0003800000, 0xfffffff000007947, 0x000fc0000383ffff};
  std::vector<uint8_t> code(sizeof ws);
  std::memcpy(code.data(), ws, sizeof ws);
  auto cfg = cfg_from_sass(code, 0, 70, {});
  ASSERT_TRUE(cfg.has_value());
  auto succs = successors_by_last(*cfg);
  EXPECT_EQ(succs.size(), 2u);
  EXPECT_TRUE(succs[0x60].empty());
  EXPECT_EQ(succs[0x70], (std::vector<uint64_t>{0x70}));
}

TEST(Elf, SectionSizeThatWrapsAroundIsAnError) {
  // A damaged x86-64 binary (binary_fuzzer found it): its .plt.got's size is 2^64 - 0x5f8,
  // so offset + size wraps around to within the file. It was taken as 2^61 PLT slots, and
  // hpcstruct and hpcprof ran out of memory on it; now it is an error that names the section.
  const std::string path = std::string(HPC_SOURCE_DIR) + "/tests/fuzz/binary/plt-got-size-wraps.elf";
  auto image = ElfImage::open(path);
  ASSERT_FALSE(image.ok());
  EXPECT_NE(image.status().message().find("section .plt.got extends past the end of the file"), std::string::npos)
      << image.status().message();
  auto s = analyze_binary(path, Options{});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find(path), std::string::npos) << s.status().message();
}

TEST(Sass, AnyBytesGiveAWellFormedGraph) {
  // Random code of every encoding, control-flow opcodes made common: blocks in order and
  // disjoint, within the code, each edge to a block's first instruction, preds the inverse.
  std::mt19937_64 rng(12345);
  const uint64_t wide_ops[] = {0x947, 0x949, 0x94d, 0x950, 0x95c, 0x944, 0x943, 0x945, 0x918};
  const uint64_t narrow_ops[] = {0xe24, 0xe25, 0xe30, 0xe32, 0xe34, 0xe35, 0xe29, 0xe2a, 0xe2b, 0xe26, 0x5c9};
  for (unsigned sm : {62u, 75u, 90u}) {
    for (int round = 0; round < 200; ++round) {
      const size_t n = 1 + rng() % 64;
      std::vector<uint64_t> ws;
      for (size_t i = 0; i < (sm < 70 ? n : 2 * n); ++i) {
        uint64_t w = rng();
        if (sm < 70 && rng() % 2) w = (w & ((uint64_t(1) << 52) - 1) & ~(uint64_t(0xfff) << 20)) |
                                     (narrow_ops[rng() % std::size(narrow_ops)] << 52) |
                                     (uint64_t(rng() % 48) << 23);  // small offsets, some in range
        if (sm < 70 && rng() % 8 == 0) w = 0xf0f800000000000full | (uint64_t(rng() % 16) << 16);
        if (sm >= 70 && i % 2 == 0 && rng() % 2)
          w = (w & ~uint64_t(0xfff) & 0xffffffffull) | wide_ops[rng() % std::size(wide_ops)] |
              (uint64_t(int64_t(rng() % 64) - 32) << 36);
        ws.push_back(w);
      }
      std::vector<uint8_t> code;
      for (uint64_t w : ws)
        for (int i = 0; i < 8; ++i) code.push_back(uint8_t(w >> (8 * i)));
      const uint64_t begin = 0x4000;
      auto cfg = cfg_from_sass(code, begin, sm, [](uint64_t a) -> std::optional<uint64_t> { return a * 3; });
      ASSERT_TRUE(cfg.has_value());
      for (size_t b = 0; b < cfg->blocks.size(); ++b) {
        const Block& bl = cfg->blocks[b];
        ASSERT_LT(bl.begin, bl.end);
        ASSERT_LE(bl.end, begin + code.size());
        ASSERT_GE(bl.begin, begin);
        ASSERT_TRUE(bl.last >= bl.begin && bl.last < bl.end);
        if (b + 1 < cfg->blocks.size()) {
          ASSERT_LE(bl.end, cfg->blocks[b + 1].begin);
        }
        for (uint32_t t : bl.succs) {
          ASSERT_LT(t, cfg->blocks.size());
          const auto& p = cfg->blocks[t].preds;
          ASSERT_NE(std::find(p.begin(), p.end(), uint32_t(b)), p.end());
        }
      }
      find_loops(*cfg);  // and the loop finder takes it
    }
  }
}

TEST(Sass, Sm62ControlWordsSsyAndSync) {
  // 8-byte instructions, a control word at every 32 bytes; offsets from the next instruction
  // in bits 20-43; a target on a control word means the instruction after it.
  auto op = [](uint64_t opcode, int64_t rel, unsigned guard) {
    return (opcode << 52) | ((uint64_t(rel) & 0xffffff) << 20) | (uint64_t(guard) << 16) | 0xf;
  };
  const uint64_t ctrl = 0x001f8800fc2007f6, mov = 0x5c98078000070001;  // a MOV, guard PT
  auto code = words({ctrl,                 // 0x00
                     op(0xe29, 0x30, 0),   // 0x08 SSY 0x40: a control word, so 0x48
                     mov,                  // 0x10 the loop's header
                     0xf0f800000000000full,  // 0x18 @P0 SYNC
                     ctrl,                 // 0x20
                     mov,                  // 0x28
                     op(0xe24, -0x28, 7),  // 0x30 BRA 0x10
                     mov,                  // 0x38
                     ctrl,                 // 0x40
                     mov,                  // 0x48
                     mov,                  // 0x50
                     op(0xe30, 0, 7)});    // 0x58 EXIT
  auto cfg = cfg_from_sass(code, 0x1000, 62, {});
  ASSERT_TRUE(cfg.has_value());
  // Each block holds the control word before its first instruction:
  // [0x1000,0x1010) | [0x1010,0x1020) | [0x1020,0x1038) | [0x1038,0x1040) | [0x1040,0x1060)
  ASSERT_EQ(cfg->blocks.size(), 5u);
  EXPECT_EQ(cfg->blocks[0].begin, 0x1000u);
  EXPECT_EQ(cfg->blocks[2].begin, 0x1020u);
  EXPECT_EQ(cfg->blocks[2].end, 0x1038u);
  EXPECT_EQ(cfg->blocks[3].end, 0x1040u);
  EXPECT_EQ(cfg->blocks[4].begin, 0x1040u);
  EXPECT_EQ(cfg->blocks[1].succs.vector(), (std::vector<uint32_t>{2, 4}));  // SYNC: on, or to the SSY's
  EXPECT_EQ(cfg->blocks[2].succs.vector(), (std::vector<uint32_t>{1}));
  EXPECT_EQ(cfg->blocks[3].succs.vector(), (std::vector<uint32_t>{4}));
  EXPECT_TRUE(cfg->blocks[4].succs.empty());
  // A CAL names its callee's first address, a control word: no instruction after it.
  auto cal = words({ctrl, op(0xe26, 0x100 - 0x10, 7), mov, mov});
  auto called = cfg_from_sass(cal, 0x2000, 62, {});
  ASSERT_EQ(called->call_sites.size(), 1u);
  EXPECT_EQ(called->call_sites[0].addr, 0x2008u);
  EXPECT_EQ(called->call_sites[0].size, 8u);
  EXPECT_EQ(called->call_sites[0].target, 0x2100u);
  EXPECT_EQ(nest(*cfg), "1010{}");
}

TEST(GpuCfg, NvdisasmComplaintIsItsLastErrorLine) {
  // As CUDA 13.0's nvdisasm printed for a CUDA 11.2 cubin.
  EXPECT_EQ(nvdisasm_complaint("nvdisasm warning : Disassembling Std Elf to Old format or Old Elf to Std format "
                               "not supported yet, switching to Old format\n"
                               "nvdisasm warning : Dataflow analysis disabled due to previous warnings\n"
                               "nvdisasm error   : Cannot print control flow graph as flow analysis is disabled\n"),
            "Cannot print control flow graph as flow analysis is disabled");
  EXPECT_EQ(nvdisasm_complaint("nvdisasm fatal   : Could not open input file 'x'\nsome trailing note\n\n"),
            "Could not open input file 'x'");
  EXPECT_EQ(nvdisasm_complaint("  just a line  \r\n"), "just a line");
  EXPECT_EQ(nvdisasm_complaint(""), "");
}

TEST(GpuCfg, ParsesNvdisasmRecordsAndPorts) {
  auto g = parse_nvdisasm_cfg(slurp(std::string(HPC_SOURCE_DIR) + "/src/structure/testdata/nvdisasm_cfg_sm75.dot"));
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_EQ(g->nodes.size(), 6u);
  const auto& entry = g->nodes[0];
  EXPECT_EQ(entry.name, "_Z4f3_2v");
  ASSERT_EQ(entry.fields.size(), 2u);
  EXPECT_EQ(entry.fields[0].port, "entry");
  ASSERT_EQ(entry.fields[0].insts.size(), 6u);  // the directives and labels are not instructions
  EXPECT_EQ(entry.fields[0].insts[0].text, "MOV R1, c[0x0][0x28]");
  EXPECT_EQ(entry.fields[1].port, "exit0");
  EXPECT_EQ(entry.fields[1].insts.at(0).offset, 0x60u);
  EXPECT_EQ(entry.fields[1].insts.at(0).text, "@P0 BRA `(.L_x_4)");
  EXPECT_EQ(g->edges.size(), 8u);
  EXPECT_EQ(g->edges[0].from, "_Z4f3_2v");
  EXPECT_EQ(g->edges[0].from_port, "exit0");
  EXPECT_EQ(g->edges[0].to, ".L_x_4");
}

TEST(GpuCfg, LoopNestFromTheGraph) {
  auto g = parse_nvdisasm_cfg(slurp(std::string(HPC_SOURCE_DIR) + "/src/structure/testdata/nvdisasm_cfg_sm75.dot"));
  ASSERT_TRUE(g.ok()) << g.status().message();
  Cfg cfg = cfg_from_nvgraph(*g, 0x13300, 0x13300, 0x13900);
  // entry | outer header | inner loop | outer latch | exit | unreachable self-loop
  ASSERT_EQ(cfg.blocks.size(), 6u);
  EXPECT_EQ(cfg.blocks[0].end, 0x13370u);
  EXPECT_EQ(cfg.blocks[2].begin, 0x13500u);
  EXPECT_EQ(cfg.blocks[2].last, 0x137a0u);
  EXPECT_EQ(cfg.entry, 0u);
  auto f = find_loops(cfg);
  ASSERT_EQ(f.loops.size(), 2u);  // the unreachable `BRA self` after EXIT is no loop
  EXPECT_EQ(cfg.blocks[f.loops[0].header].begin, 0x13370u);
  EXPECT_EQ(cfg.blocks[f.loops[1].header].begin, 0x13500u);
  EXPECT_EQ(f.loops[1].parent, 0);
  EXPECT_EQ(f.innermost[3], 0);
  EXPECT_EQ(f.innermost[4], -1);
}

TEST(GpuCfg, DualIssueAndBranchInsideANode) {
  // sm_60 shape (8-byte instructions, control words at 0x00, 0x20, ...): a "{ a; b }" pair
  // whose second instruction branches mid-node, the node going on after it (<exitpost0>).
  const char* dot =
      "digraph f {\nsubgraph \"cluster_k\" {\nnode [fontname=\"Courier\",fontsize=10,shape=Mrecord];\n"
      "\"k\"\n[label=\"{<entry>k:\\l0008:\\ \\ \\ MOV\\ R1,\\ c\\[0x0\\]\\[0x20\\];\\l}\"]\n"
      "\"k\":entry:s -> \".L_1\":entry:n [style=solid];\n"
      "\".L_1\"\n[label=\"{<entry>.L_1:\\l0010:\\ \\ \\ IADD\\ R0,\\ R0,\\ 0x1;\\l"
      "|<exit0>0018:\\ \\{\\ MOV\\ R2,\\ R4;\\l/*0028*/\\ \\ \\ @P0\\ BRA\\ `(.L_2);\\}\\l"
      "|<exitpost0>0030:\\ \\ \\ ISETP.LT.AND\\ P1,\\ PT,\\ R0,\\ 0x8,\\ PT;\\l"
      "|<exit1>0038:\\ \\ \\ @P1\\ BRA\\ `(.L_1);\\l}\"]\n"
      "\".L_1\":exit0:e -> \".L_2\":entry:n [style=solid];\n"
      "\".L_1\":exit1:e -> \".L_1\":entry:n [style=solid];\n"
      "\".L_1\":exit1:s -> \".L_2\":entry:n [style=solid];\n"
      "\".L_2\"\n[label=\"{<entry>.L_2:\\l|<exit0>0048:\\ \\ \\ EXIT;\\l}\"]\n}\n}\n";
  auto g = parse_nvdisasm_cfg(dot);
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_EQ(g->nodes.at(1).fields.at(1).insts.size(), 2u);
  EXPECT_EQ(g->nodes[1].fields[1].insts[1].offset, 0x28u);
  Cfg cfg = cfg_from_nvgraph(*g, 0x1000, 0x1000, 0x1100);
  // k [0x1008,0x1010) | .L_1 up to the pair [0x1010,0x1030) | [0x1030,0x1040) | .L_2
  ASSERT_EQ(cfg.blocks.size(), 4u);
  EXPECT_EQ(cfg.blocks[1].end, 0x1030u);
  EXPECT_EQ(cfg.blocks[1].succs.vector(), (std::vector<uint32_t>{2, 3}));  // fall-through, then taken
  auto f = find_loops(cfg);
  ASSERT_EQ(f.loops.size(), 1u);
  EXPECT_EQ(cfg.blocks[f.loops[0].header].begin, 0x1010u);
  EXPECT_EQ(f.innermost[2], 0);
}

TEST(GpuCfg, NotADigraphIsAnError) {
  auto g = parse_nvdisasm_cfg("nvdisasm fatal : Could not open input file 'x'\n");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("line 1"), std::string::npos) << g.status().message();
}

// Hand-made CFGs: blocks are 16 bytes apart; `edges` lists (from, to).
Cfg make_cfg(size_t n, std::vector<std::pair<uint32_t, uint32_t>> edges) {
  Cfg cfg;
  for (size_t i = 0; i < n; ++i) cfg.blocks.push_back(Block{16 * i, 16 * i + 16, 16 * i, {}, {}});
  for (auto [a, b] : edges) {
    cfg.blocks[a].succs.push_back(b);
    cfg.blocks[b].preds.push_back(a);
  }
  return cfg;
}

TEST(Loops, IrreducibleLoopIsOneLoop) {
  // 0 -> 1, 0 -> 2, 1 <-> 2, 2 -> 3: a cycle with two entries.
  auto f = find_loops(make_cfg(4, {{0, 1}, {0, 2}, {1, 2}, {2, 1}, {2, 3}}));
  ASSERT_EQ(f.loops.size(), 1u);
  EXPECT_TRUE(f.loops[0].irreducible);
  EXPECT_EQ(f.innermost[1], 0);
  EXPECT_EQ(f.innermost[2], 0);
  EXPECT_EQ(f.innermost[3], -1);
}

TEST(Loops, NestedAndSelfLoops) {
  // 0 -> 1 -> 2 -> 2 (self), 2 -> 3 -> 1 (outer back edge), 3 -> 4.
  auto f = find_loops(make_cfg(5, {{0, 1}, {1, 2}, {2, 2}, {2, 3}, {3, 1}, {3, 4}}));
  ASSERT_EQ(f.loops.size(), 2u);
  EXPECT_EQ(f.loops[0].header, 1u);
  EXPECT_EQ(f.loops[1].header, 2u);
  EXPECT_EQ(f.loops[1].parent, 0);
  EXPECT_FALSE(f.loops[0].irreducible);
}

}  // namespace
}  // namespace hpc::structure
