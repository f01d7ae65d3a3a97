#include "structure/debug_info.hpp"

#include <cxxabi.h>
#include <fcntl.h>
#include <unistd.h>
#ifdef HPC_HAVE_LIBIBERTY
#define HAVE_DECL_BASENAME 1  // glibc's string.h declares it; libiberty.h would again
#include <libiberty/demangle.h>
#endif
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gelf.h>
#include <libelf.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <optional>

#include "structure/dwp.hpp"
#include "structure/elf_image.hpp"
#include "structure/line_table.hpp"

namespace hpc::structure {

namespace {

// Rust's symbols: v0 (`_R...`), and legacy ones (Itanium-style `_ZN...17h<16 hex digits>E`,
// which the C++ demangler leaves with their hash and `$LT$`-style escapes).
bool rust_symbol(const std::string& name) {
  if (name.size() > 2 && name[0] == '_' && name[1] == 'R') return true;
  const size_t n = name.size();
  if (n < 24 || name.compare(0, 3, "_ZN") != 0 || name[n - 1] != 'E' || name.compare(n - 20, 3, "17h") != 0) return false;
  for (size_t i = n - 17; i < n - 1; ++i)
    if (!std::isxdigit(static_cast<unsigned char>(name[i]))) return false;
  return true;
}

}  // namespace

std::string demangle(const std::string& name) {
#ifdef HPC_HAVE_LIBIBERTY
  if (rust_symbol(name)) {
    if (char* out = rust_demangle(name.c_str(), DMGL_PARAMS | DMGL_ANSI)) {
      std::string r(out);
      std::free(out);
      return r;
    }
  }
#endif
  if (name.size() < 2 || name[0] != '_' || name[1] != 'Z') return name;
  int status = 0;
  char* out = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  if (!out) return name;
  std::string r(out);
  std::free(out);
  return r;
}

bool InlineCall::contains(uint64_t a) const {
  for (const auto& r : ranges)
    if (a >= r.first && a < r.second) return true;
  return false;
}

void DebugUnit::finish() {
  // End-of-sequence rows sort first so a sequence starting where another ends wins.
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return a.addr != b.addr ? a.addr < b.addr : (a.end && !b.end);
  });
  spans.clear();
  max_span = 0;
  bytes = sizeof(DebugUnit) + rows.capacity() * sizeof(Row);
  for (const auto& s : subprograms) {
    bytes += sizeof(SubprogramInfo) + s->name.capacity() + s->link_name.capacity() + s->ranges.capacity() * sizeof(Range);
    for (const auto& c : s->inlines)
      bytes += sizeof(InlineCall) + c.callee.capacity() + c.ranges.capacity() * sizeof(Range);
    for (const auto& r : s->ranges) {
      spans.push_back({r.first, r.second, s.get()});
      max_span = std::max(max_span, r.second - r.first);
    }
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.lo < b.lo; });
  bytes += spans.capacity() * sizeof(Span);
}

namespace {

bool row_before(const DebugUnit::Row& a, const DebugUnit::Row& b) {
  return a.addr != b.addr ? a.addr < b.addr : (a.end && !b.end);
}

// libdw keeps what it has read until dwarf_end: the handle is renewed once its caches may
// exceed a quarter of the budget (units are evicted past the other three quarters). They
// hold the line tables libdw read (Dwarf_Line is some 48 bytes; most tables are read by
// line_table.cpp instead) and, for each unit, its header and abbreviations: measured with
// mallinfo2, 1.8 KiB a unit on many-units and 16 KiB on hpcprof's C++ units, 3.3 and 2.7
// times the unit's table in .debug_abbrev, so counted as 512 bytes plus 4 times that table.
// A new handle reads every unit header before the one asked for, so renewals are kept rare.
constexpr size_t kLibdwRowBytes = 64;
constexpr size_t kLibdwUnitBytes = 512;
constexpr size_t kLibdwPerAbbrevByte = 4;

}  // namespace

struct DebugInfo::Impl {
  mutable std::mutex filesMu;
  std::deque<std::string> files{""};
  std::unordered_map<std::string, uint32_t> fileIds;

