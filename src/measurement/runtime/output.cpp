#include "output.hpp"

#include <fcntl.h>
#include <cerrno>
#include <stdlib.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstring>

#include "encode_glue.hpp"
#include "gpu/gpu.hpp"
#include "loadmap.hpp"
#include "md5.hpp"
#include "signals.hpp"
#include "sys.hpp"

namespace hpc::rt {

namespace {

KeptFile gLog;
char gLogPath[kPathMax];

uint32_t hostId() {
  int fd = open("/etc/hostid", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    uint32_t v = 0;
    ssize_t n = read(fd, &v, sizeof v);
    close(fd);
    if (n == sizeof v && v) return v;
  }
  utsname u;
  uname(&u);
  uint32_t h = 2166136261u;  // FNV-1a of the host name: stable per machine
  for (const char* p = u.nodename; *p; ++p) h = (h ^ uint8_t(*p)) * 16777619u;
  return h;
}

// The rank an MPI launcher gave this process, from the variable it sets; ranked: whether
// one was set at all (the profile's RANK identifier is written only then).
uint32_t mpiRank(bool& ranked) {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID", "MV2_COMM_WORLD_RANK"}) {
    const char* v = getenv(var);
    if (v && *v) {
      ranked = true;
      return uint32_t(strtoul(v, nullptr, 10));
    }
  }
  ranked = false;
  return 0;
}

// Picks the first generation whose log name is free; an exec'd image keeps its pid, so this
// is what keeps its files apart from those of the image before it.
bool openLog() {
  for (unsigned gen = 0; gen < 1000; ++gen) {
    gConfig.gen = gen;
    outputPath(gLogPath, sizeof gLogPath, 0, ".log");
    if (keptOpen(gLog, gLogPath, O_WRONLY | O_CREAT | O_EXCL)) {
      keptSetSpare(&gLog);
      return true;
    }
    if (errno != EEXIST) return false;
  }
  return false;
}

// The vdso has no file: copy it into vdso/<md5>.vdso so offsets into it can be analysed.
void copyVdso() {
  auto base = getauxval(AT_SYSINFO_EHDR);
  if (!base) return;
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  static char maps[65536];
  ssize_t len = 0, r;
  while (len < ssize_t(sizeof maps) - 1 && (r = read(fd, maps + len, sizeof maps - 1 - len)) > 0) len += r;
  close(fd);
  maps[len] = 0;
  uint64_t lo = 0, hi = 0;
  for (char* line = maps; *line;) {
    char* end = line;
    while (*end && *end != '\n') ++end;
    bool isVdso = false;
    for (char* p = line; p + 6 <= end; ++p)
      if (strStartsWith(p, "[vdso]")) isVdso = true;
    if (isVdso) {
      char* p = line;
      auto hexval = [&p]() {
        uint64_t v = 0;
        for (;; ++p) {
          char c = *p;
          if (c >= '0' && c <= '9') v = v * 16 + uint64_t(c - '0');
          else if (c >= 'a' && c <= 'f') v = v * 16 + uint64_t(c - 'a' + 10);
          else break;
        }
        return v;
      };
      lo = hexval();
      ++p;
      hi = hexval();
      break;
    }
    line = *end ? end + 1 : end;
  }
  if (lo != base || hi <= lo) return;
  uint8_t digest[16];
  md5(reinterpret_cast<const void*>(lo), hi - lo, digest);
  char path[kPathMax];
  Text t(path, sizeof path);
  t.str(gConfig.outDir).str("/vdso");
  mkdir(path, 0755);
  t.ch('/');
  for (uint8_t b : digest) t.hex(b, 2);
  t.str(".vdso");
  // The load map names the copy relative to the measurement directory, as the
  // reference does, so the directory can move and hpcprof still finds it.
  loadmapSetVdsoPath(path + std::strlen(gConfig.outDir) + 1);
  int out = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (out < 0) return;  // another process already copied the same vdso
  writeAll(out, reinterpret_cast<const void*>(lo), hi - lo);
  close(out);
}

// The pseudo-modules' paths (loadmap.hpp), relative to the measurement directory, for this
// process and image: jit/<app>-<pid>-<gen>.map and python/<app>-<pid>-<gen>.txt (an image
// exec'd by another keeps its pid, and its generation is counted per program name).
void setAnonymousPath() {
  char rel[kPathMax];
  Text t(rel, sizeof rel);
  t.str("jit/").str(gConfig.appName).ch('-').dec(uint64_t(gConfig.pid)).ch('-').dec(gConfig.gen).str(".map");
  loadmapSetPseudoPath(Pseudo::Anonymous, rel);
  Text u(rel, sizeof rel);
  u.str("python/").str(gConfig.appName).ch('-').dec(uint64_t(gConfig.pid)).ch('-').dec(gConfig.gen).str(".txt");
  loadmapSetPseudoPath(Pseudo::Python, rel);
}

void logText(const char* s) {
  int fd = keptFd(gLog);
  if (fd >= 0) writeAll(fd, s, strLen(s));
}

}  // namespace

