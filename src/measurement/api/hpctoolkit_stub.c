/* libhpctoolkit.so: the sampling switch of hpctoolkit.h for a run without hpcrun, where it
 * does nothing. Under hpcrun the preloaded runtime defines the same functions, which the
 * dynamic linker finds first. */
#include "hpctoolkit.h"

void hpctoolkit_sampling_start(void) {}
void hpctoolkit_sampling_stop(void) {}
int hpctoolkit_sampling_is_active(void) { return 0; }
void hpctoolkit_sampling_start_(void) {}
void hpctoolkit_sampling_stop_(void) {}
