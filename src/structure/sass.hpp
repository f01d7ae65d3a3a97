// Control flow of CUDA code read from the SASS machine code itself, for the encodings whose
// control-flow instructions are known here: sm_50 to sm_62 (8-byte instructions, a control
// word before every three) and sm_70 to sm_90 (16-byte instructions). nvdisasm is then not
// needed, and cubins that today's nvdisasm refuses (built by CUDA 10.2 and 11.2: "flow
// analysis is disabled") still get their loops.
//
// Only control flow is decoded; every other instruction falls through. The blocks and
// edges are what nvdisasm's graph gives (gpu_cfg.hpp): a block ends after every branch
// (BRA, BRX, JMP, JMX, EXIT, RET, RTT, KIL, BRK, CONT, SYNC, BPT) and before every branch
// target; a guarded or conditional branch also falls through. An indirect branch (BRX, JMX)
// goes to the targets the compiler listed for it in the cubin (EIATTR_INDIRECT_BRANCH_TARGETS,
// below), as nvdisasm's graph has them; to none where it listed none.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "structure/cfg.hpp"

namespace hpc::structure {

// The SM version of a cubin from its ELF header's e_flags: the low byte (and bits 16-23)
// for cubins of CUDA 12.x and older, bits 8-15 for the newer layout; 0 if neither says.
unsigned cuda_sm_of_flags(uint32_t e_flags);

// Whether cfg_from_sass knows the encoding of `sm`.
bool sass_decodable(unsigned sm);

// `reloc_target(addr)`: for a call whose target a relocation at the instruction's address
// gives (CALL.ABS, JCAL), the callee's address, or nothing where the relocation names an
// undefined symbol (vprintf) or there is none. May be empty.
using RelocTarget = std::function<std::optional<uint64_t>(uint64_t)>;

// Where the indirect branch at an address may go (its listed targets, addresses), or nothing.
// May be empty.
using IndirectTargets = std::function<std::span<const uint64_t>(uint64_t)>;

// The targets of indirect branches listed in one `.nv.info.<function>` section's bytes: each
// EIATTR_INDIRECT_BRANCH_TARGETS record (attribute 0x34, a sized value of 32-bit words: the
// branch's offset, a word not read, the number of targets, then each target's offset), its
// offsets counted from the start of the code section the info section names (`code_addr`, of
// `code_size` bytes) and made addresses. A record whose branch or a target lies outside that
// code, or that runs past its value, is left out; the walk stops at an attribute whose format
// is not known (every other attribute is skipped by its format's size).
std::map<uint64_t, std::vector<uint64_t>> nv_info_indirect_targets(std::span<const uint8_t> info,
                                                                   uint64_t code_addr, uint64_t code_size);

// The control flow of the function whose code `code` holds from address `begin`, or nothing
// where `sm` is not decodable. Call sites (instruction address, size and callee) are those
// of direct calls with a known callee, into Cfg::call_sites.
class ElfImage;

// Every indirect branch's targets in a cubin: nv_info_indirect_targets over each
// `.nv.info.<function>` section whose sh_info names a code section.
std::map<uint64_t, std::vector<uint64_t>> cuda_indirect_branch_targets(const ElfImage& image);

// Indirect branches go to `indirect`'s targets for them.
std::optional<Cfg> cfg_from_sass(std::span<const uint8_t> code, uint64_t begin, unsigned sm,
                                 const RelocTarget& reloc_target, const IndirectTargets& indirect = {});

}  // namespace hpc::structure
