#include "structure/line_table.hpp"

#include <dwarf.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "structure/dwarf_reader.hpp"

namespace hpc::structure {
namespace {

using Reader = DwarfReader;

const char* string_at(std::span<const uint8_t> sec, uint64_t off) {
  if (off >= sec.size()) return nullptr;
  const auto* p = sec.data() + off;
  if (!std::memchr(p, 0, sec.size() - off)) return nullptr;
  return reinterpret_cast<const char*>(p);
}

// One attribute of a DWARF 5 directory or file entry: a string (`str`) or a number (`num`).
// False for forms libdw would read differently from this or that are not seen in practice.
bool read_form(Reader& r, uint64_t form, int offsetSize, const LineTableSections& s, const char** str, uint64_t* num,
               bool* isNum) {
  *str = nullptr;
  *isNum = false;
  switch (form) {
    case DW_FORM_string: *str = r.cstr(); return r.ok();
    case DW_FORM_line_strp: *str = string_at(s.line_str, r.fixed(offsetSize)); return r.ok();
    case DW_FORM_strp: *str = string_at(s.str, r.fixed(offsetSize)); return r.ok();
    case DW_FORM_udata: *num = r.uleb(); *isNum = true; return r.ok();
    case DW_FORM_data1: *num = r.fixed(1); *isNum = true; return r.ok();
    case DW_FORM_data2: *num = r.fixed(2); *isNum = true; return r.ok();
    case DW_FORM_data4: *num = r.fixed(4); *isNum = true; return r.ok();
    case DW_FORM_data8: *num = r.fixed(8); *isNum = true; return r.ok();
    case DW_FORM_data16: r.skip(16); return r.ok();
    case DW_FORM_block: r.skip(r.uleb()); return r.ok();
    default: return false;
  }
}

// libdw's name for a file: absolute as written, else its directory, '/' and the name.
std::string file_name(const char* name, const char* dir) {
  if (*name == '/' || !dir) return name;
  std::string out(dir);
  out += '/';
  out += name;
  return out;
}

}  // namespace

bool read_line_table(const LineTableSections& s, uint64_t offset, const char* comp_dir, uint8_t address_size,
                     LineTable& out) {
  out.rows.clear();
  out.files.clear();
  if (offset >= s.line.size()) return false;
  Reader r(s.line.data() + offset, s.line.data() + s.line.size());
  uint64_t unitLength = r.fixed(4);
  int offsetSize = 4;
  if (unitLength == 0xffffffff) {
    unitLength = r.fixed(8);
    offsetSize = 8;
  }
  if (!r.ok() || unitLength < 2 || unitLength > r.left()) return false;
  const uint8_t* end = r.pos() + unitLength;
  r = Reader(r.pos(), end);
  uint64_t version = r.fixed(2);
  if (version < 2 || version > 5) return false;
  if (version >= 5) {
    uint64_t size = r.fixed(1);
    if (r.fixed(1) != 0 || size != address_size) return false;  // segment selectors; another size than the unit's
  }
  if (address_size != 4 && address_size != 8) return false;
  uint64_t headerLength = r.fixed(offsetSize);
  if (!r.ok() || headerLength > r.left()) return false;
  const uint8_t* program = r.pos() + headerLength;
  uint64_t minInsn = r.fixed(1);
  uint64_t maxOps = version >= 4 ? r.fixed(1) : 1;
  bool defaultIsStmt = r.fixed(1) != 0;
  (void)defaultIsStmt;
  auto lineBase = static_cast<int8_t>(r.fixed(1));
  uint64_t lineRange = r.fixed(1);
  uint64_t opcodeBase = r.fixed(1);
  if (!r.ok() || maxOps != 1 || lineRange == 0 || opcodeBase == 0) return false;
  // Standard opcodes must take the operands the standard gives them.
  static constexpr uint8_t kStandard[] = {0, 0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1};
  std::vector<uint8_t> opLengths(opcodeBase, 0);
  for (uint64_t k = 1; k < opcodeBase; ++k) {
    opLengths[k] = static_cast<uint8_t>(r.fixed(1));
    if (k < sizeof kStandard && opLengths[k] != kStandard[k]) return false;
  }
  if (!r.ok()) return false;

  std::vector<const char*> dirs;
  if (version < 5) {
    dirs.push_back(comp_dir);
    while (r.ok() && r.left() && *r.pos() != 0) dirs.push_back(r.cstr());
    r.skip(1);
    out.files.emplace_back("???");  // DWARF < 5 numbers files from 1
    while (r.ok() && r.left() && *r.pos() != 0) {
      const char* name = r.cstr();
      uint64_t dir = r.uleb();
      r.uleb();  // mtime
      r.uleb();  // length
      if (!r.ok() || dir >= dirs.size()) return false;
      out.files.push_back(file_name(name, dirs[dir]));
    }
    r.skip(1);
  } else {
    // Entry formats, then entries: paths and directory indices read, the rest skipped.
    auto entries = [&](auto&& each) {
      uint64_t nFormats = r.fixed(1);
      std::vector<std::pair<uint64_t, uint64_t>> formats;
      for (uint64_t k = 0; k < nFormats && r.ok(); ++k) {
        uint64_t type = r.uleb();
        formats.emplace_back(type, r.uleb());
      }
      uint64_t count = r.uleb();
      if (!r.ok() || (formats.empty() && count != 0)) return false;
      for (uint64_t n = 0; n < count; ++n) {
        const char* path = nullptr;
        uint64_t dir = UINT64_MAX;
        for (const auto& [type, form] : formats) {
          const char* str = nullptr;
          uint64_t num = 0;
          bool isNum = false;
          if (!read_form(r, form, offsetSize, s, &str, &num, &isNum)) return false;
          if (type == DW_LNCT_path) {
            if (!str) return false;
            path = str;
          } else if (type == DW_LNCT_directory_index) {
            if (!isNum) return false;
            dir = num;
          }
        }
        if (!each(path, dir)) return false;
      }
      return true;
    };
    if (!entries([&](const char* path, uint64_t) {
          if (!path) return false;
          dirs.push_back(path);
          return true;
        }))
      return false;
    if (!entries([&](const char* path, uint64_t dir) {
          if (!path || dir >= dirs.size()) return false;
          out.files.push_back(file_name(path, dirs[dir]));
          return true;
        }))
      return false;
  }
  if (!r.ok() || r.pos() != program) return false;

  // The line program. Only what the rows need is tracked, but every field libdw would
  // refuse as too large for its row is checked.
  struct State {
    uint64_t addr = 0, file = 1, column = 0, isa = 0, discriminator = 0;
    int64_t line = 1;
  } st;
  auto emit = [&](bool endSeq) {
    if (st.file > UINT_MAX || st.line < INT_MIN || st.line > INT_MAX || st.column > 0xffff || st.isa > 0xff ||
        st.discriminator > 0xffffff)
      return false;
    out.rows.push_back({st.addr, st.file, st.line, endSeq});
    return true;
  };
  auto advance = [&](uint64_t ops) { st.addr += minInsn * ops; };
  r = Reader(program, end);
  while (r.left()) {
    auto op = static_cast<uint8_t>(r.fixed(1));
    if (op >= opcodeBase) {
      uint64_t adj = op - opcodeBase;
      st.line += lineBase + static_cast<int64_t>(adj % lineRange);
      advance(adj / lineRange);
      if (!emit(false)) return false;
      st.discriminator = 0;
      continue;
    }
    switch (op) {
      case 0: {  // extended opcode
        // libdw reads the length as one byte: longer ones are left to it.
        uint64_t len = r.fixed(1);
        if (!r.ok() || len == 0 || len >= 0x80 || len > r.left()) return false;
        const uint8_t* next = r.pos() + len;
        auto sub = static_cast<uint8_t>(r.fixed(1));
        switch (sub) {
          case DW_LNE_end_sequence:
            if (len != 1 || !emit(true)) return false;
            st = State{};
            break;
          case DW_LNE_set_address:
            if (len - 1 != address_size) return false;
            st.addr = r.fixed(address_size);
            break;
          case DW_LNE_set_discriminator:
            st.discriminator = r.uleb();
            if (r.pos() != next) return false;
            break;
          case DW_LNE_define_file:
          case DW_LNE_lo_user:
          case 0x90:  // NVIDIA's inlined call
          case 0x91:  // NVIDIA's function name
            return false;
          default:
            r.skip(len - 1);
        }
        if (!r.ok()) return false;
        break;
      }
      case DW_LNS_copy:
        if (!emit(false)) return false;
        st.discriminator = 0;
        break;
      case DW_LNS_advance_pc: {
        uint64_t n = r.uleb();
        if (n > UINT_MAX || minInsn * n > UINT_MAX) return false;
        advance(n);
        break;
      }
      case DW_LNS_advance_line: {
        int64_t d = r.sleb();
        if (d < INT_MIN || d > INT_MAX) return false;
        st.line += d;
        break;
      }
      case DW_LNS_set_file: st.file = r.uleb(); break;
      case DW_LNS_set_column: st.column = r.uleb(); break;
      case DW_LNS_negate_stmt:
      case DW_LNS_set_basic_block:
      case DW_LNS_set_prologue_end:
      case DW_LNS_set_epilogue_begin: break;
      case DW_LNS_const_add_pc: advance((255 - opcodeBase) / lineRange); break;
      case DW_LNS_fixed_advance_pc: st.addr += r.fixed(2); break;
      case DW_LNS_set_isa: st.isa = r.uleb(); break;
      default:
        for (uint64_t k = 0; k < opLengths[op]; ++k) r.uleb();
    }
    if (!r.ok()) return false;
  }
  // libdw's order: by address, end-of-sequence rows first, then as written; and the last
  // row ends a sequence whatever the table says.
  std::stable_sort(out.rows.begin(), out.rows.end(), [](const LineTable::Row& x, const LineTable::Row& y) {
    return x.addr != y.addr ? x.addr < y.addr : (x.end && !y.end);
  });
  if (!out.rows.empty()) out.rows.back().end = true;
  return true;
}

}  // namespace hpc::structure
