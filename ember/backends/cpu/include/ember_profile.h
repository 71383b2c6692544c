/* Per-step timing of a compiled program, compiled in when ember.config.profile is on.
 *
 * Every step of the program (a fused kernel, a GEMM, a native call) adds its wall time
 * and one call to its counters; ``ember_profile_read`` copies them out (Python:
 * ``compiled.profile()``). The counters are shared by every caller of the program:
 * calls from several threads at once make them approximate.
 *
 * Include before any system header: it defines _GNU_SOURCE for clock_gettime.
 */
#ifndef EMBER_PROFILE_H
#define EMBER_PROFILE_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <time.h>

extern __attribute__((visibility("hidden"))) double ember_profile_seconds[];
extern __attribute__((visibility("hidden"))) int64_t ember_profile_calls[];

static inline double ember_now(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

#endif /* EMBER_PROFILE_H */
