// The measurement directory: file names like the reference
// (<app>-<rank:6>-<thread:3>-<hostid:8x>-<pid>-<gen>.{hpcrun,hpctrace,log}), the per-process
// log with its SUMMARY line, the vdso copy, and the per-thread profile and trace files.
#pragma once

#include <cstdint>

#include "state.hpp"

namespace hpc::rt {

bool outputInit();                                 // constructor: names, log, vdso
void outputChildAfterFork();                       // new pid: new log, fresh counters
void outputResumeAfterExec(int err, unsigned others);  // a failed exec: the next generation's log
bool outputOpenTrace(ThreadState& ts);             // on the thread, before sampling starts
void traceAppend(ThreadState& ts, uint64_t timeNs, uint32_t node);  // async-signal-safe
void outputWriteThread(ThreadState& ts);           // profile (and trace end); async-signal-safe
void outputWriteLog(const char* reason);           // SUMMARY over all threads
// Where code outside every module was sampled: the process's perf map, as it stands at the
// end, copied to the name the anonymous module carries (loadmap.hpp), if there is one.
void outputCopyPerfMap();

// Path of a thread's file with the given suffix (".hpcrun", ".hpctrace", ".log").
void outputPath(char* buf, unsigned long cap, uint32_t thread, const char* suffix);

}  // namespace hpc::rt
