#include "ember_team.h"

#include <stdint.h>
#include <string.h>
#include "ember_math.h"
#include "ember_kernels.h"

#include "ember_gemm.h"

void run(void **b, int64_t segment) {
  char *arena = (char *)b[0];
  (void)arena;
  ember_team team = ember_team_hold(2);
  switch (segment) {
  case 0:
    /* gemm_0 */
    ember_gemm_f32(2, 2, 1, &(ember_batch){0, 0, 0, 0, 0}, 111, 111, 256, 1024, 1024, (float *)b[1] + 0, 1024, 1024, (float *)b[2] + 0, 1024, 1, (float *)b[3] + 0, 1024, 1.0, 0, 0.0, 0, 0.0, 0, 0);
    break;
  }
  ember_team_release(&team);
}