  std::shared_ptr<DebugUnit> global;  // read whole (cubins); in every view
  std::vector<Dwarf_Off> cus;         // units read on demand, by DIE offset
  std::vector<uint32_t> libdwUnitBytes;  // what libdw keeps of each unit once read (estimate)
  struct CuSpan {
    uint64_t lo, hi;
    uint32_t cu;
  };
  std::vector<CuSpan> cuSpans;  // sorted by lo
  uint64_t maxCuSpan = 0;
  mutable std::vector<std::unique_ptr<SubprogramInfo>> summaries;  // names and ranges, lowest first
  mutable bool summarized = false;
  mutable bool evicted = false;  // the cache has let go of a unit: the debug info exceeds it
  uint32_t splitUnits = 0, splitMissing = 0;  // skeleton units, and those whose .dwo libdw did not find
  std::string splitMissingName;               // the first such .dwo's name
  // A DWARF package's split units (dwp.hpp), handed to libdw one at a time with the
  // skeleton's parts of .debug_addr and .debug_ranges: each from the base the skeleton
  // names to the next skeleton's base (or the section's end).
  std::unique_ptr<DwarfPackage> package;
  std::span<const uint8_t> addrSection, rangesSection;
  std::vector<uint64_t> addrBases, rangesBases;  // sorted
  std::unique_ptr<DwarfPackage::Unit> package_unit(Dwarf_Die* skeleton) const {
    uint64_t id = 0;
    if (!package || dwarf_cu_info(skeleton->cu, nullptr, nullptr, nullptr, nullptr, &id, nullptr, nullptr) != 0 ||
        !package->has(id))
      return nullptr;
    auto part = [&](std::span<const uint8_t> section, const std::vector<uint64_t>& bases, int attr, int gnuAttr) {
      Dwarf_Attribute a;
      Dwarf_Word base = 0;  // none named: the section's start
      if ((dwarf_attr(skeleton, attr, &a) || (gnuAttr && dwarf_attr(skeleton, gnuAttr, &a))) &&
          dwarf_formudata(&a, &base) != 0)
        return std::span<const uint8_t>();
      if (base >= section.size()) return std::span<const uint8_t>();
      auto next = std::upper_bound(bases.begin(), bases.end(), base);
      const uint64_t end = next == bases.end() ? section.size() : std::min<uint64_t>(*next, section.size());
      return section.subspan(base, end - base);
    };
    return package->unit(id, part(addrSection, addrBases, DW_AT_addr_base, DW_AT_GNU_addr_base),
                         part(rangesSection, rangesBases, DW_AT_GNU_ranges_base, 0));
  }

  Elf* elf = nullptr;
  const ElfImage* image = nullptr;  // its pages are let go as units are read
  std::vector<uint8_t> copy;  // relocated debug sections, when the binary needs them
  Elf* patched = nullptr;
  int patchedFd = -1;  // the file under `patched`, where libelf mapped it itself
  size_t cacheLimit = 0;
  std::optional<LineTableSections> lineSections;  // line tables read without libdw

  mutable std::mutex mu;  // everything below, and every libdw call
  mutable Dwarf* dw = nullptr;
  mutable size_t libdwBytes = 0;
  mutable uint32_t scanned = 0;  // units whose headers `dw` has read (it reads them in order)
  mutable std::list<uint32_t> lru;  // most recent first
  struct Cached {
    std::shared_ptr<const DebugUnit> unit;
    std::list<uint32_t>::iterator at;
  };
  mutable std::unordered_map<uint32_t, Cached> cache;
  mutable size_t cacheBytes = 0;
  mutable size_t unitsRead = 0;

  ~Impl() {
    if (dw) dwarf_end(dw);
    if (patched) elf_end(patched);
    if (patchedFd >= 0) ::close(patchedFd);
  }
  Dwarf* dwarf() const {
    if (dw && libdwBytes > cacheLimit / 4) {
      dwarf_end(dw);
      dw = nullptr;
    }
    if (!dw) {
      dw = dwarf_begin_elf(patched ? patched : elf, DWARF_C_READ, nullptr);
      libdwBytes = 0;
      scanned = 0;
    }
    return dw;
  }
  std::shared_ptr<const DebugUnit> read(DebugInfo& owner, uint32_t cu, bool linesOnly) const;
  std::shared_ptr<const DebugUnit> unit(DebugInfo& owner, uint32_t cu) const;
  bool evicted_now() const {
    std::lock_guard lock(mu);
    return evicted;
  }
  std::vector<uint32_t> units_in(uint64_t lo, uint64_t hi) const {
    std::vector<uint32_t> out;
    uint64_t from = lo > maxCuSpan ? lo - maxCuSpan : 0;
    auto it = std::lower_bound(cuSpans.begin(), cuSpans.end(), from,
                               [](const CuSpan& s, uint64_t a) { return s.lo < a; });
    for (; it != cuSpans.end() && it->lo < hi; ++it)
      if (it->hi > lo) out.push_back(it->cu);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }
};

DebugInfo::DebugInfo() : impl_(std::make_unique<Impl>()) {}
DebugInfo::~DebugInfo() = default;

uint32_t DebugInfo::intern_file(const std::string& name) {
  if (name.empty()) return 0;
  std::lock_guard lock(impl_->filesMu);
  auto [it, inserted] = impl_->fileIds.emplace(name, static_cast<uint32_t>(impl_->files.size()));
  if (inserted) impl_->files.push_back(name);
  return it->second;
}

std::string DebugInfo::file_name(uint32_t id) const {
  std::lock_guard lock(impl_->filesMu);
  return id < impl_->files.size() ? impl_->files[id] : std::string();
}

