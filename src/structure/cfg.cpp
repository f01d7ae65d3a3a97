#include "structure/cfg.hpp"

#include <Zydis/Zydis.h>

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <span>

namespace hpc::structure {

int Cfg::block_at(uint64_t addr) const {
  auto it = std::upper_bound(blocks.begin(), blocks.end(), addr,
                             [](uint64_t a, const Block& b) { return a < b.begin; });
  if (it == blocks.begin()) return -1;
  --it;
  return addr < it->end ? static_cast<int>(it - blocks.begin()) : -1;
}

namespace {

struct Insn {
  uint32_t first = 0;         // its branch targets: Builder::targets_[first, first + count)
  uint32_t count = 0;
  uint8_t len = 0;
  bool ends = false;          // no fall-through after it
  bool branch = false;        // ends a block
};

// An instruction and, once asked for (Builder::ops), its operands: most instructions
// are only measured and classified, and decoding every operand was a third of the decoding.
struct Decoded {
  ZydisDecodedInstruction insn;
  ZydisDecoderContext ctx;
  uint64_t addr;
  mutable bool opsDone;
  mutable ZydisDecodedOperand opsOf[ZYDIS_MAX_OPERAND_COUNT];
};

// What the builder knows of each address of the procedure (and the one past its end):
// the instruction decoded there (its index + 1 in the builder's list, 0 for none), whether a
// block begins there, whether it is queued. A table indexed by offset: instructions are
// decoded mostly in address order, so it is read and written in order. (A std::map and two
// std::sets of addresses were a third of the CFG's time; a hash table's probes missed the
// caches.) Each thread reuses its table's memory from procedure to procedure.
class Addresses {
public:
  static constexpr uint8_t kLeader = 1, kQueued = 2;
  struct Slot {
    uint32_t insn;
    uint32_t block;  // index + 1 of the block beginning here (make_blocks), 0 for none
    uint8_t flags;
  };
  Addresses(uint64_t begin, uint64_t end) : begin_(begin) {
    thread_local std::vector<Slot> reused;
    const size_t n = size_t(end - begin) + 1;
    slots_ = n <= kReusedMost ? &reused : &own_;
    slots_->assign(n, Slot{0, 0, 0});
  }
  ~Addresses() {
    if (slots_ != &own_) slots_->clear();  // keeps its capacity
  }
  Addresses(const Addresses&) = delete;
  Addresses& operator=(const Addresses&) = delete;
  // `a` in [begin, end].
  const Slot* find(uint64_t a) const { return slots_->data() + (a - begin_); }
  Slot& at(uint64_t a) { return (*slots_)[a - begin_]; }
  uint64_t begin() const { return begin_; }
  size_t size() const { return slots_->size(); }

private:
  static constexpr size_t kReusedMost = size_t(1) << 22;  // a larger procedure's is its own
  uint64_t begin_;
  std::vector<Slot>* slots_;
  std::vector<Slot> own_;
};

class Builder {
public:
  Builder(const CodeRange& code, const std::function<bool(uint64_t)>& noreturn)
      : code_(code), noreturn_(noreturn), addrs_(code.begin, code.end) {
    ZydisDecoderInit(&dec_, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    insns_.reserve((code.end - code.begin) / 4);  // an instruction is about 4 bytes
  }

  Cfg run(uint64_t entry) {
    std::deque<uint64_t> work;
    if (inside(entry)) {  // else nothing is decoded
      work.push_back(entry);
      addrs_.at(entry).flags |= Addresses::kLeader | Addresses::kQueued;
    }
    while (!work.empty()) {
      uint64_t a = work.front();
      work.pop_front();
      decode_run(a, work);
    }
    return make_blocks(entry);
  }

private:
  bool inside(uint64_t a) const { return a >= code_.begin && a < code_.end; }
  bool decoded(uint64_t a) const {
    return addrs_.find(a)->insn != 0;
  }
  const Insn& insn_at(uint64_t a) const { return insns_[addrs_.find(a)->insn - 1]; }

  bool decode_at(uint64_t a, Decoded& d) const {
    d.addr = a;
    auto off = a - code_.begin;
    d.opsDone = false;
    return ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&dec_, &d.ctx, code_.bytes.data() + off, code_.end - a, &d.insn));
  }

