// Name resolution and availability checks for perf:: events, done in the launcher so that a
// bad event is reported before the application starts and the runtime needs no event tables.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.hpp"

namespace hpc::measurement {

struct PerfAttr {
  uint32_t type = 0;
  uint64_t config = 0, config1 = 0, config2 = 0;
};

// Resolves "cpu-clock", "cycles", "INST_RETIRED:ANY_P"... (without the perf:: prefix):
// built-in software and generic hardware names first, then libpfm4.
Expected<PerfAttr> resolvePerfEvent(const std::string& name);

// Opens and closes the event on the calling thread to see whether this machine can count it.
Status checkPerfEvent(const std::string& name, const PerfAttr& attr, bool frequency, uint64_t value);

// Prints the events hpcrun accepts, one line each with a short help text.
void listEvents();

}  // namespace hpc::measurement
