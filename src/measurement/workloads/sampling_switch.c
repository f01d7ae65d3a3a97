/* The sampling switch of hpctoolkit.h (linked with -lhpctoolkit): before(), then
 * hpctoolkit_sampling_start(), during(), hpctoolkit_sampling_stop(), paused(), start again,
 * after(); each spins about 0.1 s (times the scale). Under hpcrun -ds only during() and
 * after() are sampled; without -ds before() too. Prints whether sampling was active in each
 * (1 only under hpcrun). */
#include <stdio.h>
#include "hpctoolkit.h"
#include "work.h"

static double scale;

#define PHASE(name)                                                          \
  __attribute__((noinline)) static uint64_t name(void) {                     \
    return spin((uint64_t)(60000000 * scale), (uint64_t)(uintptr_t) & name); \
  }
PHASE(before)
PHASE(during)
PHASE(paused)
PHASE(after)

int main(int argc, char** argv) {
  scale = scale_arg(argc, argv);
  volatile uint64_t v = before();
  const int a = hpctoolkit_sampling_is_active();
  hpctoolkit_sampling_start();
  v += during();
  const int b = hpctoolkit_sampling_is_active();
  hpctoolkit_sampling_stop();
  v += paused();
  const int c = hpctoolkit_sampling_is_active();
  hpctoolkit_sampling_start();
  v += after();
  printf("active: before %d, during %d, paused %d %d\n", a, b, c, (int)(v & 0));
  return 0;
}