  // d's operands, decoded on first use (none where that fails: never seen on valid code).
  const ZydisDecodedOperand* ops(const Decoded& d) const {
    if (!d.opsDone) {
      d.opsDone = true;
      if (!ZYAN_SUCCESS(ZydisDecoderDecodeOperands(&dec_, &d.ctx, &d.insn, d.opsOf, d.insn.operand_count)))
        for (auto& o : d.opsOf) o.type = ZYDIS_OPERAND_TYPE_UNUSED;
    }
    return d.opsOf;
  }

  // Decodes straight-line code from `a` until a block-ending instruction or code
  // already decoded; queues branch targets.
  void decode_run(uint64_t a, std::deque<uint64_t>& work) {
    // Each instruction is decoded in place after the ones before it in this run, of which
    // classify() sees the last kHistory; the older ones are dropped kHistory at a time. (A
    // Decoded is about 1 KiB: copying each one in, and erasing the first of 24 on every
    // instruction, were a quarter of hpcprof's time on a binary it analysed.)
    // Made once a builder, not zeroed: each entry is written by decode_at before it is read.
    if (!history_) history_.reset(new Decoded[2 * kHistory]);
    size_t used = 0;
    while (inside(a) && !decoded(a)) {
      if (used == 2 * kHistory) {
        std::copy(history_.get() + kHistory, history_.get() + 2 * kHistory, history_.get());
        used = kHistory;
      }
      Decoded& d = history_[used];
      if (!decode_at(a, d)) return;
      Insn in;
      in.len = d.insn.length;
      in.first = uint32_t(targets_.size());
      const size_t before = std::min(used, kHistory);
      classify(d, std::span<const Decoded>(history_.get() + used - before, before), in);
      ++used;
      in.count = uint32_t(targets_.size() - in.first);
      for (size_t k = in.first; k < targets_.size(); ++k) {
        const uint64_t t = targets_[k];
        if (!inside(t)) continue;
        Addresses::Slot& slot = addrs_.at(t);
        slot.flags |= Addresses::kLeader;
        if (!(slot.flags & Addresses::kQueued)) {
          slot.flags |= Addresses::kQueued;
          work.push_back(t);
        }
      }
      bool stop = in.ends;
      if (in.branch) addrs_.at(a + in.len).flags |= Addresses::kLeader;
      insns_.push_back(in);
      addrs_.at(a).insn = uint32_t(insns_.size());
      if (stop) return;
      a += d.insn.length;
    }
  }

  static constexpr size_t kHistory = 24;

  void classify(const Decoded& d, std::span<const Decoded> history, Insn& in) {
    const auto& i = d.insn;
    auto direct = [&](uint64_t& t) {
      return i.operand_count_visible > 0 && ops(d)[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE &&
             ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&i, &ops(d)[0], d.addr, &t));
    };
    switch (i.meta.category) {
      case ZYDIS_CATEGORY_RET:
        in.ends = in.branch = true;
        return;
      case ZYDIS_CATEGORY_UNCOND_BR: {
        in.ends = in.branch = true;
        uint64_t t;
        if (direct(t)) {
          if (inside(t)) targets_.push_back(t);
        } else {
          jump_table(d, history, targets_);
        }
        return;
      }
      case ZYDIS_CATEGORY_COND_BR: {
        in.branch = true;
        uint64_t t;
        if (direct(t) && inside(t)) targets_.push_back(t);
        return;
      }
      case ZYDIS_CATEGORY_CALL: {
        uint64_t t;
        if (!direct(t)) return;
        calls_.push_back(t);
        if (noreturn_ && noreturn_(t)) in.ends = in.branch = true;
        return;
      }
      default:
        break;
    }
    if (i.mnemonic == ZYDIS_MNEMONIC_HLT || i.mnemonic == ZYDIS_MNEMONIC_UD2 || i.mnemonic == ZYDIS_MNEMONIC_UD0 ||
        i.mnemonic == ZYDIS_MNEMONIC_UD1)
      in.ends = in.branch = true;
  }

