#include "structure/debug_info.hpp"

#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gelf.h>
#include <libelf.h>

#include <algorithm>
#include <cstdlib>

#include "structure/elf_image.hpp"

namespace hpc::structure {

std::string demangle(const std::string& name) {
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

uint32_t DebugInfo::intern_file(const std::string& name) {
  if (name.empty()) return 0;
  auto [it, inserted] = fileIds_.emplace(name, static_cast<uint32_t>(files_.size()));
  if (inserted) files_.push_back(name);
  return it->second;
}

SourceLoc DebugInfo::line_at(uint64_t addr) const {
  auto it = std::upper_bound(rows_.begin(), rows_.end(), addr,
                             [](uint64_t a, const Row& r) { return a < r.addr; });
  if (it == rows_.begin()) return {};
  --it;
  if (it->end) return {};
  return {it->file, it->line};
}

uint64_t DebugInfo::next_row_after(uint64_t addr) const {
  auto it = std::upper_bound(rows_.begin(), rows_.end(), addr,
                             [](uint64_t a, const Row& r) { return a < r.addr; });
  return it == rows_.end() ? UINT64_MAX : it->addr;
}

std::vector<const SubprogramInfo*> DebugInfo::subprograms_in(uint64_t lo, uint64_t hi) const {
  std::vector<const SubprogramInfo*> out;
  uint64_t from = lo > maxSpan_ ? lo - maxSpan_ : 0;
  auto it = std::lower_bound(spans_.begin(), spans_.end(), from,
                             [](const Span& s, uint64_t a) { return s.lo < a; });
  for (; it != spans_.end() && it->lo < hi; ++it)
    if (it->hi > lo && std::find(out.begin(), out.end(), it->sub) == out.end()) out.push_back(it->sub);
  return out;
}

class DebugLoader {
public:
  explicit DebugLoader(DebugInfo& d) : d_(d) {}

  void unit(Dwarf_Die* cu) {
    files_ = nullptr;
    nfiles_ = 0;
    dwarf_getsrcfiles(cu, &files_, &nfiles_);
    walk(cu, nullptr, -1, 0);
  }

  // Every line table of .debug_line, also those no unit refers to (cubins built with
  // -lineinfo have a line table and no .debug_info).
  void line_tables(Dwarf* dw) {
    Dwarf_Off off = 0, next = 0;
    Dwarf_Lines* lines = nullptr;
    size_t n = 0;
    Dwarf_CU* cu = nullptr;
    while (dwarf_next_lines(dw, off, &next, &cu, nullptr, nullptr, &lines, &n) == 0) {
      for (size_t i = 0; i < n; ++i) {
        Dwarf_Line* l = dwarf_onesrcline(lines, i);
        Dwarf_Addr addr = 0;
        int line = 0;
        bool end = false;
        dwarf_lineaddr(l, &addr);
        dwarf_lineno(l, &line);
        dwarf_lineendsequence(l, &end);
        const char* f = dwarf_linesrc(l, nullptr, nullptr);
        d_.rows_.push_back({addr, d_.intern_file(f ? f : ""), static_cast<uint32_t>(line < 0 ? 0 : line), end});
      }
      off = next;
    }
  }

private:
  uint32_t file_attr(Dwarf_Die* die, int attr) {
    Dwarf_Attribute a;
    Dwarf_Word idx = 0;
    if (!dwarf_attr_integrate(die, attr, &a) || dwarf_formudata(&a, &idx) != 0) return 0;
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
        info->decl_file = file_attr(&child, DW_AT_decl_file);
        info->decl_line = udata_attr(&child, DW_AT_decl_line);
        SubprogramInfo* raw = info.get();
        d_.subprograms_.push_back(std::move(info));
        walk(&child, raw, -1, 0);
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
        std::string link = string_attr(callee, DW_AT_linkage_name);
        if (link.empty()) link = string_attr(callee, DW_AT_MIPS_linkage_name);
        call.callee = link.empty() ? string_attr(callee, DW_AT_name) : demangle(link);
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
  Dwarf_Files* files_ = nullptr;
  size_t nfiles_ = 0;
};

Expected<std::unique_ptr<DebugInfo>> DebugInfo::load(const ElfImage& image) {
  auto d = std::make_unique<DebugInfo>();
  Elf* elf = image.elf();
  Elf* patched = nullptr;
  std::vector<uint8_t> copy = image.relocated_debug_copy();
  if (!copy.empty()) {
    patched = elf_memory(reinterpret_cast<char*>(copy.data()), copy.size());
    if (patched) elf = patched;
  }
  Dwarf* dw = dwarf_begin_elf(elf, DWARF_C_READ, nullptr);
  if (!dw) {
    if (patched) elf_end(patched);
    return d;
  }
  DebugLoader loader(*d);
  loader.line_tables(dw);
  Dwarf_CU* cu = nullptr;
  Dwarf_Die cudie, subdie;
  uint8_t unitType = 0;
  while (dwarf_get_units(dw, cu, &cu, nullptr, &unitType, &cudie, &subdie) == 0) {
    if (unitType == DW_UT_skeleton || unitType == DW_UT_type || unitType == DW_UT_split_type) continue;
    loader.unit(&cudie);
  }
  dwarf_end(dw);
  if (patched) elf_end(patched);
  if (image.is_cuda()) {
    std::span<const uint8_t> bytes = copy.empty() ? image.file_bytes() : std::span<const uint8_t>(copy);
    auto section = [&](const char* name) {
      const Section* s = image.section_named(name);
      return s && s->type != SHT_NOBITS ? bytes.subspan(s->offset, s->size) : std::span<const uint8_t>();
    };
    auto line = section(".debug_line");
    if (!line.empty())
      for (auto& sub : nv_inlined_calls(line, section(".debug_str"), *d)) d->subprograms_.push_back(std::move(sub));
  }
  // End-of-sequence rows sort first so a sequence starting where another ends wins.
  std::stable_sort(d->rows_.begin(), d->rows_.end(), [](const Row& a, const Row& b) {
    return a.addr != b.addr ? a.addr < b.addr : (a.end && !b.end);
  });
  for (const auto& s : d->subprograms_)
    for (const auto& r : s->ranges) {
      d->spans_.push_back({r.first, r.second, s.get()});
      d->maxSpan_ = std::max(d->maxSpan_, r.second - r.first);
    }
  std::sort(d->spans_.begin(), d->spans_.end(), [](const Span& a, const Span& b) { return a.lo < b.lo; });
  return d;
}

}  // namespace hpc::structure