void outputPath(char* buf, unsigned long cap, uint32_t thread, const char* suffix) {
  Text t(buf, cap);
  t.str(gConfig.outDir).ch('/').str(gConfig.appName).ch('-').dec(gConfig.rank, 6).ch('-').dec(thread, 3);
  t.ch('-').hex(gConfig.hostId, 8).ch('-').dec(uint64_t(gConfig.pid)).ch('-').dec(gConfig.gen).str(suffix);
}

bool outputInit() {
  const char* out = getenv("HPCRUN_OUT_PATH");
  ssize_t n = readlink("/proc/self/exe", gConfig.appPath, sizeof gConfig.appPath - 1);
  gConfig.appPath[n > 0 ? n : 0] = 0;
  const char* base = gConfig.appPath;
  for (const char* p = gConfig.appPath; *p; ++p)
    if (*p == '/') base = p + 1;
  Text(gConfig.appName, sizeof gConfig.appName).str(base);
  Text dir(gConfig.outDir, sizeof gConfig.outDir);
  if (out && *out) dir.str(out);
  else {
    char cwd[kPathMax];
    if (!getcwd(cwd, sizeof cwd)) return false;
    dir.str(cwd).str("/hpctoolkit-").str(gConfig.appName).str("-measurements");
  }
  mkdir(gConfig.outDir, 0755);
  gConfig.hostId = hostId();
  gConfig.rank = mpiRank(gConfig.ranked);
  if (!gConfig.selected) return true;  // hpcrun -f did not draw this process: no file
  if (!openLog()) return false;
  setAnonymousPath();
  copyVdso();
  char buf[kPathMax + 256];
  Text t(buf, sizeof buf);
  t.str("hpcrun: measuring ").str(gConfig.appPath).str(" pid ").dec(uint64_t(gConfig.pid)).str(" events:");
  for (unsigned i = 0; i < gConfig.nEvents; ++i) {
    const EventSpec& ev = gConfig.events[i];
    if (ev.member) t.ch(' ').str(ev.name).str(" (read at each sample of ").str(gConfig.events[ev.leader].name).ch(')');
    else t.ch(' ').str(ev.name).ch('@').str(ev.frequency ? "f" : "").dec(ev.value);
  }
  t.str(gConfig.trace ? " trace\n" : "\n");
  logText(buf);
  return true;
}

void outputChildAfterFork() {
  keptClose(gLog);
  if (!gConfig.selected) return;
  openLog();
  setAnonymousPath();
  logText("hpcrun: forked child\n");
}

void outputResumeAfterExec(int err, unsigned others) {
  if (!gConfig.selected) return;
  openLog();
  setAnonymousPath();
  char buf[256];
  Text t(buf, sizeof buf);
  t.str("hpcrun: exec failed (errno ").dec(uint64_t(err)).str("): measuring again from here");
  if (others) t.str("; ").dec(others).str(" other thread(s) measured again where alive");
  t.ch('\n');
  logText(buf);
}

bool outputOpenTrace(ThreadState& ts) {
  if (!gConfig.selected) return false;
  char path[kPathMax];
  outputPath(path, sizeof path, ts.index, ".hpctrace");
  // The path is kept (in the thread's arena) to open the file again by, should the
  // application close its descriptor.
  size_t len = strLen(path) + 1;
  char* kept = static_cast<char*>(ts.arena.alloc(len));
  if (!kept) return false;
  memCopy(kept, path, len);
  if (!keptOpen(ts.trace, kept, O_WRONLY | O_CREAT | O_TRUNC)) return false;
  if (!encodeTraceHeader(ts.trace.fd)) {
    keptClose(ts.trace);
    return false;
  }
  return true;
}

void traceAppend(ThreadState& ts, uint64_t timeNs, uint32_t node) {
  if (!ts.trace.path || !ts.traceBuf) return;
  if (ts.traceMin == 0) ts.traceMin = timeNs;
  if (timeNs > ts.traceMax) ts.traceMax = timeNs;
  ts.traceBuf[ts.traceLen++] = TraceRecord{timeNs, node};
  if (ts.traceLen == kTraceBufRecords) {
    if (int fd = keptFd(ts.trace); fd >= 0) encodeTraceRecords(fd, ts.traceBuf, ts.traceLen);
    ts.traceLen = 0;
  }
}

