/* Measuring chosen intervals of a program under hpcrun: bracket them with
 * hpctoolkit_sampling_start() and hpctoolkit_sampling_stop() and run hpcrun -ds (sampling
 * off until the first start). Without -ds sampling is on from the start, and the calls
 * still turn it off and on. Link with -lhpctoolkit (lib/libhpctoolkit.so): its functions do
 * nothing in a run without hpcrun, whose runtime's own take their place under it. Fortran:
 * call hpctoolkit_sampling_start() / hpctoolkit_sampling_stop(). */
#ifndef HPCTOOLKIT_H
#define HPCTOOLKIT_H

#ifdef __cplusplus
extern "C" {
#endif

void hpctoolkit_sampling_start(void);
void hpctoolkit_sampling_stop(void);
/* 1 while samples are taken (under hpcrun and started), else 0. */
int hpctoolkit_sampling_is_active(void);

#ifdef __cplusplus
}
#endif

#endif
