#include "unwind.hpp"

#include <atomic>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include <ucontext.h>

#include "loadmap.hpp"
#include "sys.hpp"
#include "unwind_cache.hpp"

#define UNW_LOCAL_ONLY
#include <libunwind.h>

extern "C" char __start_hpcrun_tramp[] __attribute__((weak, visibility("hidden")));
extern "C" char __stop_hpcrun_tramp[] __attribute__((weak, visibility("hidden")));

namespace hpc::rt {

namespace {
using InitLocal2 = int (*)(unw_cursor_t*, unw_context_t*, int);
using Step = int (*)(unw_cursor_t*);
using GetReg = int (*)(unw_cursor_t*, unw_regnum_t, unw_word_t*);
using SetCaching = int (*)(unw_addr_space_t, unw_caching_policy_t);
using FlushCache = void (*)(unw_addr_space_t, unw_word_t, unw_word_t);
using GetContext = int (*)(unw_context_t*);
using IsSignalFrame = int (*)(unw_cursor_t*);
using GetAccessors = unw_accessors_t* (*)(unw_addr_space_t);
using ProcInfoByIp = int (*)(unw_addr_space_t, unw_word_t, unw_proc_info_t*, void*);

InitLocal2 pInit = nullptr;
Step pStep = nullptr;
GetReg pGetReg = nullptr;
FlushCache pFlush = nullptr;
GetContext pGetContext = nullptr;
IsSignalFrame pIsSignalFrame = nullptr;
unw_addr_space_t* pAddrSpace = nullptr;
ProcInfoByIp pProcInfoByIp = nullptr;
}  // namespace

bool isTrampoline(uintptr_t pc) {
  return pc >= reinterpret_cast<uintptr_t>(__start_hpcrun_tramp) &&
         pc < reinterpret_cast<uintptr_t>(__stop_hpcrun_tramp);
}

namespace {

// The descriptors below keptHighBase() that are free, held (each a copy of /dev/null) until
// released: whatever opens a file meanwhile gets a number above them.
struct LowNumbersHeld {
  static constexpr int kMost = 1024;
  int fds[kMost];
  int n = 0;
  LowNumbersHeld() {
    int src = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (src < 0) return;
    const int base = keptHighBase();
    if (src >= base) {
      close(src);
      return;
    }
    fds[n++] = src;
    while (n < kMost) {
      int fd = fcntl(src, F_DUPFD_CLOEXEC, 0);
      if (fd < 0) break;
      if (fd >= base) {
        close(fd);
        break;
      }
      fds[n++] = fd;
    }
  }
  ~LowNumbersHeld() {
    while (n > 0) close(fds[--n]);
  }
};

// libunwind's own reader tests each stack page it has not read lately by writing a byte of
// it into a pipe it keeps on two descriptors, and when reading that pipe fails it closes both
// numbers and opens a new pipe on the lowest free ones. Once an application has closed every
// descriptor and opened its own files on those numbers, libunwind would read from them, write
// stack bytes into them and close them (test `Descriptors.*`, whose worker samples land on
// stack pages not read before). Ours tests a page with no descriptor: a one-byte
// process_vm_readv of it (EFAULT: unreadable), or where seccomp forbids that call, mincore
// (ENOMEM: unmapped; a mapped page that cannot be read faults, and the sample's fault guard
// ends that unwind). The last pages found readable are remembered per thread.
constexpr uintptr_t kPage = 4096;
constexpr int kGoodPages = 8;
thread_local uintptr_t tlsGoodPage[kGoodPages] __attribute__((tls_model("initial-exec")));
thread_local unsigned tlsGoodNext __attribute__((tls_model("initial-exec")));
std::atomic<bool> gNoVmRead{false};

bool pageReadable(uintptr_t page) {
  if (page == 0) return false;
  for (int i = 0; i < kGoodPages; ++i)
    if (tlsGoodPage[i] == page) return true;
  bool ok = false;
  if (!gNoVmRead.load(std::memory_order_relaxed)) {
    char byte;
    iovec local{&byte, 1}, remote{reinterpret_cast<void*>(page), 1};
    const int saved = errno;
    const long r = syscall(SYS_process_vm_readv, getpid(), &local, 1UL, &remote, 1UL, 0UL);
    if (r < 0 && errno != EFAULT) gNoVmRead.store(true, std::memory_order_relaxed);
    errno = saved;
    ok = r == 1;
  }
  if (gNoVmRead.load(std::memory_order_relaxed)) {
    unsigned char resident;
    const int saved = errno;
    ok = mincore(reinterpret_cast<void*>(page), kPage, &resident) == 0;
    errno = saved;
  }
  if (ok) tlsGoodPage[tlsGoodNext++ % kGoodPages] = page;
  return ok;
}

int readMemory(unw_addr_space_t, unw_word_t addr, unw_word_t* val, int write, void*) {
  if (write) {  // libunwind's own writes (resuming a cursor): never ours, but kept as they were
    *reinterpret_cast<unw_word_t*>(addr) = *val;
    return 0;
  }
  const uintptr_t first = uintptr_t(addr) & ~(kPage - 1);
  const uintptr_t last = (uintptr_t(addr) + sizeof(unw_word_t) - 1) & ~(kPage - 1);
  if (!pageReadable(first) || (last != first && !pageReadable(last))) return -UNW_EINVAL;
  *val = *reinterpret_cast<const volatile unw_word_t*>(addr);
  return 0;
}

}  // namespace

bool unwindInit() {
  // libunwind opens a pipe as it initialises (it tests an address it may not read by writing
  // a byte of it into the pipe). On the lowest free numbers, its two descriptors would shift
  // those the application's own opens get; and an application that closes every descriptor
  // and opens its own in their place would have libunwind read from and write into its
  // files. The low numbers are held meanwhile, so that the pipe lands above them (test
  // `Workload/ClosesEveryDescriptor`).
  LowNumbersHeld held;
  void* h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  if (!h) return false;
  pInit = reinterpret_cast<InitLocal2>(dlsym(h, "_ULx86_64_init_local2"));
  pStep = reinterpret_cast<Step>(dlsym(h, "_ULx86_64_step"));
  pGetReg = reinterpret_cast<GetReg>(dlsym(h, "_ULx86_64_get_reg"));
  pFlush = reinterpret_cast<FlushCache>(dlsym(h, "_Ux86_64_flush_cache"));
  pGetContext = reinterpret_cast<GetContext>(dlsym(h, "_Ux86_64_getcontext"));
  pIsSignalFrame = reinterpret_cast<IsSignalFrame>(dlsym(h, "_ULx86_64_is_signal_frame"));
  pAddrSpace = reinterpret_cast<unw_addr_space_t*>(dlsym(h, "_ULx86_64_local_addr_space"));
  pProcInfoByIp = reinterpret_cast<ProcInfoByIp>(dlsym(h, "_ULx86_64_get_proc_info_by_ip"));
  auto setCaching = reinterpret_cast<SetCaching>(dlsym(h, "_ULx86_64_set_caching_policy"));
  if (!pInit || !pStep || !pGetReg) return false;
  // Without our reader in its place, libunwind's would take the application's descriptors:
  // no libunwind then (samples keep their leaf frame only).
  auto getAccessors = reinterpret_cast<GetAccessors>(dlsym(h, "_Ux86_64_get_accessors"));
  unw_accessors_t* acc = getAccessors && pAddrSpace ? getAccessors(*pAddrSpace) : nullptr;
  if (!acc || !acc->access_mem) {
    pInit = nullptr;
    return false;
  }
  acc->access_mem = readMemory;
  // Per-thread caches: no lock is taken in the signal handler.
  if (setCaching && pAddrSpace) setCaching(*pAddrSpace, UNW_CACHE_PER_THREAD);
  return true;
}

uintptr_t functionStart(uintptr_t ip, uintptr_t& end) {
  if (!pProcInfoByIp || !pAddrSpace) return 0;
  unw_proc_info_t pi{};
  if (pProcInfoByIp(*pAddrSpace, unw_word_t(ip), &pi, nullptr) < 0 || pi.start_ip > ip || ip >= pi.end_ip) return 0;
  end = uintptr_t(pi.end_ip);
  return uintptr_t(pi.start_ip);
}

void unwindFlushCache() {
  if (pFlush && pAddrSpace) pFlush(*pAddrSpace, 0, 0);
}

namespace {

constexpr int kMaxRecoveries = 64;     // heuristic frames per sample
constexpr size_t kScanWords = 4096;    // stack words searched per recovery (32 KiB)

uint8_t byteAt(uintptr_t a) { return *reinterpret_cast<const volatile uint8_t*>(a); }

// True when the bytes before ra end in a call instruction whose return address is ra and,
// for a direct call, whose target lies at or below pc (the callee holds pc); with pc 0, any
// direct call (JIT code calls its callees wherever they were generated).
bool callBefore(uintptr_t ra, uintptr_t pc) {
  if (byteAt(ra - 5) == 0xe8) {  // call rel32
    if (!pc) return true;
    int32_t rel;
    uint8_t* r = reinterpret_cast<uint8_t*>(&rel);
    for (int i = 0; i < 4; ++i) r[i] = byteAt(ra - 4 + uintptr_t(i));
    uintptr_t target = ra + uintptr_t(intptr_t(rel));
    return target <= pc && pc - target < (64u << 20);
  }
  // call r/m64 (ff /2), by instruction length: modrm forms with their displacement sizes.
  auto isCallModrm = [](uint8_t m, unsigned mod) { return ((m >> 3) & 7) == 2 && (m >> 6) == mod; };
  uint8_t m2 = byteAt(ra - 1), m3 = byteAt(ra - 2), m6 = byteAt(ra - 5), m7 = byteAt(ra - 6);
  if (byteAt(ra - 2) == 0xff && (isCallModrm(m2, 3) || (isCallModrm(m2, 0) && (m2 & 7) != 4 && (m2 & 7) != 5)))
    return true;                                                                     // call reg / [reg]
  if (byteAt(ra - 3) == 0xff && isCallModrm(m3, 1) && (m3 & 7) != 4) return true;  // [reg+d8]
  if (byteAt(ra - 3) == 0xff && isCallModrm(m3, 0) && (m3 & 7) == 4) return true;  // [sib]
  if (byteAt(ra - 6) == 0xff && (isCallModrm(m6, 2) || (isCallModrm(m6, 0) && (m6 & 7) == 5)))
    return true;                                                                     // [reg+d32], [rip+d32]
  if (byteAt(ra - 7) == 0xff && isCallModrm(m7, 2) && (m7 & 7) == 4) return true;  // [sib+d32]
  return false;
}

bool followsCall(uintptr_t ra, uintptr_t pc) {
  if (isTrampoline(ra)) return true;  // main or a thread's start routine returns there
  if (ra < 16 || loadmapIsSelf(ra) || loadmapLookup(ra).id == 0 || loadmapLookup(ra - 7).id == 0) return false;
  return callBefore(ra, pc);
}

// A frame-pointer step that landed in code outside every module (JIT code, whose frames keep
// rbp as V8's always do, and a JVM's with -XX:+PreserveFramePointer): taken where it leads
// outward, by less than 1 GiB, to readable bytes that end in a call, not on the stack (a
// garbage rbp's "return address" is most often a stack address).
bool jitCaller(uintptr_t ra, uintptr_t sp, uintptr_t nextSp) {
  constexpr uintptr_t kStackNear = uintptr_t(64) << 20;
  if (ra < 4096 || nextSp <= sp || nextSp - sp > (uintptr_t(1) << 30) || loadmapLookup(ra).id) return false;
  if (ra + kStackNear > sp && ra < sp + kStackNear) return false;
  if (!pageReadable((ra - 7) & ~(kPage - 1)) || !pageReadable((ra - 1) & ~(kPage - 1))) return false;
  return callBefore(ra, 0);
}

// The binary-analysis fallback for code without CFI (and whose frame pointer, libunwind's
// own fallback, is not one): the nearest stack slot at or above sp holding an address that
// follows a call instruction is taken as the frame's return address. Returns its slot or 0.
uintptr_t scanForReturn(uintptr_t sp, uintptr_t pc, uintptr_t& ra) {
  sp &= ~uintptr_t(7);
  for (size_t i = 0; i < kScanWords; ++i) {
    uintptr_t slot = sp + i * 8;
    uintptr_t v = *reinterpret_cast<const volatile uintptr_t*>(slot);
    if (followsCall(v, pc)) {
      ra = v;
      return slot;
    }
  }
  return 0;
}

// The rbp of the frame that resumes at the return address in `slot`, from rbp as the frame
// left above it had it. Code that keeps a frame pointer (and the JIT code of a JVM) pushes its
// caller's rbp just below the return address and points rbp below that: rbp under the slot
// is such a callee's, and its caller's lies at slot - 8. rbp above the slot was left alone
// below it, so it is the resumed frame's own. Without this a frame that computes its CFA from
// rbp (built with frame pointers, or using alloca) read its return address out of the
// callee's frame: after a recovery every such frame's caller was a stale return address
// left in some local (a JVM thread's paths ran thread_native_entry < Monitor::wait(stale) <
// Thread::call_run < JNIHandleBlock::allocate_block(stale) < ...).
uintptr_t rbpAtReturn(uintptr_t rbp, uintptr_t slot) {
  constexpr uintptr_t kFar = uintptr_t(1) << 30;
  if (rbp > slot && rbp - slot < kFar) return rbp;
  if (pageReadable((slot - 8) & ~(kPage - 1))) {
    const uintptr_t saved = *reinterpret_cast<const volatile uintptr_t*>(slot - 8);
    if (saved > slot && saved - slot < kFar) return saved;
  }
  return rbp;
}

}  // namespace

namespace {

bool steppable(Recipe r) { return r.size >= 0 || r.size == Recipe::kFramePointer; }

uintptr_t wordAt(uintptr_t a) { return *reinterpret_cast<const volatile uintptr_t*>(a); }

// libunwind's step from (ip, sp, rbp, callee-saved registers `saved`) to its caller, or false.
bool probeStep(const ucontext_t& uc, uintptr_t ip, uintptr_t sp, uintptr_t rbp, uintptr_t& nextIp,
               uintptr_t& nextSp, uintptr_t& nextRbp) {
  ucontext_t probe = uc;
  greg_t* g = probe.uc_mcontext.gregs;
  g[REG_RIP] = greg_t(ip);
  g[REG_RSP] = greg_t(sp);
  g[REG_RBP] = greg_t(rbp);
  g[REG_RBX] = g[REG_R12] = g[REG_R13] = g[REG_R14] = g[REG_R15] = 0;
  unw_cursor_t c;
  unw_word_t i = 0, s = 0, b = 0;
  if (pInit(&c, reinterpret_cast<unw_context_t*>(&probe), 0) < 0 || pStep(&c) <= 0 ||
      pGetReg(&c, UNW_REG_IP, &i) < 0 || pGetReg(&c, UNW_REG_SP, &s) < 0 || pGetReg(&c, UNW_X86_64_RBP, &b) < 0)
    return false;
  nextIp = i, nextSp = s, nextRbp = b;
  return true;
}

// Learns the recipe of the plain frame (ip, sp, rbp) that libunwind stepped to (nextIp,
// nextSp, nextRbp). A stack-pointer frame: the same step with the callee-saved registers
// cleared lands there too, and the return address lies just below the new sp; its rbp is the
// caller's where a probe with another rbp gets that one back, else saved in the one word of
// the frame that holds the caller's. A frame-pointer frame: the CFA is rbp + 16 with the
// return address and the caller's rbp below it, and a step from a moved sp lands there too.
// (A rule that reads anything else gives another answer or fails.) Not inlined: its context
// copies and cursors stay off the application's stack in the handler except while learning.
__attribute__((noinline)) void learnRecipe(FrameRecipes& recipes, const ucontext_t& uc, uintptr_t ip, uintptr_t sp,
                                           uintptr_t rbp, uintptr_t nextIp, uintptr_t nextSp, uintptr_t nextRbp) {
  recipes.set(ip, Recipe{Recipe::kLibunwind, 0});  // a fault while probing leaves it to libunwind
  if (nextSp <= sp || nextSp - sp > (uintptr_t(1) << 30) || wordAt(nextSp - 8) != nextIp) return;
  uintptr_t i = 0, s = 0, b = 0;
  if (probeStep(uc, ip, sp, 0, i, s, b) && i == nextIp && s == nextSp) {
    Recipe r{int32_t(nextSp - sp), Recipe::kRbpUnknown};
    constexpr uintptr_t kOther = 0x5a5a5a5a5a5a5a50;
    uintptr_t i2 = 0, s2 = 0, b2 = 0;
    if (b == 0 && probeStep(uc, ip, sp, kOther, i2, s2, b2) && b2 == kOther) {
      r.rbpAt = 0;  // left alone
    } else if (b == nextRbp && b != 0) {
      int found = 0;
      for (uintptr_t a = sp & ~uintptr_t(7); a + 8 <= nextSp - 8; a += 8)
        if (wordAt(a) == nextRbp) ++found, r.rbpAt = int32_t(nextSp - a);
      if (found != 1) r.rbpAt = Recipe::kRbpUnknown;
    }
    recipes.set(ip, r);
    return;
  }
  if (rbp == 0 || nextSp != rbp + 16 || wordAt(rbp + 8) != nextIp || wordAt(rbp) != nextRbp) return;
  if (probeStep(uc, ip, sp - 64, rbp, i, s, b) && i == nextIp && s == nextSp && b == nextRbp)
    recipes.set(ip, Recipe{Recipe::kFramePointer, 0});
}

// Steps frames by their recipes from the frame (ip, sp, rbp), whose recipe is `recipe`. True
// when the walk ended (at the fence, or out of frame slots); false at a frame that has none.
bool walkByRecipes(const FrameRecipes& recipes, uintptr_t ip, uintptr_t sp, uintptr_t rbp, Recipe recipe,
                   uintptr_t* frames, size_t cap, size_t& n, UnwindEnd& end) {
  bool rbpKnown = true;
  uintptr_t lastIp = ip;  // recursion repeats a return address: one lookup for a run of them
  Recipe last = recipe;
  for (;;) {
    uintptr_t cfa;
    if (recipe.size == Recipe::kFramePointer) {
      cfa = rbp + 16;
      if (!rbpKnown || cfa <= sp) return false;  // a frame pointer must lead outward
      ip = wordAt(rbp + 8);
      rbp = wordAt(rbp);
    } else {
      cfa = sp + uintptr_t(recipe.size);
      ip = wordAt(cfa - 8);
      if (recipe.rbpAt > 0) rbp = wordAt(cfa - uintptr_t(recipe.rbpAt)), rbpKnown = true;
      else if (recipe.rbpAt < 0) rbpKnown = false;
    }
    sp = cfa;
    if (isTrampoline(ip)) {
      end = UnwindEnd::Fence;
      return true;
    }
    recipe = ip == lastIp ? last : recipes.find(ip);
    if (!steppable(recipe)) return false;
    lastIp = ip, last = recipe;
    if (n == cap) {
      end = UnwindEnd::Truncated;
      return true;
    }
    frames[n++] = ip;
  }
}

// The walk shared by both entry points; uc is never written (a signalled thread resumes
// from it).
UnwindEnd walk(ucontext_t* uc, int initFlags, uintptr_t* frames, size_t cap, size_t& n, UnwindCache* cache,
               uintptr_t* sps = nullptr, size_t spsCap = 0) {
  n = 0;
  uintptr_t pc = uc->uc_mcontext.gregs[REG_RIP];
  if (!pInit) {
    frames[n++] = pc;
    return UnwindEnd::Failed;
  }
  unw_cursor_t cursor;
  if (pInit(&cursor, reinterpret_cast<unw_context_t*>(uc), initFlags) < 0) {
    frames[n++] = pc;
    return UnwindEnd::Failed;
  }
  // Recovered frames restart libunwind from a copy of the context with the recovered pc and
  // sp: the original context must never be written, the thread resumes from it.
  ucontext_t copy;
  // Without libunwind's signal-frame test a sigreturn frame could pass for a plain one.
  FrameRecipes* recipes = cache && pIsSignalFrame ? &cache->recipes : nullptr;
  bool byRecipes = recipes != nullptr;  // until a walk by recipes met a frame without one
  bool plain = false;  // this frame was reached from a plain frame: ip is a return address
  uintptr_t learnIp = 0, learnSp = 0, learnRbp = 0;  // the frame libunwind just stepped, to learn from
  for (int recoveries = 0;;) {
    unw_word_t ip = 0, sp = 0;
    if (pGetReg(&cursor, UNW_REG_IP, &ip) < 0 || pGetReg(&cursor, UNW_REG_SP, &sp) < 0) return UnwindEnd::Failed;
    if (learnIp) {
      unw_word_t rbp = 0;
      if (pGetReg(&cursor, UNW_X86_64_RBP, &rbp) >= 0)
        learnRecipe(*recipes, *uc, learnIp, learnSp, learnRbp, ip, sp, rbp);
    }
    learnIp = 0;
    if (n > 0 && isTrampoline(ip)) return UnwindEnd::Fence;
    if (n == cap) return UnwindEnd::Truncated;
    if (n < spsCap) sps[n] = sp;
    frames[n++] = ip;
    Recipe recipe{Recipe::kLibunwind, 0};
    if (recipes && plain) {
      recipe = recipes->find(ip);
      unw_word_t rbp = 0;
      if (steppable(recipe) && byRecipes && pGetReg(&cursor, UNW_X86_64_RBP, &rbp) >= 0) {
        const size_t entered = n;
        UnwindEnd end;
        if (walkByRecipes(*recipes, ip, sp, rbp, recipe, frames, cap, n, end)) {
          cache->stats->byRecipes += n - entered;
          return end;
        }
        // libunwind steps from this frame again: it has the registers such a frame may need.
        n = entered;
        byRecipes = false;
      }
    }
    const bool signalFrame = recipes && pIsSignalFrame(&cursor) > 0;
    unw_word_t rbpBefore = 0;
    const bool rbpRead = pGetReg(&cursor, UNW_X86_64_RBP, &rbpBefore) >= 0;
    if (recipe.size == Recipe::kUnknown && (recipes->full() || !rbpRead))
      recipe.size = Recipe::kLibunwind;  // no room, or nothing to learn it from
    int r = pStep(&cursor);
    // The outermost frame by libunwind's rules. From code outside every module that is its
    // frame-pointer guess meeting an rbp of 0, which a JIT's code uses as a register like any
    // other (a JVM's threads running compiled Java had their samples hang on the thread's
    // root, their callers lost): recovered as any other failed step.
    if (r == 0 && loadmapLookup(ip).id) return UnwindEnd::Bottom;
    // A step that lands outside every module came from libunwind's frame-pointer guess on
    // code that keeps no frame pointer: recover this frame instead.
    unw_word_t next = 0, nextSp = 0;
    if (r > 0 && pGetReg(&cursor, UNW_REG_IP, &next) >= 0 && (isTrampoline(next) || loadmapLookup(next).id)) {
      plain = !signalFrame;
      if (recipe.size == Recipe::kUnknown && !signalFrame) learnIp = ip, learnSp = sp, learnRbp = rbpBefore;
      continue;
    }
    // Into JIT code by its frame pointer: no recipe is learnt or used for it (its code may be
    // freed and other code generated at its addresses).
    if (r > 0 && pGetReg(&cursor, UNW_REG_SP, &nextSp) >= 0 && jitCaller(next, sp, nextSp)) {
      plain = false;
      continue;
    }
    plain = true;  // restarted below at a return address found on the stack
    uintptr_t ra = 0, slot = 0;
    if (recoveries++ == kMaxRecoveries || !(slot = scanForReturn(sp, ip, ra))) return UnwindEnd::Failed;
    copy = *uc;
    copy.uc_mcontext.gregs[REG_RIP] = greg_t(ra);
    copy.uc_mcontext.gregs[REG_RSP] = greg_t(slot + 8);
    if (rbpRead) copy.uc_mcontext.gregs[REG_RBP] = greg_t(rbpAtReturn(rbpBefore, slot));
    if (pInit(&cursor, reinterpret_cast<unw_context_t*>(&copy), 0) < 0) return UnwindEnd::Failed;
  }
}

}  // namespace

UnwindEnd unwindFromSignal(void* ucontext, uintptr_t* frames, size_t cap, size_t& n, UnwindCache* cache) {
  return walk(static_cast<ucontext_t*>(ucontext), UNW_INIT_SIGNAL_FRAME, frames, cap, n, cache);
}

__attribute__((noinline)) UnwindEnd unwindHere(uintptr_t* frames, size_t cap, size_t& n, uintptr_t* sps,
                                                size_t spsCap) {
  n = 0;
  ucontext_t uc;
  if (!pGetContext || pGetContext(reinterpret_cast<unw_context_t*>(&uc)) < 0) return UnwindEnd::Failed;
  return walk(&uc, 0, frames, cap, n, nullptr, sps, spsCap);
}

}  // namespace hpc::rt