void outputWriteThread(ThreadState& ts) {
  if (ts.trace.path) {
    if (int fd = keptFd(ts.trace); fd >= 0 && ts.traceLen) encodeTraceRecords(fd, ts.traceBuf, ts.traceLen);
    ts.traceLen = 0;
    keptClose(ts.trace);
  }
  if (!gConfig.selected) return;
  char path[kPathMax];
  outputPath(path, sizeof path, ts.index, ".hpcrun");
  int fd = openOutput(path, O_WRONLY | O_CREAT | O_TRUNC);
  if (fd < 0) return;
  encodeProfile(fd, ts);
  close(fd);
}

void outputWriteLog(const char* reason) {
  uint64_t samples = 0, recorded = 0, blocked = 0, errant = 0, failures = 0, truncated = 0, threads = 0,
           sourceFailures = 0, byRecipes = 0, nodesReused = 0, verified = 0, mismatches = 0, timerSignals = 0,
           timerPeriods = 0;
  for (ThreadState* t = registryHead(); t; t = t->next) {
    ++threads;
    const UnwindCacheStats& u = t->unwindStats;
    byRecipes += u.byRecipes, nodesReused += u.nodesReused, verified += u.verified, mismatches += u.mismatches;
    samples += t->samples, recorded += t->recorded, blocked += t->blocked, errant += t->errant;
    failures += t->unwindFailures, truncated += t->truncated, sourceFailures += t->sourceFailures;
    timerSignals += t->timerSignals, timerPeriods += t->timerPeriods;
  }
  char buf[1024];
  Text t(buf, sizeof buf);
  t.str("hpcrun: finalized at ").str(reason).str(", threads: ").dec(threads).ch('\n');
  t.str("SUMMARY: samples: ").dec(samples).str(" (recorded: ").dec(recorded).str(", blocked: ").dec(blocked);
  t.str(", errant: ").dec(errant).str(")\n");
  t.str("unwind failures: ").dec(failures).str(", truncated unwinds: ").dec(truncated);
  t.str(", sample sources that failed to start: ").dec(sourceFailures);
  t.str(", overflow signals lost (queue full): ").dec(signalsOverflowSigio()).ch('\n');
  t.str("unwind cache: frames stepped by recipe: ").dec(byRecipes).str(", CCT nodes reused: ").dec(nodesReused);
  if (gConfig.unwindCache == UnwindCacheMode::Verify)
    t.str(", checks: ").dec(verified).str(", disagreeing: ").dec(mismatches);
  t.ch('\n');
  // Timers whose signals came for several periods each (CPUTIME's advance at the kernel's
  // tick): say so, since the samples are then fewer than the rate asked for.
  if (timerSignals && timerPeriods >= timerSignals + timerSignals / 2)
    t.str("timer signals: ").dec(timerSignals).str(" for ").dec(timerPeriods)
        .str(" periods (a period shorter than the kernel's tick is sampled at the tick; each sample weighs the periods it stands for)\n");
  logText(buf);
  gpu::summary(buf, sizeof buf);
  logText(buf);
  keptClose(gLog);
}

void outputCopyPerfMap() {
  if (!gConfig.selected) return;
  const uint16_t id = loadmapAnonymousId();
  if (!id) return;  // no code outside every module was met (or no room)
  char src[64];
  Text(src, sizeof src).str("/tmp/perf-").dec(uint64_t(gConfig.pid)).str(".map");
  int in = open(src, O_RDONLY | O_CLOEXEC);
  if (in < 0) return;  // the application wrote none: hpcprof says <generated code>
  char dst[kPathMax], tmp[kPathMax];
  Text d(dst, sizeof dst);
  d.str(gConfig.outDir).str("/jit");
  mkdir(dst, 0755);
  Text(dst, sizeof dst).str(gConfig.outDir).ch('/').str(loadmapModulePath(id));
  Text(tmp, sizeof tmp).str(dst).str(".tmp");
  int out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  bool ok = out >= 0;
  static char buf[65536];
  for (ssize_t r; ok && (r = read(in, buf, sizeof buf)) != 0;) {
    if (r < 0) {
      ok = errno == EINTR;
      continue;
    }
    ok = writeAll(out, buf, size_t(r));
  }
  close(in);
  if (out >= 0) close(out);
  if (ok) ok = rename(tmp, dst) == 0;
  if (!ok) unlink(tmp);
}

}  // namespace hpc::rt
