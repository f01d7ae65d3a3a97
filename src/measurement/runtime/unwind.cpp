#include "unwind.hpp"

#include <dlfcn.h>
#include <ucontext.h>

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

InitLocal2 pInit = nullptr;
Step pStep = nullptr;
GetReg pGetReg = nullptr;
FlushCache pFlush = nullptr;
unw_addr_space_t* pAddrSpace = nullptr;
}  // namespace

bool isTrampoline(uintptr_t pc) {
  return pc >= reinterpret_cast<uintptr_t>(__start_hpcrun_tramp) &&
         pc < reinterpret_cast<uintptr_t>(__stop_hpcrun_tramp);
}

bool unwindInit() {
  void* h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  if (!h) return false;
  pInit = reinterpret_cast<InitLocal2>(dlsym(h, "_ULx86_64_init_local2"));
  pStep = reinterpret_cast<Step>(dlsym(h, "_ULx86_64_step"));
  pGetReg = reinterpret_cast<GetReg>(dlsym(h, "_ULx86_64_get_reg"));
  pFlush = reinterpret_cast<FlushCache>(dlsym(h, "_Ux86_64_flush_cache"));
  pAddrSpace = reinterpret_cast<unw_addr_space_t*>(dlsym(h, "_ULx86_64_local_addr_space"));
  auto setCaching = reinterpret_cast<SetCaching>(dlsym(h, "_ULx86_64_set_caching_policy"));
  if (!pInit || !pStep || !pGetReg) return false;
  // Per-thread caches: no lock is taken in the signal handler.
  if (setCaching && pAddrSpace) setCaching(*pAddrSpace, UNW_CACHE_PER_THREAD);
  return true;
}

void unwindFlushCache() {
  if (pFlush && pAddrSpace) pFlush(*pAddrSpace, 0, 0);
}

UnwindEnd unwindFromSignal(void* ucontext, uintptr_t* frames, size_t cap, size_t& n) {
  n = 0;
  auto* uc = static_cast<ucontext_t*>(ucontext);
  uintptr_t pc = uc->uc_mcontext.gregs[REG_RIP];
  if (!pInit) {
    frames[n++] = pc;
    return UnwindEnd::Failed;
  }
  unw_cursor_t cursor;
  if (pInit(&cursor, reinterpret_cast<unw_context_t*>(uc), UNW_INIT_SIGNAL_FRAME) < 0) {
    frames[n++] = pc;
    return UnwindEnd::Failed;
  }
  for (;;) {
    unw_word_t ip = 0;
    if (pGetReg(&cursor, UNW_REG_IP, &ip) < 0) return UnwindEnd::Failed;
    if (n > 0 && isTrampoline(ip)) return UnwindEnd::Fence;
    if (n == cap) return UnwindEnd::Truncated;
    frames[n++] = ip;
    int r = pStep(&cursor);
    if (r == 0) return UnwindEnd::Bottom;
    if (r < 0) return UnwindEnd::Failed;
  }
}

}  // namespace hpc::rt