  uint64_t read_le(uint64_t addr, int n, bool& ok) const {
    ok = inside(addr) && addr + n <= code_.end;
    if (!ok) return 0;
    uint64_t v = 0;
    for (int k = 0; k < n; ++k) v |= uint64_t(code_.bytes[addr - code_.begin + k]) << (8 * k);
    return v;
  }

  // Recognises the two table shapes compilers emit for switches:
  //   jmp [T + idx*8]                  (absolute entries)
  //   lea B,[rip+T]; movsxd R,[B+idx*4]; add R,B; jmp R   (entries relative to T)
  // The entry count comes from the guarding "cmp idx, N; ja default" when present,
  // otherwise entries are read while they point into the procedure.
  void jump_table(const Decoded& d, std::span<const Decoded> history, std::vector<uint64_t>& out) {
    uint64_t table = 0;
    int entSize = 0;
    bool relative = false;
    const auto& op = ops(d)[0];
    if (op.type == ZYDIS_OPERAND_TYPE_MEMORY && op.mem.base == ZYDIS_REGISTER_NONE && op.mem.scale == 8) {
      table = static_cast<uint64_t>(op.mem.disp.value);
      entSize = 8;
    } else if (op.type == ZYDIS_OPERAND_TYPE_REGISTER) {
      for (auto it = history.rbegin(); it != history.rend() && !entSize; ++it) {
        const auto& h = *it;
        if (h.insn.operand_count_visible < 2) continue;
        // Only a MOVSXD or MOV is looked at here (and an LEA once a MOVSXD is found): the
        // others' operands stay undecoded.
        if (h.insn.mnemonic != ZYDIS_MNEMONIC_MOVSXD && h.insn.mnemonic != ZYDIS_MNEMONIC_MOV) continue;
        if (ops(h)[1].type != ZYDIS_OPERAND_TYPE_MEMORY) continue;
        const auto& m = ops(h)[1].mem;
        if (h.insn.mnemonic == ZYDIS_MNEMONIC_MOVSXD && m.scale == 4) {
          // Find where the base register got the table address.
          for (auto jt = it; jt != history.rend(); ++jt) {
            if (jt->insn.mnemonic == ZYDIS_MNEMONIC_LEA && ops(*jt)[0].reg.value == m.base &&
                ops(*jt)[1].mem.base == ZYDIS_REGISTER_RIP &&
                ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&jt->insn, &ops(*jt)[1], jt->addr, &table))) {
              entSize = 4;
              relative = true;
              break;
            }
          }
          if (!entSize) return;
        } else if (h.insn.mnemonic == ZYDIS_MNEMONIC_MOV && m.scale == 8 && m.base == ZYDIS_REGISTER_NONE &&
                   ops(h)[0].type == ZYDIS_OPERAND_TYPE_REGISTER) {
          table = static_cast<uint64_t>(m.disp.value);
          entSize = 8;
        }
      }
    }
    if (!entSize) return;
    uint64_t limit = 1024;
    for (auto it = history.rbegin(); it != history.rend(); ++it) {
      if (it->insn.mnemonic != ZYDIS_MNEMONIC_CMP || ops(*it)[1].type != ZYDIS_OPERAND_TYPE_IMMEDIATE) continue;
      auto next = it.base();  // the instruction after the cmp
      if (next == history.end() || next->insn.meta.category != ZYDIS_CATEGORY_COND_BR) break;
      auto n = static_cast<uint64_t>(ops(*it)[1].imm.value.u);
      if (next->insn.mnemonic == ZYDIS_MNEMONIC_JNBE) limit = n + 1;
      else if (next->insn.mnemonic == ZYDIS_MNEMONIC_JNB) limit = n;
      break;
    }
    std::set<uint64_t> seen;
    for (uint64_t k = 0; k < limit; ++k) {
      bool ok = false;
      uint64_t raw = table_read(table + k * entSize, entSize, ok);
      if (!ok) break;
      uint64_t t = relative ? table + static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(raw))) : raw;
      if (!inside(t)) break;
      if (seen.insert(t).second) out.push_back(t);
    }
  }

  // Tables usually live in .rodata, outside the procedure's own bytes.
  uint64_t table_read(uint64_t addr, int n, bool& ok) const {
    if (tables_) {
      auto bytes = tables_(addr, n);
      ok = bytes.size() == static_cast<size_t>(n);
      uint64_t v = 0;
      for (int k = 0; ok && k < n; ++k) v |= uint64_t(bytes[k]) << (8 * k);
      return v;
    }
    return read_le(addr, n, ok);
  }

  Cfg make_blocks(uint64_t entry) {
    Cfg cfg;
    Block* cur = nullptr;
    uint64_t prevEnd = 0;
    // The decoded instructions in address order: the table's.
    for (size_t off = 0; off < addrs_.size(); ++off) {
      Addresses::Slot& slot = addrs_.at(addrs_.begin() + off);
      if (!slot.insn) continue;
      const uint64_t a = addrs_.begin() + off;
      const Insn& in = insns_[slot.insn - 1];
      if (!cur || (slot.flags & Addresses::kLeader) || a != prevEnd) {
        cfg.blocks.push_back(Block{a, a, a, {}, {}});
        cur = &cfg.blocks.back();
        slot.block = uint32_t(cfg.blocks.size());
      }
      cur->end = a + in.len;
      cur->last = a;
      prevEnd = cur->end;
      if (in.branch) cur = nullptr;
    }
    for (size_t b = 0; b < cfg.blocks.size(); ++b) {
      auto& blk = cfg.blocks[b];
      const Insn& last = insn_at(blk.last);
      // The successors: the blocks beginning at its targets (every one inside the procedure).
      auto succ = [&](uint64_t t) {
        const uint32_t s1 = addrs_.find(t)->block;
        if (s1 == 0) return;
        const uint32_t s = s1 - 1;
        if (std::find(blk.succs.begin(), blk.succs.end(), s) == blk.succs.end()) blk.succs.push_back(s);
      };
      for (uint32_t k = 0; k < last.count; ++k) succ(targets_[last.first + k]);
      if (!last.ends) succ(blk.end);
    }
    for (size_t b = 0; b < cfg.blocks.size(); ++b)
      for (uint32_t s : cfg.blocks[b].succs) cfg.blocks[s].preds.push_back(static_cast<uint32_t>(b));
    int e = cfg.block_at(entry);
    cfg.entry = e < 0 ? 0 : static_cast<uint32_t>(e);
    std::sort(calls_.begin(), calls_.end());
    calls_.erase(std::unique(calls_.begin(), calls_.end()), calls_.end());
    cfg.calls = std::move(calls_);
    return cfg;
  }

public:
  std::function<std::span<const uint8_t>(uint64_t, uint64_t)> tables_;

private:
  const CodeRange& code_;
  const std::function<bool(uint64_t)>& noreturn_;
  ZydisDecoder dec_;
  std::unique_ptr<Decoded[]> history_;  // decode_run's instructions, 2 x kHistory
  Addresses addrs_;
  std::vector<Insn> insns_;     // in the order decoded
  std::vector<uint64_t> targets_;  // the instructions' branch targets, each one's together
  std::vector<uint64_t> calls_;
};

}  // namespace

Cfg build_cfg(const CodeRange& code, uint64_t entry, const std::function<bool(uint64_t)>& noreturn,
              const std::function<std::span<const uint8_t>(uint64_t, uint64_t)>& data) {
  if (entry < code.begin || entry >= code.end) return {};
  Builder b(code, noreturn);
  b.tables_ = data;
  return b.run(entry);
}

}  // namespace hpc::structure
