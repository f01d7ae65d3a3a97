// hpcrun: validates the measurement options, prepares the output directory and execs the
// application with libhpcrun.so preloaded. Everything the runtime needs travels in HPCRUN_*
// environment variables, so exec'd and forked descendants are measured the same way.
#include <elf.h>
#include <limits.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "perf_events.hpp"
#include "measurement/runtime/event_spec.hpp"

namespace hm = hpc::measurement;

namespace {

void usage(FILE* to) {
  std::fprintf(to,
      "Usage: hpcrun [profiling options] [--] command [arguments...]\n"
      "       hpcrun -L | -h | -V\n"
      "\n"
      "Profiling options:\n"
      "  -e, --event EVENT[@PERIOD|@fFREQ]  sample EVENT (repeatable). EVENT is CPUTIME or\n"
      "                       REALTIME (period in microseconds, default 5000) or a perf\n"
      "                       event, perf::NAME or NAME (period in events, or @fFREQ\n"
      "                       samples/s; default @f300). Default: CPUTIME@5000.\n"
      "  -e LEADER[@RATE],MEMBER... or {LEADER,MEMBER...}[@RATE]  a counter group of perf\n"
      "                       events: LEADER is sampled, and\n"
      "                       at each of its samples every MEMBER's count since the last is\n"
      "                       added where the sample lands (e.g. cycles@f1000,instructions:\n"
      "                       instructions per cycle by calling context)\n"
      "  -e IO                bytes read and written by each read/write call (and pread,\n"
      "                       pwrite, readv, writev, preadv, pwritev, fread, fwrite, the\n"
      "                       printf family, fputs, puts, fgets, getline; their _FORTIFY_SOURCE\n"
      "                       and _unlocked forms) at its calling context: two metrics, IO\n"
      "                       Bytes Read and IO Bytes Written; every call is counted, none\n"
      "                       sampled (fputc, getc and kin a byte each; the scanf family\n"
      "                       what it consumed of its stream); POSIX\n"
      "                       AIO's requests (aio_read, aio_write, lio_listio) where queued\n"
      "  -e MEMLEAK           heap allocations (malloc, calloc, realloc, reallocarray, the\n"
      "                       aligned forms; C++'s new) drawn with probability -mp\n"
      "                       (default 0.1): Bytes Allocated at each one's calling context,\n"
      "                       and Bytes Freed there once it is freed (on any thread); what is\n"
      "                       allocated and not freed at a context leaked there\n"
      "  -e gpu=opencl        measure OpenCL operations (kernels, copies, fills, waits and\n"
      "                       buffer allocations) at their launch contexts; with -t also a\n"
      "                       trace per command queue. Alone it samples no CPU event.\n"
      "  --streams-per-tracing-thread N  GPU streams traced by one tracing thread (default 256)\n"
      "  -c, --count [f]N     default period (or frequency with f) for perf:: events\n"
      "  -t, --trace          also record a call-path trace per thread\n"
      "  -a python            attribute to Python code: Python frames (function, file, line)\n"
      "                       in place of the interpreter's, with the C code they call below\n"
      "                       them (CPython 3.9 or later; its profile hook costs each\n"
      "                       Python call: up to 3x on code that only calls)\n"
      "  -o, --output DIR     measurement directory (default hpctoolkit-COMMAND-measurements,\n"
      "                       with -JOBID in a batch job: SLURM_JOB_ID, PBS_JOBID, LSB_JOBID, ...)\n"
      "  -f, -fp, --process-fraction FRAC  measure each process with probability FRAC (0.1\n"
      "                       or 1/10); the others are sampled alike, to be slowed alike, and\n"
      "                       write nothing\n"
      "  -ds, --delay-sampling  no sample until the program calls hpctoolkit_sampling_start()\n"
      "                       (hpctoolkit.h, -lhpctoolkit; hpctoolkit_sampling_stop() pauses)\n"
      "  -nu, --no-unwind     a flat profile: each sample at the interrupted function alone\n"
      "  -tt, --ttrace        as -t, and each GPU operation's launch is a record of the\n"
      "                       launching thread's trace too (at its <gpu kernel>, <gpu copy>\n"
      "                       ... context), beside the samples\n"
      "  -r, --retain-recursion  keep every frame of a simple recursion (by default a call\n"
      "                       of a function to itself is folded into one level, whose\n"
      "                       costs include all of the recursion's)\n"
      "  -m, --merge-threads 0|1  1: a thread that starts after another ended takes up its\n"
      "                       profile and trace (fewer files where threads come and go); 0,\n"
      "                       the default here: a profile per thread\n"
      "  -mp, --memleak-prob PROB  the share of allocations -e MEMLEAK draws (0.1 or 1/10)\n"
      "  -ms, --memsize SIZE, -lm, --low-memsize SIZE, --disable-gprof, -dd, --dynamic-debug\n"
      "  FLAG, -md            accepted for the reference's scripts, without effect: memory is\n"
      "                       sized as needed, a -pg program's gprof runs beside the\n"
      "                       measurement\n"
      "  -d, --debug          each process waits for a debugger at start (call\n"
      "                       hpcrun_continue(), or set hpcrunDebugWait to 0, to let it go on)\n"
      "Information:\n"
      "  -L, -l, --list-events  list the events this machine can sample\n"
      "  -V, --version        print the version\n"
      "  -h, --help           print this help\n"
      "Environment:\n"
      "  HPCRUN_UNWIND_CACHE=0       unwind every frame with libunwind (threads with deep stacks\n"
      "                       otherwise step plain frames by learnt sizes and reuse the last\n"
      "                       path's CCT nodes)\n"
      "  HPCRUN_UNWIND_CACHE=verify  check each such unwind against libunwind; the log counts\n"
      "                       disagreements\n"
      "JIT-compiled code is named from the perf map the program writes, copied into DIR/jit/\n"
      "as it ends: java -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit, node\n"
      "--perf-basic-prof, python3.12 -X perf. Without one it shows as <generated code>.\n");
}

std::string dirOf(const std::string& p) {
  auto s = p.rfind('/');
  return s == std::string::npos ? "." : p.substr(0, s);
}

std::string baseName(const std::string& p) {
  auto s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

// Of a Python command line (argv[i] the interpreter), the first of the options -S, -E or -I
// given before the script, -c or -m, or 0: letters may be grouped (-Es); -W and -X take the
// next word where their own is empty.
char pythonSkipsSite(int argc, char** argv, int i) {
  for (int k = i + 1; k < argc; ++k) {
    const char* a = argv[k];
    if (a[0] != '-' || a[1] == 0) return 0;  // the script, or "-" (standard input)
    if (a[1] == '-') {
      if (a[2] == 0) return 0;  // "--": the script follows
      continue;                 // --version and kin
    }
    for (const char* c = a + 1; *c; ++c) {
      if (*c == 'S' || *c == 'E' || *c == 'I') return *c;
      if (*c == 'c' || *c == 'm') return 0;  // the rest is the command's or module's
      if (*c == 'W' || *c == 'X') {
        if (c[1] == 0) ++k;  // its argument is the next word
        break;
      }
    }
  }
  return 0;
}

std::string findRuntime() {
  if (const char* root = std::getenv("HPCTOOLKIT"); root && *root) {
    std::string lib = std::string(root) + "/lib/libhpcrun.so";
    if (access(lib.c_str(), R_OK) == 0) return lib;
  }
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return {};
  self[n] = 0;
  std::string bin = dirOf(self);
  for (const char* rel : {"/../lib/libhpcrun.so", "/libhpcrun.so", "/../lib/hpctoolkit/libhpcrun.so"}) {
    std::string lib = bin + rel;
    char real[PATH_MAX];
    if (realpath(lib.c_str(), real)) return real;
  }
  return {};
}

bool makeDirs(const std::string& path) {
  std::string cur;
  for (size_t i = 0; i <= path.size(); ++i) {
    if (i == path.size() || (path[i] == '/' && i > 0)) {
      cur = path.substr(0, i);
      if (mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) return false;
    }
  }
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The file execvp would run for `app`: itself where it names a path, else the first
// executable regular file of that name on PATH; empty where there is none.
std::string resolveProgram(const std::string& app) {
  if (app.find('/') != std::string::npos) return app;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (size_t at = 0; at <= dirs.size();) {
    size_t end = dirs.find(':', at);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(at, end - at);
    std::string file = (dir.empty() ? "." : dir) + "/" + app;
    struct stat st;
    if (stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(file.c_str(), X_OK) == 0) return file;
    at = end + 1;
  }
  return {};
}

// Why libhpcrun.so cannot be loaded into the ELF program `file`, or empty where it can (or
// `file` is no ELF program: a script's interpreter is what runs).
std::string unmeasurable(const std::string& file) {
  FILE* f = std::fopen(file.c_str(), "rb");
  if (!f) return {};
  Elf64_Ehdr eh{};
  std::string why;
  if (std::fread(&eh, 1, sizeof eh, f) >= EI_NIDENT && std::memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
      (eh.e_type == ET_EXEC || eh.e_type == ET_DYN)) {
#if defined(__x86_64__)
    const uint16_t own = EM_X86_64;
#elif defined(__aarch64__)
    const uint16_t own = EM_AARCH64;
#else
    const uint16_t own = eh.e_machine;
#endif
    if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != own) {
      why = "it is built for another architecture or word size than hpcrun's measurement library";
    } else {
      bool interp = false;
      for (uint16_t k = 0; k < eh.e_phnum && !interp; ++k) {
        Elf64_Phdr ph{};
        if (std::fseek(f, long(eh.e_phoff + uint64_t(k) * eh.e_phentsize), SEEK_SET) != 0 ||
            std::fread(&ph, 1, sizeof ph, f) != sizeof ph)
          break;
        interp = ph.p_type == PT_INTERP;
      }
      // A shared library run as a program has no interpreter either, and no entry worth
      // measuring: only programs (ET_EXEC, or ET_DYN with an entry) are judged.
      if (!interp && (eh.e_type == ET_EXEC || eh.e_entry != 0)) why = "it is statically linked";
    }
    // A program that changes user or group as it starts runs in secure mode, where the
    // loader ignores LD_PRELOAD.
    struct stat st{};
    if (why.empty() && fstat(fileno(f), &st) == 0 &&
        (((st.st_mode & S_ISUID) && st.st_uid != geteuid()) || ((st.st_mode & S_ISGID) && st.st_gid != getegid())))
      why = "it is set-user-ID or set-group-ID, and the loader ignores LD_PRELOAD for such programs";
  }
  std::fclose(f);
  return why;
}

// The sanitizer runtime the ELF program `file` needs (libasan.so.8, libtsan.so.2, ...), or
// empty. AddressSanitizer refuses to start unless its runtime comes first among the loaded
// libraries ("ASan runtime does not come first in initial library list"): it is preloaded
// ahead of libhpcrun.so, whose wrappers then sit between its interceptors and libc.
std::string sanitizerRuntime(const std::string& file) {
  FILE* f = std::fopen(file.c_str(), "rb");
  if (!f) return {};
  auto readAt = [&](uint64_t off, void* buf, size_t n) {
    return std::fseek(f, long(off), SEEK_SET) == 0 && std::fread(buf, 1, n, f) == n;
  };
  std::string found;
  Elf64_Ehdr eh{};
  if (readAt(0, &eh, sizeof eh) && std::memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
      eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_phnum < 256) {
    std::vector<Elf64_Phdr> phs(eh.e_phnum);
    bool ok = true;
    for (uint16_t k = 0; k < eh.e_phnum && ok; ++k) ok = readAt(eh.e_phoff + uint64_t(k) * eh.e_phentsize, &phs[k], sizeof phs[k]);
    auto fileOffset = [&](uint64_t vaddr) -> uint64_t {  // of a loaded address, or 0
      for (const auto& ph : phs)
        if (ph.p_type == PT_LOAD && vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz) return ph.p_offset + (vaddr - ph.p_vaddr);
      return 0;
    };
    for (const auto& ph : phs) {
      if (!ok || ph.p_type != PT_DYNAMIC || ph.p_filesz > (1u << 20)) continue;
      std::vector<Elf64_Dyn> dyn(ph.p_filesz / sizeof(Elf64_Dyn));
      if (dyn.empty() || !readAt(ph.p_offset, dyn.data(), dyn.size() * sizeof(Elf64_Dyn))) continue;
      uint64_t strtab = 0;
      for (const auto& d : dyn)
        if (d.d_tag == DT_STRTAB) strtab = fileOffset(d.d_un.d_ptr);
      for (const auto& d : dyn) {
        if (d.d_tag != DT_NEEDED || !strtab) continue;
        char name[128] = {};
        if (!readAt(strtab + d.d_un.d_val, name, sizeof name - 1) && std::feof(f) == 0) continue;
        const std::string needed(name);
        for (const char* rt : {"libasan.so", "libtsan.so", "libhwasan.so", "liblsan.so"})
          if (needed.rfind(rt, 0) == 0) found = needed;
      }
    }
  }
  std::fclose(f);
  return found;
}

// The batch system's id of the job this run is part of (SLURM, PBS/Torque, LSF, Cobalt, Flux,
// Grid Engine, LoadLeveler), as the reference's hpcrun names its default directory with it;
// characters other than letters, digits, '.', '_' and '-' become '_'. Empty outside a job.
std::string jobId() {
  for (const char* var : {"SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "COBALT_JOBID", "FLUX_JOB_ID", "JOB_ID",
                          "LOAD_STEP_ID"}) {
    const char* v = std::getenv(var);
    if (!v || !*v) continue;
    std::string id(v);
    for (char& c : id)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '_';
    return id;
  }
  return "";
}

// "0.1" or "1/10"; NaN where it is neither.
double parseFraction(const std::string& s) {
  char* end = nullptr;
  const double a = std::strtod(s.c_str(), &end);
  if (end == s.c_str()) return std::nan("");
  if (*end == 0) return a;
  if (*end != '/') return std::nan("");
  const char* rest = end + 1;
  const double b = std::strtod(rest, &end);
  if (end == rest || *end != 0 || b == 0) return std::nan("");
  return a / b;
}

[[noreturn]] void fail(const std::string& msg, int status = 2) {
  std::fprintf(stderr, "hpcrun: %s\n", msg.c_str());
  std::exit(status);
}

// Turns what the user typed into the canonical HPCRUN_EVENT_LIST entry, or fails.
std::string validateEvent(const std::string& typed, const std::string& defaultCount) {
  std::string text = typed;
  if (text == "IO") return "IO::read@1;IO::write@1";  // both metrics, every call
  if (text == "MEMLEAK") return "MEMLEAK::alloc@1;MEMLEAK::free@1";  // both metrics, drawn allocations
  if (text.rfind("MEMLEAK@", 0) == 0) fail("event 'MEMLEAK' takes no period: -mp PROB draws the allocations");
  if (text.rfind("IO@", 0) == 0) fail("event 'IO' takes no period: every I/O call counts");
  for (const char* missing : {"RETCNT", "PAPI_", "papi::"})
    if (text.rfind(missing, 0) == 0)
      fail("event '" + typed + "': this hpcrun has no " + (text[0] == 'R' ? std::string("RETCNT") : std::string("PAPI")) +
           " source (see hpcrun -L)");
  if (text.rfind("perf::", 0) != 0 && text.rfind("CPUTIME", 0) != 0 && text.rfind("REALTIME", 0) != 0) {
    // A perf event named as the reference's hpcrun takes it, without the prefix (cycles,
    // page-faults, a libpfm4 name): its metric is named with it (perf::cycles), as there.
    if (!hm::resolvePerfEvent(text.substr(0, text.find('@'))))
      fail("unknown event '" + typed + "' (expected CPUTIME, REALTIME, IO, MEMLEAK or a perf event; see hpcrun -L)");
    text = "perf::" + text;
  }
  if (text.rfind("perf::", 0) == 0 && text.find('@') == std::string::npos && !defaultCount.empty())
    text += "@" + defaultCount;
  hm::EventSpec ev;
  if (const char* err = hm::parseEvent(text.data(), text.size(), ev))
    fail("event '" + typed + "': " + err);
  std::string rate = std::string(ev.frequency ? "f" : "") + std::to_string(ev.value);
  if (ev.kind != hm::SourceKind::Perf) return std::string(ev.name) + "@" + rate;

  std::string name = std::string(ev.name).substr(6);
  auto attr = hm::resolvePerfEvent(name);
  if (!attr) fail(attr.status().message());
  if (auto st = hm::checkPerfEvent(name, *attr, ev.frequency, ev.value); !st) fail(st.message());
  return std::string(ev.name) + "#" + std::to_string(attr->type) + "," + std::to_string(attr->config) +
         "," + std::to_string(attr->config1) + "," + std::to_string(attr->config2) + "@" + rate;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> events;
  std::string out, defaultCount, gpu, streamsPerTracer, fraction, memleakProb;
  bool trace = false, python = false, delay = false, noUnwind = false, debugWait = false, merge = false;
  bool retainRecursion = false, ttrace = false;
  int i = 1;
  auto needArg = [&](const char* opt) -> std::string {
    if (i + 1 >= argc) fail(std::string("option ") + opt + " needs an argument");
    return argv[++i];
  };
  for (; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") { ++i; break; }
    if (a.empty() || a[0] != '-') break;
    if (a == "-e" || a == "--event" || a.rfind("--event=", 0) == 0) {
      std::string e = a == "-e" || a == "--event" ? needArg("-e") : a.substr(8);
      if (e.rfind("gpu=", 0) == 0) {
        if (e != "gpu=opencl") fail("unknown GPU event '" + e + "' (supported: gpu=opencl)");
        gpu = e.substr(4);
      } else {
        events.push_back(e);
      }
    }
    else if (a == "--streams-per-tracing-thread" || a.rfind("--streams-per-tracing-thread=", 0) == 0) {
      streamsPerTracer = a.find('=') != std::string::npos ? a.substr(a.find('=') + 1) : needArg(a.c_str());
      if (streamsPerTracer.empty() || streamsPerTracer.find_first_not_of("0123456789") != std::string::npos ||
          std::stoul(streamsPerTracer) == 0)
        fail("--streams-per-tracing-thread needs a positive integer");
    }
    else if (a == "-t" || a == "--trace") trace = true;
    else if (a == "-tt" || a == "--ttrace") trace = ttrace = true;
    else if (a == "-f" || a == "-fp" || a == "--process-fraction" || a.rfind("--process-fraction=", 0) == 0) {
      const std::string v = a.find('=') != std::string::npos ? a.substr(a.find('=') + 1) : needArg(a.c_str());
      const double f = parseFraction(v);
      if (!(f >= 0 && f <= 1)) fail("--process-fraction needs a number from 0 to 1 (0.1 or 1/10), got '" + v + "'");
      fraction = std::to_string(f);
    }
    else if (a == "-ds" || a == "--delay-sampling") delay = true;
    else if (a == "-nu" || a == "--no-unwind") noUnwind = true;
    else if (a == "-d" || a == "--debug") debugWait = true;
    else if (a == "-r" || a == "--retain-recursion") retainRecursion = true;
    else if (a == "--disable-gprof" || a == "-md" || a == "--monitor-debug") {
    }
    else if (a == "-m" || a == "--merge-threads") {
      const std::string v = needArg(a.c_str());
      if (v != "0" && v != "1") fail("--merge-threads takes 0 or 1, got '" + v + "'");
      merge = v == "1";
    }
    else if (a == "-ms" || a == "--memsize" || a == "-lm" || a == "--low-memsize") {
      const std::string v = needArg(a.c_str());
      if (v.empty() || v.find_first_not_of("0123456789") < v.size() - 1 ||
          (v.find_first_not_of("0123456789") == v.size() - 1 && std::string("kKmMgG").find(v.back()) == std::string::npos))
        fail(a + " needs a size (4096, 80K, 4M), got '" + v + "'");
    }
    else if (a == "-mp" || a == "--memleak-prob") {
      const std::string v = needArg(a.c_str());
      const double p = parseFraction(v);
      if (!(p >= 0 && p <= 1)) fail("--memleak-prob needs a number from 0 to 1, got '" + v + "'");
      memleakProb = std::to_string(p);
    }
    else if (a == "-dd" || a == "--dynamic-debug") needArg(a.c_str());
    else if (a == "-a" || a.rfind("--attribute=", 0) == 0 || a == "--attribute") {
      const std::string what = a.find('=') != std::string::npos ? a.substr(a.find('=') + 1) : needArg(a.c_str());
      if (what != "python") fail("unknown attribution '" + what + "' (supported: -a python)");
      python = true;
    }
    else if (a == "-o" || a == "--output") out = needArg("-o");
    else if (a.rfind("--output=", 0) == 0) out = a.substr(9);
    else if (a == "-c" || a == "--count") {
      defaultCount = needArg("-c");
      if (!defaultCount.empty() && defaultCount[0] == '@') defaultCount.erase(0, 1);
    }
    else if (a == "-L" || a == "-l" || a == "--list-events") { hm::listEvents(); return 0; }
    else if (a == "-h" || a == "--help") { usage(stdout); return 0; }
    else if (a == "-V" || a == "--version") { std::printf("hpcrun (hpctoolkit-cpp) 0.1.0\n"); return 0; }
    else { std::fprintf(stderr, "hpcrun: unknown option '%s'\n", a.c_str()); usage(stderr); return 2; }
  }
  if (i >= argc) { usage(stderr); return 2; }
  if (events.empty() && gpu.empty()) events.push_back("CPUTIME@5000");
  if (events.size() > hm::kMaxEvents) fail("at most " + std::to_string(hm::kMaxEvents) + " events");

  std::string list;
  size_t nEvents = 0;
  for (const std::string& e : events) {
    if (e.find(',') != std::string::npos) {
      // A counter group, as the reference's hpcrun takes it: LEADER[@RATE],MEMBER... or
      // {LEADER,MEMBER...}[@RATE]: the leader is sampled; at each of its samples every
      // member's count since the last is added where the sample lands.
      std::string inner = e, rate;
      if (!e.empty() && e[0] == '{') {
        const size_t close = e.find('}');
        if (close == std::string::npos || (close + 1 < e.size() && e[close + 1] != '@'))
          fail("event group '" + e + "': expected {EVENT,EVENT...}[@RATE]");
        inner = e.substr(1, close - 1);
        rate = e.substr(close + 1);
      }
      std::vector<std::string> parts;
      for (size_t at = 0;;) {
        const size_t comma = inner.find(',', at);
        parts.push_back(inner.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
        if (comma == std::string::npos) break;
        at = comma + 1;
      }
      if (!rate.empty()) {
        if (parts[0].find('@') != std::string::npos) fail("event group '" + e + "': two rates for its leader");
        parts[0] += rate;
      }
      const std::string leader = validateEvent(parts[0], defaultCount);
      if (leader.rfind("perf::", 0) != 0)
        fail("event group '" + e + "': its first event, the one sampled, must be a perf event");
      const size_t leaderIndex = nEvents;
      list += (list.empty() ? "" : ";") + leader;
      ++nEvents;
      for (size_t k = 1; k < parts.size(); ++k) {
        if (parts[k].find('@') != std::string::npos)
          fail("event group '" + e + "': '" + parts[k] + "' takes no period: it is read at each sample of '" +
               parts[0] + "'");
        std::string v = validateEvent(parts[k], "");
        if (v.rfind("perf::", 0) != 0) fail("event group '" + e + "': '" + parts[k] + "' is not a perf event");
        v = v.substr(0, v.rfind('@')) + "@=" + std::to_string(leaderIndex);
        list += ";" + v;
        ++nEvents;
      }
      continue;
    }
    const std::string v = validateEvent(e, defaultCount);
    const bool pair = v.rfind("IO::", 0) == 0 || v.rfind("MEMLEAK::", 0) == 0;
    if (list.find(v) != std::string::npos && pair) continue;  // -e IO or -e MEMLEAK twice
    list += (list.empty() ? "" : ";") + v;
    nEvents += pair ? 2 : 1;
  }
  if (nEvents > hm::kMaxEvents)
    fail("at most " + std::to_string(hm::kMaxEvents) + " events (IO and MEMLEAK count as two each)");

  std::string app = argv[i];
  // As the reference says, a static program cannot be measured: its own code is not (the
  // dynamic programs it starts still are, so it runs).
  if (std::string file = resolveProgram(app); !file.empty())
    if (std::string why = unmeasurable(file); !why.empty())
      std::fprintf(stderr,
                   "hpcrun: warning: '%s' cannot be measured: %s, so libhpcrun.so cannot be loaded into "
                   "it; only the dynamically linked programs it starts are measured\n",
                   app.c_str(), why.c_str());
  // -a python hooks in through a sitecustomize module on PYTHONPATH: Python's -S (no site
  // module), -E and -I (PYTHON* variables ignored) skip it, and the run would have no Python
  // frame without a word.
  if (python && baseName(app).rfind("python", 0) == 0)
    if (const char flag = pythonSkipsSite(argc, argv, i))
      std::fprintf(stderr,
                   "hpcrun: warning: python's -%c keeps it from loading the sitecustomize module -a python "
                   "hooks in with: the measurement will have no Python frames (run without -%c)\n",
                   flag, flag);
  const std::string job = jobId();
  if (out.empty()) out = "hpctoolkit-" + baseName(app) + "-measurements" + (job.empty() ? "" : "-" + job);
  if (!makeDirs(out)) fail("cannot create measurement directory '" + out + "': " + std::strerror(errno));
  char real[PATH_MAX];
  if (!realpath(out.c_str(), real)) fail("cannot resolve '" + out + "'");

  std::string lib = findRuntime();
  if (lib.empty()) fail("cannot find libhpcrun.so next to this hpcrun (set HPCTOOLKIT to the install prefix)");
  std::string preload = lib;
  // A sanitized program's runtime first (it refuses to start otherwise), unless already there.
  const char* userPreload = std::getenv("LD_PRELOAD");
  if (const std::string rt = sanitizerRuntime(resolveProgram(app)); !rt.empty() && !(userPreload && std::strstr(userPreload, rt.c_str())))
    preload = rt + " " + preload;
  // -e IO's stdio wrappers, beside the runtime (only then: they cost every stdio call).
  if (list.find("IO::") != std::string::npos) {
    const std::string io = dirOf(lib) + "/libhpcrun_io.so";
    if (access(io.c_str(), R_OK) != 0) fail("cannot find " + io + " beside libhpcrun.so");
    preload += " " + io;
  }
  // -e MEMLEAK's malloc family, beside the runtime (only then: it costs every allocation).
  if (list.find("MEMLEAK::") != std::string::npos) {
    const std::string ml = dirOf(lib) + "/libhpcrun_memleak.so";
    if (access(ml.c_str(), R_OK) != 0) fail("cannot find " + ml + " beside libhpcrun.so");
    preload += " " + ml;
  }
  if (!memleakProb.empty()) setenv("HPCRUN_MEMLEAK_PROB", memleakProb.c_str(), 1);
  else unsetenv("HPCRUN_MEMLEAK_PROB");
  if (const char* old = std::getenv("LD_PRELOAD"); old && *old) preload += std::string(" ") + old;

  setenv("HPCRUN_EVENT_LIST", list.c_str(), 1);
  setenv("HPCRUN_OUT_PATH", real, 1);
  setenv("HPCRUN_TRACE", ttrace ? "2" : trace ? "1" : "0", 1);
  auto flag = [](const char* name, bool on) {
    if (on) setenv(name, "1", 1);
    else unsetenv(name);
  };
  flag("HPCRUN_DELAY_SAMPLING", delay);
  flag("HPCRUN_NO_UNWIND", noUnwind);
  flag("HPCRUN_RETAIN_RECURSION", retainRecursion);
  if (!job.empty()) setenv("HPCRUN_JOB_ID", job.c_str(), 1);  // each profile's job-id
  else unsetenv("HPCRUN_JOB_ID");
  flag("HPCRUN_DEBUG_WAIT", debugWait);
  flag("HPCRUN_MERGE_THREADS", merge);
  if (!fraction.empty()) {
    // One draw per process from the run's seed (its pid mixed in): an exec keeps the
    // process's, a fork's child draws its own.
    uint64_t seed = 0;
    if (getrandom(&seed, sizeof seed, 0) != sizeof seed) seed = uint64_t(time(nullptr)) ^ uint64_t(getpid()) << 32;
    char hex[32];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(seed));
    setenv("HPCRUN_PROCESS_FRACTION", fraction.c_str(), 1);
    setenv("HPCRUN_FRACTION_SEED", hex, 1);
  } else {
    unsetenv("HPCRUN_PROCESS_FRACTION");
    unsetenv("HPCRUN_FRACTION_SEED");
  }
  setenv("LD_PRELOAD", preload.c_str(), 1);
  if (!gpu.empty()) setenv("HPCRUN_GPU", gpu.c_str(), 1);
  else unsetenv("HPCRUN_GPU");
  if (!streamsPerTracer.empty()) setenv("HPCRUN_GPU_STREAMS_PER_TRACER", streamsPerTracer.c_str(), 1);
  if (python) {  // our sitecustomize.py first on PYTHONPATH (python.hpp)
    std::string dir = dirOf(lib) + "/hpcrun-python";
    if (access((dir + "/sitecustomize.py").c_str(), R_OK) != 0) fail("cannot find " + dir + "/sitecustomize.py for -a python");
    if (const char* old = std::getenv("PYTHONPATH"); old && *old) dir += std::string(":") + old;
    setenv("PYTHONPATH", dir.c_str(), 1);
  }
  execvp(app.c_str(), argv + i);
  // As a shell says it (and env, nohup, time): 127 where there is no such program, 126
  // where it cannot be run; a script can tell these from the program's own statuses.
  const int why = errno;
  fail("cannot run '" + app + "': " + std::strerror(why), why == ENOENT ? 127 : 126);
}
