// Inlined calls that nvcc (11.2 and later, -lineinfo builds) records in the line table
// itself, with a vendor extended opcode that libdw skips: DW_LNE 0x90 takes two ULEBs,
// the call site (1-based index of a row of the same sequence, 0: not inlined) and the
// callee's linkage name (offset into .debug_str). Rows after it belong to that call.
#include <gelf.h>

#include <map>

#include "structure/debug_info.hpp"
#include "structure/dwarf_reader.hpp"

namespace hpc::structure {
namespace {

constexpr uint8_t kNvInlinedCall = 0x90;

using Cursor = DwarfReader;

struct Row {
  uint64_t addr;
  uint64_t file;
  uint32_t line;
  uint64_t context;  // 1-based row of this sequence, 0: none
  uint64_t callee;   // .debug_str offset
};

// One sequence's inlined calls as a subprogram covering the sequence.
std::unique_ptr<SubprogramInfo> calls_of(const std::vector<Row>& rows, uint64_t end,
                                         const std::vector<uint32_t>& fileIds, std::span<const uint8_t> strs) {
  bool any = false;
  for (const Row& r : rows) any |= r.context != 0;
  if (!any || rows.empty() || end <= rows.front().addr) return nullptr;
  auto sub = std::make_unique<SubprogramInfo>();
  sub->synthetic = true;
  sub->ranges.push_back({rows.front().addr, end});
  auto file = [&](uint64_t f) { return f < fileIds.size() ? fileIds[f] : 0; };
  std::map<uint64_t, int> byContext;  // context row -> index in sub->inlines
  auto call = [&](auto&& self, uint64_t ctx, uint64_t calleeStr, uint64_t calleeFile, int depth) -> int {
    if (ctx == 0 || ctx > rows.size() || depth > 64) return -1;
    if (auto it = byContext.find(ctx); it != byContext.end()) return it->second;
    const Row& site = rows[ctx - 1];
    int parent = site.context ? self(self, site.context, site.callee, site.file, depth + 1) : -1;
    InlineCall c;
    c.parent = parent;
    c.call_file = file(site.file);
    c.call_line = site.line;
    c.callee_file = file(calleeFile);
    if (calleeStr < strs.size()) {
      size_t n = 0;
      while (calleeStr + n < strs.size() && strs[calleeStr + n]) ++n;
      c.callee = demangle(std::string(reinterpret_cast<const char*>(strs.data() + calleeStr), n));
    }
    int id = static_cast<int>(sub->inlines.size());
    sub->inlines.push_back(std::move(c));
    byContext[ctx] = id;
    return id;
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    uint64_t hi = i + 1 < rows.size() ? rows[i + 1].addr : end;
    if (!r.context || hi <= r.addr) continue;
    int id = call(call, r.context, r.callee, r.file, 0);
    if (id < 0) continue;
    // The range belongs to the call and to every call around it.
    for (int k = id; k >= 0; k = sub->inlines[k].parent) {
      auto& rs = sub->inlines[k].ranges;
      if (!rs.empty() && rs.back().second == r.addr) rs.back().second = hi;
      else rs.push_back({r.addr, hi});
    }
  }
  return sub;
}

}  // namespace

namespace {

// Reads one line-table unit at `c`; returns false when it cannot be read.
bool read_nv_inline_unit(Cursor& c, DebugInfo& d, std::span<const uint8_t> strs,
                         std::vector<std::unique_ptr<SubprogramInfo>>& out) {
  uint64_t unitLen = c.fixed(4);
  int offSize = 4;
  if (unitLen == 0xffffffff) {
    unitLen = c.fixed(8);
    offSize = 8;
  }
  if (!c.ok()) return false;
  Cursor unit(c.pos(), c.pos() + unitLen);
  c.skip(unitLen);
  uint64_t version = unit.fixed(2);
  if (version < 2 || version > 4) return true;  // only the layouts nvcc writes
  uint64_t hdrLen = unit.fixed(offSize);
  const uint8_t* program = unit.pos() + hdrLen;
  uint64_t minInsn = unit.fixed(1);
  if (version >= 4) unit.fixed(1);  // maximum_operations_per_instruction
  unit.fixed(1);                    // default_is_stmt
  auto lineBase = static_cast<int8_t>(unit.fixed(1));
  uint64_t lineRange = unit.fixed(1);
  uint64_t opBase = unit.fixed(1);
  if (!unit.ok() || lineRange == 0 || opBase == 0) return false;
  std::vector<uint64_t> opLen(opBase, 0);
  for (uint64_t k = 1; k < opBase; ++k) opLen[k] = unit.fixed(1);
  std::vector<std::string> dirs{""};
  for (const char* s; (s = unit.cstr()) && *s;) dirs.push_back(s);
  std::vector<uint32_t> fileIds{0};
  auto addFile = [&](Cursor& at) {
    const char* n = at.cstr();
    std::string name = n ? n : "";
    uint64_t dir = at.uleb();
    at.uleb();
    at.uleb();
    if (!name.empty() && name[0] != '/' && dir > 0 && dir < dirs.size()) name = dirs[dir] + "/" + name;
    fileIds.push_back(d.intern_file(name));
  };
  while (unit.ok() && !unit.done() && *unit.pos() != 0) addFile(unit);
  if (!unit.ok()) return false;
  Cursor prog(program, c.pos());

  std::vector<Row> rows;
  Row st{0, 1, 1, 0, 0};
  auto emit = [&] { rows.push_back(st); };
  while (prog.ok() && !prog.done()) {
    uint8_t op = static_cast<uint8_t>(prog.fixed(1));
    if (op >= opBase) {
      uint64_t adj = op - opBase;
      st.addr += (adj / lineRange) * minInsn;
      st.line = static_cast<uint32_t>(static_cast<int64_t>(st.line) + lineBase + static_cast<int64_t>(adj % lineRange));
      emit();
      continue;
    }
    switch (op) {
      case 0: {
        uint64_t len = prog.uleb();
        if (len == 0) break;
        const uint8_t* next = prog.pos() + len;
        uint8_t sub = static_cast<uint8_t>(prog.fixed(1));
        if (sub == 1) {  // end_sequence
          if (auto s = calls_of(rows, st.addr, fileIds, strs)) out.push_back(std::move(s));
          rows.clear();
          st = Row{0, 1, 1, 0, 0};
        } else if (sub == 2) {
          st.addr = prog.fixed(static_cast<int>(len - 1));
        } else if (sub == 3) {
          addFile(prog);
        } else if (sub == kNvInlinedCall) {
          st.context = prog.uleb();
          st.callee = prog.uleb();
        }
        prog = Cursor(next, c.pos());
        break;
      }
      case 1: emit(); break;                                       // copy
      case 2: st.addr += prog.uleb() * minInsn; break;             // advance_pc
      case 3: st.line = static_cast<uint32_t>(st.line + prog.sleb()); break;
      case 4: st.file = prog.uleb(); break;
      case 8: st.addr += ((255 - opBase) / lineRange) * minInsn; break;  // const_add_pc
      case 9: st.addr += prog.fixed(2); break;                     // fixed_advance_pc
      default:
        for (uint64_t k = 0; k < opLen[op]; ++k) prog.uleb();
    }
  }
  return true;
}

}  // namespace

std::vector<std::unique_ptr<SubprogramInfo>> nv_inlined_calls(std::span<const uint8_t> debugLine,
                                                              std::span<const uint8_t> debugStr, DebugInfo& d) {
  std::vector<std::unique_ptr<SubprogramInfo>> out;
  Cursor c(debugLine.data(), debugLine.data() + debugLine.size());
  while (c.ok() && !c.done())
    if (!read_nv_inline_unit(c, d, debugStr, out)) break;
  return out;
}

}  // namespace hpc::structure
