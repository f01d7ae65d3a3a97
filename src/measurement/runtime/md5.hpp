// MD5 (RFC 1321), only to name the vdso copy the way the reference does (<md5>.vdso).
#pragma once

#include <cstddef>
#include <cstdint>

namespace hpc::rt {

void md5(const void* data, size_t n, uint8_t out[16]);

}  // namespace hpc::rt
