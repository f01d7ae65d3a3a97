// Outputs under temporary names (AtomicOutput, scratch directories) removed when SIGINT,
// SIGTERM or SIGHUP ends a tool: an interrupted hpcprof leaves no hidden half-written
// database behind. The tool then ends by that signal, as it would have without this.
#pragma once

#include <filesystem>
#include <mutex>

namespace hpc {

// Call first in main, before any thread starts: blocks those signals in the calling thread
// (so in every thread it starts later) and starts the thread that waits for them. SIGPIPE is
// ignored: a reader of stderr that goes away fails the write and does not end the analysis.
// Without this call the registry below is kept and never acted on. Idempotent.
void remove_temporaries_on_signal();

// A path to remove (whole) if a signal ends the process; dropped once it is final or gone.
// MT: thread-safe.
void add_temporary(const std::filesystem::path& path);
void drop_temporary(const std::filesystem::path& path);

// Held while a temporary is renamed into place, so that it is either renamed or removed,
// never removed half-way through the rename.
std::unique_lock<std::mutex> lock_temporaries();

}  // namespace hpc