DebugInfo::SplitUnits DebugInfo::split_units() const { return {impl_->splitUnits, impl_->splitMissing, impl_->splitMissingName}; }

size_t DebugInfo::units_read() const {
  std::lock_guard lock(impl_->mu);
  return impl_->unitsRead;
}

SourceLoc DebugInfo::View::line_at(uint64_t addr) const {
  auto it = std::upper_bound(rows_.begin(), rows_.end(), addr,
                             [](uint64_t a, const DebugUnit::Row& r) { return a < r.addr; });
  if (it == rows_.begin()) return {};
  --it;
  if (it->end) return {};
  return {it->file, it->line};
}

uint64_t DebugInfo::View::next_row_after(uint64_t addr) const {
  auto it = std::upper_bound(rows_.begin(), rows_.end(), addr,
                             [](uint64_t a, const DebugUnit::Row& r) { return a < r.addr; });
  return it == rows_.end() ? UINT64_MAX : it->addr;
}

std::vector<const SubprogramInfo*> DebugInfo::View::subprograms_in(uint64_t lo, uint64_t hi) const {
  std::vector<std::pair<uint64_t, const SubprogramInfo*>> hits;
  for (const auto& u : units_) {
    uint64_t from = lo > u->max_span ? lo - u->max_span : 0;
    auto it = std::lower_bound(u->spans.begin(), u->spans.end(), from,
                               [](const DebugUnit::Span& s, uint64_t a) { return s.lo < a; });
    for (; it != u->spans.end() && it->lo < hi; ++it)
      if (it->hi > lo) hits.emplace_back(it->lo, it->sub);
  }
  if (units_.size() > 1)
    std::stable_sort(hits.begin(), hits.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<const SubprogramInfo*> out;
  for (const auto& [at, sub] : hits)
    if (std::find(out.begin(), out.end(), sub) == out.end()) out.push_back(sub);
  return out;
}

// Rows of several units that can answer for [lo, hi): each unit's rows from its last one at
// or before lo to its first one at or after hi, in the order one table of them all would have.
void DebugInfo::merge_rows(View& v, uint64_t lo, uint64_t hi) {
  auto byAddr = [](const DebugUnit::Row& r, uint64_t a) { return r.addr < a; };
  for (const auto& u : v.units_) {
    const auto& rows = u->rows;
    auto first = std::upper_bound(rows.begin(), rows.end(), lo, [](uint64_t a, const DebugUnit::Row& r) { return a < r.addr; });
    if (first != rows.begin()) first = std::lower_bound(rows.begin(), first, std::prev(first)->addr, byAddr);
    auto last = std::lower_bound(first, rows.end(), hi, byAddr);
    if (last != rows.end()) last = std::upper_bound(last, rows.end(), last->addr, [](uint64_t a, const DebugUnit::Row& r) { return a < r.addr; });
    v.merged_.insert(v.merged_.end(), first, last);
  }
  std::stable_sort(v.merged_.begin(), v.merged_.end(), row_before);
  v.rows_ = v.merged_;
}

DebugInfo::View DebugInfo::view(uint64_t lo, uint64_t hi) const {
  View v;
  if (impl_->global) v.units_.push_back(impl_->global);
  for (uint32_t cu : impl_->units_in(lo, hi)) v.units_.push_back(impl_->unit(const_cast<DebugInfo&>(*this), cu));
  if (v.units_.size() == 1) {
    v.rows_ = v.units_[0]->rows;
  } else if (v.units_.size() > 1) {
    merge_rows(v, lo, hi);
  }
  return v;
}

uint32_t DebugInfo::unit_of(uint64_t lo, uint64_t hi) const {
  auto at = impl_->units_in(lo, lo + 1);
  if (at.empty()) at = impl_->units_in(lo, hi);
  return at.empty() ? UINT32_MAX : at.front();
}

std::vector<SourceLoc> DebugInfo::lines_at(const std::vector<uint64_t>& addrs) const {
  // Line tables only, one unit after the other (addresses come mostly in unit order).
  std::vector<SourceLoc> out(addrs.size());
  std::map<uint32_t, std::shared_ptr<const DebugUnit>> held;
  for (size_t i = 0; i < addrs.size(); ++i) {
    uint64_t a = addrs[i];
    auto cus = impl_->units_in(a, a + 1);
    if (held.size() > 4)
      for (auto it = held.begin(); it != held.end();)
        it = std::find(cus.begin(), cus.end(), it->first) == cus.end() ? held.erase(it) : std::next(it);
    View v;
    if (impl_->global) v.units_.push_back(impl_->global);
    for (uint32_t cu : cus) {
      auto& u = held[cu];
      // Whole units through the cache while they all fit (the analysis needs them next),
      // line tables alone once they do not.
      if (!u) u = impl_->read(const_cast<DebugInfo&>(*this), cu, impl_->evicted_now());
      v.units_.push_back(u);
    }
    if (v.units_.size() == 1) {
      v.rows_ = v.units_[0]->rows;
    } else if (v.units_.size() > 1) {
      merge_rows(v, a, a + 1);
    }
    out[i] = v.line_at(a);
  }
  std::lock_guard lock(impl_->mu);
  if (impl_->dw) dwarf_end(impl_->dw);  // what libdw has cached is not needed again soon
  impl_->dw = nullptr;
  return out;
}

class DebugLoader {
public:
  // `summary`: subprograms with names and ranges only, no inline trees, no line rows.
  // `sections`: where line tables can be read without libdw (nullptr: through libdw).
  DebugLoader(DebugInfo& d, DebugUnit& u, bool summary = false, const LineTableSections* sections = nullptr)
      : d_(d), u_(u), summary_(summary), sections_(sections) {}

  // After unit_lines(cu), whose file table it reuses.
  void unit(Dwarf_Die* cu) {
    files_ = nullptr;
    nfiles_ = 0;
    // Split DWARF (-gsplit-dwarf): the skeleton unit in the binary has the line table and
    // the ranges, its split unit in a .dwo file (found by libdw from the skeleton's
    // DW_AT_dwo_name and DW_AT_comp_dir) the subprograms and inlined calls, whose file
    // attributes index the split unit's own file table (libdw's, read from the .dwo or,
    // lacking one, the skeleton's). Without the .dwo: lines only.
    uint8_t unitType = 0;
    Dwarf_Die split;
    if (dwarf_cu_info(cu->cu, nullptr, &unitType, nullptr, &split, nullptr, nullptr, nullptr) == 0 &&
        unitType == DW_UT_skeleton) {
      std::unique_ptr<DwarfPackage::Unit> packed;  // no .dwo: the split unit from a .dwp
      if (split.addr == nullptr || dwarf_tag(&split) != DW_TAG_compile_unit) {
        packed = d_.impl_->package_unit(cu);
        Dwarf_CU* unit = nullptr;
        if (!packed || dwarf_get_units(packed->dwarf(), nullptr, &unit, nullptr, nullptr, &split, nullptr) != 0 ||
            dwarf_tag(&split) != DW_TAG_compile_unit)
          return;
      }
      // The split unit's own file table where it has one (GNU's), else the skeleton's
      // (libdw falls back to it for a .dwo it linked; a package's unit stands alone).
      const bool own = own_;
      if (!summary_) {
        Dwarf_Files* files = nullptr;
        size_t n = 0;
        if (dwarf_getsrcfiles(&split, &files, &n) == 0 && n > 0) {
          own_ = false;
          files_ = files;
          nfiles_ = n;
        } else if (!own_) {
          dwarf_getsrcfiles(cu, &files_, &nfiles_);
        }
      }
      walk(&split, nullptr, -1, 0);
      own_ = own;
      return;
    }
    // File attributes are not read in a summary.
    if (!summary_ && !own_) dwarf_getsrcfiles(cu, &files_, &nfiles_);
    walk(cu, nullptr, -1, 0);
  }

  // The unit's own line table. Returns the rows libdw now holds (0 if read without it).
  size_t unit_lines(Dwarf_Die* cu) {
    if (sections_ && own_lines(cu)) return 0;
    Dwarf_Lines* lines = nullptr;
    size_t n = 0;
    if (dwarf_getsrclines(cu, &lines, &n) != 0) return 0;
    add_lines(lines, n);
    return n;
  }

  // Every line table of .debug_line, also those no unit refers to (cubins built with
  // -lineinfo have a line table and no .debug_info).
  void line_tables(Dwarf* dw) {
    Dwarf_Off off = 0, next = 0;
    Dwarf_Lines* lines = nullptr;
    size_t n = 0;
    Dwarf_CU* cu = nullptr;
    while (dwarf_next_lines(dw, off, &next, &cu, nullptr, nullptr, &lines, &n) == 0) {
      add_lines(lines, n);
      off = next;
    }
  }

private:
  // The line table read by line_table.cpp, as add_lines would have it from libdw.
  bool own_lines(Dwarf_Die* cu) {
    Dwarf_Attribute a;
    Dwarf_Word offset = 0;
    if (!dwarf_attr(cu, DW_AT_stmt_list, &a) || dwarf_formudata(&a, &offset) != 0) return false;
    const char* compDir = nullptr;
    if (dwarf_attr(cu, DW_AT_comp_dir, &a)) compDir = dwarf_formstring(&a);
    uint8_t addressSize = 0;
    Dwarf_Die cudie;
    if (!dwarf_diecu(cu, &cudie, &addressSize, nullptr)) return false;
    LineTable t;
    if (!read_line_table(*sections_, offset, compDir, addressSize, t)) return false;
    own_ = true;
    ownFiles_ = std::move(t.files);
    ownIds_.assign(ownFiles_.size(), UINT32_MAX);
    // In libdw's order of rows, as add_lines interns them.
    u_.rows.reserve(u_.rows.size() + t.rows.size());
    for (const auto& r : t.rows)
      u_.rows.push_back({r.addr, own_file(r.file), static_cast<uint32_t>(r.line < 0 ? 0 : r.line), r.end});
    return true;
  }
  uint32_t own_file(uint64_t idx) {
    if (idx >= ownFiles_.size()) return 0;
    if (ownIds_[idx] == UINT32_MAX) ownIds_[idx] = d_.intern_file(ownFiles_[idx]);
    return ownIds_[idx];
  }
  void add_lines(Dwarf_Lines* lines, size_t n) {
    u_.rows.reserve(u_.rows.size() + n);
    const char* lastName = nullptr;
    uint32_t lastId = 0;
    for (size_t i = 0; i < n; ++i) {
      Dwarf_Line* l = dwarf_onesrcline(lines, i);
      Dwarf_Addr addr = 0;
      int line = 0;
      bool end = false;
      dwarf_lineaddr(l, &addr);
      dwarf_lineno(l, &line);
      dwarf_lineendsequence(l, &end);
      const char* f = dwarf_linesrc(l, nullptr, nullptr);
      // libdw hands out the same pointer for the same file: intern once per run of rows.
      if (f != lastName || i == 0) {
        lastName = f;
        lastId = d_.intern_file(f ? f : "");
      }
      u_.rows.push_back({addr, lastId, static_cast<uint32_t>(line < 0 ? 0 : line), end});
    }
  }
  uint32_t file_attr(Dwarf_Die* die, int attr) {
    Dwarf_Attribute a;
    Dwarf_Word idx = 0;
    if (!dwarf_attr_integrate(die, attr, &a) || dwarf_formudata(&a, &idx) != 0) return 0;
    if (own_) return own_file(idx);
    if (!files_ || idx >= nfiles_) return 0;
    const char* f = dwarf_filesrc(files_, idx, nullptr, nullptr);
    return d_.intern_file(f ? f : "");
  }
  static uint32_t udata_attr(Dwarf_Die* die, int attr) {
    Dwarf_Attribute a;
    Dwarf_Word v = 0;
    if (!dwarf_attr_integrate(die, attr, &a) || dwarf_formudata(&a, &v) != 0) return 0;
    return static_cast<uint32_t>(v);
  }
  // A callee's pretty name. The same functions are inlined over and over: names are
  // demangled once per unit, keyed by their place in .debug_str.
  std::string callee_name(Dwarf_Die* callee) {
    const char* link = cstr_attr(callee, DW_AT_linkage_name);
    if (!link) link = cstr_attr(callee, DW_AT_MIPS_linkage_name);
    if (!link) return string_attr(callee, DW_AT_name);
    auto [it, fresh] = demangled_.try_emplace(link);
    if (fresh) it->second = demangle(link);
    return it->second;
  }
  static const char* cstr_attr(Dwarf_Die* die, int attr) {
    Dwarf_Attribute a;
    if (!dwarf_attr_integrate(die, attr, &a)) return nullptr;
    const char* s = dwarf_formstring(&a);
    return s && *s ? s : nullptr;
  }
  static std::string string_attr(Dwarf_Die* die, int attr) {
    Dwarf_Attribute a;
    if (!dwarf_attr_integrate(die, attr, &a)) return "";
    const char* s = dwarf_formstring(&a);
    return s ? s : "";
  }
  static std::vector<Range> ranges(Dwarf_Die* die) {
    std::vector<Range> out;
    Dwarf_Addr base = 0, lo = 0, hi = 0;
    for (ptrdiff_t off = 0; (off = dwarf_ranges(die, off, &base, &lo, &hi)) > 0;)
      if (hi > lo) out.emplace_back(lo, hi);
    return out;
  }

  // `blocks`: lexical blocks between the enclosing subprogram or call and `parent`'s children.
  void walk(Dwarf_Die* parent, SubprogramInfo* sub, int inlineParent, int blocks) {
    Dwarf_Die child;
    if (dwarf_child(parent, &child) != 0) return;
    do {
      int tag = dwarf_tag(&child);
      if (tag == DW_TAG_subprogram) {
        auto r = ranges(&child);
        if (r.empty()) {
          walk(&child, sub, inlineParent, blocks);
          continue;
        }
        auto info = std::make_unique<SubprogramInfo>();
        info->ranges = std::move(r);
        info->link_name = string_attr(&child, DW_AT_linkage_name);
        if (info->link_name.empty()) info->link_name = string_attr(&child, DW_AT_MIPS_linkage_name);
        info->name = info->link_name.empty() ? string_attr(&child, DW_AT_name) : demangle(info->link_name);
        if (!summary_) {
          info->decl_file = file_attr(&child, DW_AT_decl_file);
          info->decl_line = udata_attr(&child, DW_AT_decl_line);
        }
        SubprogramInfo* raw = info.get();
        u_.subprograms.push_back(std::move(info));
        walk(&child, raw, -1, 0);
      } else if (tag == DW_TAG_inlined_subroutine && summary_) {
        // no definitions inside
      } else if (tag == DW_TAG_inlined_subroutine && sub) {
        InlineCall call;
        call.ranges = ranges(&child);
        call.parent = inlineParent;
        call.call_file = file_attr(&child, DW_AT_call_file);
        call.call_line = udata_attr(&child, DW_AT_call_line);
        call.blocks = blocks;
        Dwarf_Attribute a;
        Dwarf_Die origin;
        Dwarf_Die* callee = &child;
        if (dwarf_attr(&child, DW_AT_abstract_origin, &a) && dwarf_formref_die(&a, &origin)) callee = &origin;
        call.callee = callee_name(callee);
        call.callee_file = file_attr(callee, DW_AT_decl_file);
        int self = static_cast<int>(sub->inlines.size());
        sub->inlines.push_back(std::move(call));
        walk(&child, sub, self, 0);
      } else {
        walk(&child, sub, inlineParent, blocks + (tag == DW_TAG_lexical_block));
      }
    } while (dwarf_siblingof(&child, &child) == 0);
  }

  DebugInfo& d_;
  DebugUnit& u_;
  bool summary_;
  std::unordered_map<const char*, std::string> demangled_;
  Dwarf_Files* files_ = nullptr;
  size_t nfiles_ = 0;
  const LineTableSections* sections_;
  bool own_ = false;  // the line table was read by line_table.cpp: its files below
  std::vector<std::string> ownFiles_;
  std::vector<uint32_t> ownIds_;  // interned on first use
};

std::vector<const SubprogramInfo*> DebugInfo::all_subprograms() const {
  std::vector<const SubprogramInfo*> out;
  if (impl_->global) {
    auto v = view(0, UINT64_MAX);
    return v.subprograms_in(0, UINT64_MAX);
  }
  Impl& m = *impl_;
  std::lock_guard lock(m.mu);
  if (!m.summarized) {
    // One pass over every unit's DIEs, inline trees skipped; libdw's caches go with it.
    m.summarized = true;
    DebugUnit summary;
    if (Dwarf* d = m.dwarf())
      for (Dwarf_Off off : m.cus) {
        Dwarf_Die die;
        if (dwarf_offdie(d, off, &die)) DebugLoader(const_cast<DebugInfo&>(*this), summary, true).unit(&die);
      }
    if (m.dw) dwarf_end(m.dw);
    m.dw = nullptr;
    std::stable_sort(summary.subprograms.begin(), summary.subprograms.end(),
                     [](const auto& a, const auto& b) { return a->ranges.front().first < b->ranges.front().first; });
    m.summaries = std::move(summary.subprograms);
  }
  for (const auto& s : m.summaries) out.push_back(s.get());
  return out;
}

std::shared_ptr<const DebugUnit> DebugInfo::Impl::read(DebugInfo& owner, uint32_t cu, bool linesOnly) const {
  std::lock_guard lock(mu);
  if (auto it = cache.find(cu); it != cache.end()) {
    lru.splice(lru.begin(), lru, it->second.at);
    return it->second.unit;
  }
  auto u = std::make_shared<DebugUnit>();
  Dwarf_Die die;
  Dwarf* d = dwarf();
  // A new handle finds a unit by reading the header of every unit before it. On a large
  // binary each header is on its own pages (mapped with their neighbours, 64 KiB a fault):
  // 10,000 units map some 600 MiB of the file at once. They are read in steps of
  // kHeaderStep units, with the pages let go in between.
  constexpr uint32_t kHeaderStep = 64;
  for (; d && scanned + kHeaderStep < cu; scanned += kHeaderStep) {
    Dwarf_Die skip;
    dwarf_offdie(d, cus[scanned + kHeaderStep], &skip);
    image->release_pages_if_over();
  }
  scanned = std::max(scanned, cu);
  if (d && dwarf_offdie(d, cus[cu], &die)) {
    DebugLoader loader(owner, *u, false, lineSections ? &*lineSections : nullptr);
    libdwBytes += loader.unit_lines(&die) * kLibdwRowBytes + libdwUnitBytes[cu];
    if (!linesOnly) loader.unit(&die);
  }
  u->finish();
  ++unitsRead;
  image->release_pages_if_over();
  if (linesOnly) return u;
  lru.push_front(cu);
  cache.emplace(cu, Cached{u, lru.begin()});
  cacheBytes += u->bytes;
  // Units still in a view stay alive through it whatever the cache does: evicting them frees
  // nothing and has the next procedure of the same units read them again. The least recent
  // of the others go.
  for (auto it = lru.end(); cacheBytes > cacheLimit - cacheLimit / 4 && it != lru.begin();) {
    --it;
    auto victim = cache.find(*it);
    if (*it == cu || victim->second.unit.use_count() > 1) continue;
    cacheBytes -= victim->second.unit->bytes;
    cache.erase(victim);
    it = lru.erase(it);
    evicted = true;
  }
  return u;
}

std::shared_ptr<const DebugUnit> DebugInfo::Impl::unit(DebugInfo& owner, uint32_t cu) const {
  return read(owner, cu, false);
}

Expected<std::unique_ptr<DebugInfo>> DebugInfo::load(const ElfImage& image, size_t cache_bytes,
                                                     std::unique_ptr<DwarfPackage> package) {
  std::unique_ptr<DebugInfo> d(new DebugInfo());
  Impl& m = *d->impl_;
  m.package = std::move(package);
  m.elf = image.elf();
  m.image = &image;
  m.cacheLimit = cache_bytes;
  m.copy = image.relocated_debug_copy();
  if (!m.copy.empty()) m.patched = elf_memory(reinterpret_cast<char*>(m.copy.data()), m.copy.size());
  // Compressed debug sections (-gz): libdw decompresses them in place and writes their
  // section headers, which lie in the image's read-only mapping of the file (hpcstruct was
  // killed by SIGSEGV). libdw gets an Elf of its own then, on a copy-on-write mapping libelf
  // makes itself.
  const bool compressed = std::any_of(image.sections().begin(), image.sections().end(), [](const Section& s) {
    return (s.flags & SHF_COMPRESSED) || s.name.rfind(".zdebug", 0) == 0;
  });
  if (!m.patched && compressed) {
    m.patchedFd = ::open(image.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (m.patchedFd >= 0) m.patched = elf_begin(m.patchedFd, ELF_C_READ_MMAP_PRIVATE, nullptr);
  }
  Dwarf* dw = dwarf_begin_elf(m.patched ? m.patched : m.elf, DWARF_C_READ, nullptr);
  if (!dw) return d;
  if (m.package) {
    // The skeletons' .debug_addr and .debug_ranges, as libdw reads them (decompressed).
    Elf* e = m.patched ? m.patched : m.elf;
    size_t names = 0;
    if (elf_getshdrstrndx(e, &names) == 0)
      for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(e, scn));) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS) continue;
        const char* name = elf_strptr(e, names, sh.sh_name);
        const bool addr = name && std::strcmp(name, ".debug_addr") == 0;
        if (!addr && !(name && std::strcmp(name, ".debug_ranges") == 0)) continue;
        if ((sh.sh_flags & SHF_COMPRESSED) && elf_compress(scn, 0, 0) < 0) continue;
        Elf_Data* data = elf_getdata(scn, nullptr);
        if (!data || !data->d_buf) continue;
        (addr ? m.addrSection : m.rangesSection) = {static_cast<const uint8_t*>(data->d_buf), data->d_size};
      }
  }
  Dwarf_CU* cu = nullptr;
  Dwarf_Die cudie, subdie;
  uint8_t unitType = 0;
  if (image.is_cuda()) {
    // Cubins are small and may have line tables no unit refers to: read everything now.
    m.global = std::make_shared<DebugUnit>();
    DebugLoader loader(*d, *m.global);
    loader.line_tables(dw);
    while (dwarf_get_units(dw, cu, &cu, nullptr, &unitType, &cudie, &subdie) == 0) {
      if (unitType == DW_UT_skeleton || unitType == DW_UT_type || unitType == DW_UT_split_type) continue;
      loader.unit(&cudie);
    }
    dwarf_end(dw);
    std::span<const uint8_t> bytes = m.copy.empty() ? image.file_bytes() : std::span<const uint8_t>(m.copy);
    auto section = [&](const char* name) {
      const Section* s = image.section_named(name);
      return s && s->type != SHT_NOBITS ? bytes.subspan(s->offset, s->size) : std::span<const uint8_t>();
    };
    auto line = section(".debug_line");
    if (!line.empty())
      for (auto& sub : nv_inlined_calls(line, section(".debug_str"), *d)) m.global->subprograms.push_back(std::move(sub));
    m.global->finish();
    return d;
  }
  std::vector<Dwarf_Off> abbrevAt;  // each unit's abbreviation table in .debug_abbrev
  // CPU code: an index of the units by address. Line tables are read without libdw where
  // the sections lie plainly in the file.
  if (m.copy.empty() && image.is_x86_64()) {
    auto plain = [&](const char* name, std::span<const uint8_t>& out) {
      const Section* s = image.section_named(name);
      if (!s) return true;
      const uint64_t bytes = image.file_bytes().size();
      if (s->type == SHT_NOBITS || (s->flags & SHF_COMPRESSED) || s->offset > bytes || s->size > bytes - s->offset)
        return false;
      out = image.file_bytes().subspan(s->offset, s->size);
      return true;
    };
    LineTableSections secs;
    if (plain(".debug_line", secs.line) && plain(".debug_line_str", secs.line_str) && plain(".debug_str", secs.str))
      m.lineSections = secs;
  }
  // Skeleton units (split DWARF) are units here: their line tables and ranges are in the
  // binary, the rest is read through them (DebugLoader::unit).
  while (dwarf_get_units(dw, cu, &cu, nullptr, &unitType, &cudie, &subdie) == 0) {
    if (unitType == DW_UT_type || unitType == DW_UT_split_type) continue;
    if (unitType == DW_UT_skeleton) {
      ++m.splitUnits;
      Dwarf_Attribute a;
      Dwarf_Word base = 0;
      if ((dwarf_attr(&cudie, DW_AT_addr_base, &a) || dwarf_attr(&cudie, DW_AT_GNU_addr_base, &a)) &&
          dwarf_formudata(&a, &base) == 0)
        m.addrBases.push_back(base);
      if (dwarf_attr(&cudie, DW_AT_GNU_ranges_base, &a) && dwarf_formudata(&a, &base) == 0) m.rangesBases.push_back(base);
      uint64_t id = 0;
      const bool packed = m.package && dwarf_cu_info(cu, nullptr, nullptr, nullptr, nullptr, &id, nullptr, nullptr) == 0 &&
                          m.package->has(id);
      if ((subdie.addr == nullptr || dwarf_tag(&subdie) != DW_TAG_compile_unit) && !packed) {
        if (m.splitMissing++ == 0) {
          Dwarf_Attribute a;
          const char* name = dwarf_attr(&cudie, DW_AT_dwo_name, &a) ? dwarf_formstring(&a) : nullptr;
          if (!name && dwarf_attr(&cudie, DW_AT_GNU_dwo_name, &a)) name = dwarf_formstring(&a);
          m.splitMissingName = name ? name : "";
        }
      }
    }
    auto idx = static_cast<uint32_t>(m.cus.size());
    if (idx % 64 == 63) image.release_pages_if_over();
    m.cus.push_back(dwarf_dieoffset(&cudie));
    Dwarf_Off abbrev = 0, next = 0;
    size_t headerSize = 0;
    if (dwarf_next_unit(dw, dwarf_dieoffset(&cudie) - dwarf_cuoffset(&cudie), &next, &headerSize, nullptr, &abbrev,
                        nullptr, nullptr, nullptr, nullptr) != 0)
      abbrev = 0;
    abbrevAt.push_back(abbrev);
    std::vector<Range> rs;
    Dwarf_Addr base = 0, lo = 0, hi = 0;
    for (ptrdiff_t off = 0; (off = dwarf_ranges(&cudie, off, &base, &lo, &hi)) > 0;)
      if (hi > lo) rs.emplace_back(lo, hi);
    if (rs.empty()) {
      // No ranges on the unit: its line table's sequences say where its code is.
      DebugUnit lines;
      DebugLoader(*d, lines, false, m.lineSections ? &*m.lineSections : nullptr).unit_lines(&cudie);
      uint64_t start = 0;
      bool open = false;
      for (const auto& r : lines.rows) {
        if (!open) start = r.addr, open = true;
        if (r.end) {
          if (r.addr > start) rs.emplace_back(start, r.addr);
          open = false;
        }
      }
    }
    for (const auto& [l, h] : rs) {
      m.cuSpans.push_back({l, h, idx});
      m.maxCuSpan = std::max(m.maxCuSpan, h - l);
    }
  }
  dwarf_end(dw);
  std::sort(m.addrBases.begin(), m.addrBases.end());
  std::sort(m.rangesBases.begin(), m.rangesBases.end());
  std::sort(m.cuSpans.begin(), m.cuSpans.end(), [](const Impl::CuSpan& a, const Impl::CuSpan& b) {
    return a.lo != b.lo ? a.lo < b.lo : a.cu < b.cu;
  });
  // A unit's abbreviation table ends where the next one starts (or the section does).
  std::vector<Dwarf_Off> starts = abbrevAt;
  const Section* abbrevs = image.section_named(".debug_abbrev");
  starts.push_back(abbrevs ? std::max<Dwarf_Off>(abbrevs->size, 1) : 1);
  std::sort(starts.begin(), starts.end());
  starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
  m.libdwUnitBytes.reserve(abbrevAt.size());
  for (Dwarf_Off at : abbrevAt) {
    auto next = std::upper_bound(starts.begin(), starts.end(), at);
    uint64_t table = next == starts.end() ? 0 : *next - at;
    m.libdwUnitBytes.push_back(static_cast<uint32_t>(std::min<uint64_t>(kLibdwUnitBytes + kLibdwPerAbbrevByte * table, UINT32_MAX)));
  }
  return d;
}

}  // namespace hpc::structure
