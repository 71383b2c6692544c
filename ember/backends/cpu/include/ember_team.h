/* Keeps the OpenMP team of one compiled call on distinct cores while the call runs.
 *
 * Why: a thread that waits at a region's end (or for the next region) spins a little,
 * then sleeps; whoever wakes it later decides, through the Linux scheduler, where it
 * runs, and the scheduler often puts it on the waker's core when its scan for an idle
 * core is skipped. Two threads of a team then take turns on one core while the other
 * idles: a static split takes twice as long. Seen here on 2 cores: an MLP train step
 * after a 0.2 s pause ran in 11 ms in one call and 26 ms in the next, for good once it
 * happened. With each thread held on a core of its own it stays at 11 ms.
 *
 * How: at the start of a call the calling thread is held on the core it is on (its
 * mask is restored when the call returns, so threads it starts later inherit nothing),
 * and the team's other threads are held each on one of the other allowed cores. They
 * are moved only when the caller is found on another core than last time (they stay
 * where they are between calls: other users of the same OpenMP runtime in the process,
 * which share its threads, find them there too). Nothing is
 * done when the user chose a placement (OMP_PROC_BIND, OMP_PLACES, GOMP_CPU_AFFINITY),
 * or when the team has more threads than the allowed cores.
 *
 * Include before any system header: it defines _GNU_SOURCE for the affinity calls.
 */
#ifndef EMBER_TEAM_H
#define EMBER_TEAM_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#if defined(__linux__) && defined(_OPENMP)
#include <sched.h>
#include <stdlib.h>

int omp_get_thread_num(void);

typedef struct {
  int held;         /* the caller's mask was narrowed and must be restored */
  cpu_set_t saved;  /* the caller's mask before the call */
} ember_team;

static int ember_placement_chosen_by_user(void) {
  return getenv("OMP_PROC_BIND") != NULL || getenv("OMP_PLACES") != NULL ||
         getenv("GOMP_CPU_AFFINITY") != NULL;
}

/* Hold each thread of the caller's team other than the caller on its own core,
 * skipping `here` (the caller's). */
static void ember_place_workers(int threads, const cpu_set_t *allowed, int here) {
  int cores[CPU_SETSIZE];
  int count = 0;
  for (int cpu = 0; cpu < CPU_SETSIZE && count < threads - 1; cpu++)
    if (cpu != here && CPU_ISSET(cpu, allowed))
      cores[count++] = cpu;
#pragma omp parallel num_threads(threads)
  {
    int member = omp_get_thread_num();
    if (member > 0 && member <= count) {
      cpu_set_t mine;
      CPU_ZERO(&mine);
      CPU_SET(cores[member - 1], &mine);
      sched_setaffinity(0, sizeof mine, &mine);
    }
  }
}

static __attribute__((unused)) ember_team ember_team_hold(int threads) {
  /* The caller's core when its workers were last placed (each calling thread has a
   * team of its own). */
  static __thread int placed_for = -1;
  static int user_placement = -1;
  ember_team team = {0};
  if (user_placement < 0)
    user_placement = ember_placement_chosen_by_user();
  if (threads < 2 || user_placement)
    return team;
  if (sched_getaffinity(0, sizeof team.saved, &team.saved) != 0)
    return team;
  int here = sched_getcpu();
  if (here < 0 || here >= CPU_SETSIZE || !CPU_ISSET(here, &team.saved) ||
      CPU_COUNT(&team.saved) < threads)
    return team;
  cpu_set_t only_here;
  CPU_ZERO(&only_here);
  CPU_SET(here, &only_here);
  if (sched_setaffinity(0, sizeof only_here, &only_here) != 0)
    return team;
  team.held = 1;
  if (here != placed_for) {
    ember_place_workers(threads, &team.saved, here);
    placed_for = here;
  }
  return team;
}

static __attribute__((unused)) void ember_team_release(const ember_team *team) {
  if (team->held)
    sched_setaffinity(0, sizeof team->saved, &team->saved);
}

#else /* no affinity control: nothing to hold */
typedef struct { int held; } ember_team;
static __attribute__((unused)) ember_team ember_team_hold(int threads) {
  (void)threads;
  ember_team team = {0};
  return team;
}
static __attribute__((unused)) void ember_team_release(const ember_team *team) { (void)team; }
#endif

#endif /* EMBER_TEAM_H */
