// Control flow of CUDA code read from the SASS machine code itself, for the encodings whose
// control-flow instructions are known here: sm_50 to sm_62 (8-byte instructions, a control
// word before every three) and sm_70 to sm_90 (16-byte instructions). nvdisasm is then not
// needed, and cubins that today's nvdisasm refuses (built by CUDA 10.2 and 11.2: "flow
// analysis is disabled") still get their loops.
//
// Only control flow is decoded; every other instruction falls through. The blocks and
// edges are what nvdisasm's graph gives (gpu_cfg.hpp): a block ends after every branch
// (BRA, BRX, JMP, JMX, EXIT, RET, RTT, KIL, BRK, CONT, SYNC, BPT) and before every branch
// target; a guarded or conditional branch also falls through.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>

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

// The control flow of the function whose code `code` holds from address `begin`, or nothing
// where `sm` is not decodable. Call sites (instruction address, size and callee) are those
// of direct calls with a known callee, into Cfg::call_sites.
std::optional<Cfg> cfg_from_sass(std::span<const uint8_t> code, uint64_t begin, unsigned sm,
                                 const RelocTarget& reloc_target);

}  // namespace hpc::structure
