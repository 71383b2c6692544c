/* The wide tile of ember_own_gemm_bf16 on Intel AMX (included by ember_gemm_lib.c in
 * its 16-bit units after ember_gemm_bf16.h, where the compiler targets AMX_TILE and
 * AMX_BF16): TDPBF16PS multiplies a 16 x 32 tile of A by a 32 x 16 tile of B (bfloat16
 * pairs) into a 16 x 16 tile of float32 sums, 16 times the products of a vdpbf16ps.
 *
 * The tiles are the process's only when the OS grants it (arch_prctl, asked once): a
 * kernel or sandbox that refuses leaves ember_bf16_choice on the vdpbf16ps tile.
 * Each call on a thread loads the tile configuration (OpenMP threads run the calls)
 * and releases the tiles at its end, so that a thread holds no tile state between
 * products.
 *
 * Register blocking: 2 x 2 tiles of C (32 x 32), 2 tiles of A and 2 of B per 32
 * elements of the sum: the 8 tile registers. Micropanels, the depth rounded up to 32
 * (zeros past the end):
 *   A: blocks of 32 along the sum, then the MR = 32 rows, then the 32 elements: each
 *      half of a block is a tile (16 rows of 64 bytes);
 *   B: pair micropanels of NR = 32 columns as the vdpbf16ps tile packs them (pair q,
 *      then the columns, then the pair): 16 pairs x 16 columns are a tile, rows
 *      2 NR elements apart.
 * The sums are stored to a 32 x 32 float buffer and go through the tile store (the
 * epilogue of the float32 tiles). Blocks of 1024 along the sum: B's block (1024 x 256,
 * 512 KiB) in L2, and C stored once for k <= 1024 (1 thread, CPU time, 1024^3: 706
 * GFLOP/s against 558 with blocks of 512, which keep A's panel in L1; 256 x 784 x 1024:
 * 585 against 549).
 */
#include <sys/syscall.h>

long syscall(long number, ...); /* (unistd.h's, hidden by -std=c11) */

EMBER_DEFINE_TILE_SIZES(ember_f32, ember_bf16_amx, 32, 2, 32, 1024)
EMBER_DEFINE_TILE_STORE(ember_f32, ember_bf16_amx, float, 2)

/* Whether this process may use the tiles: asked of the OS once (a race asks twice, and
 * the answer is the same). */
#define EMBER_ARCH_REQ_XCOMP_PERM 0x1023
#define EMBER_XFEATURE_XTILEDATA 18
static int ember_amx_granted(void) {
  static int state; /* 0: not asked yet, 1: granted, 2: refused */
  int now = __atomic_load_n(&state, __ATOMIC_RELAXED);
  if (now == 0) {
    now = syscall(SYS_arch_prctl, EMBER_ARCH_REQ_XCOMP_PERM, EMBER_XFEATURE_XTILEDATA) == 0 ? 1
                                                                                        : 2;
    __atomic_store_n(&state, now, __ATOMIC_RELAXED);
  }
  return now == 1;
}

/* Palette 1, all 8 tiles 16 rows x 64 bytes: C 0-3, A 4-5, B 6-7. */
typedef struct {
  uint8_t palette, start_row, reserved[14];
  uint16_t bytes_per_row[16];
  uint8_t rows[16];
} ember_amx_config;
static const ember_amx_config ember_amx_tiles = {
    1, 0, {0}, {64, 64, 64, 64, 64, 64, 64, 64}, {16, 16, 16, 16, 16, 16, 16, 16}};

/* NAME##_pack_a: rows x depth of op(A) (element (i, p) at a[i * rs + p * cs]) as the
 * blocks of A's tiles, from elements stored as S (converted by LOAD). */
#define EMBER_DEFINE_AMX_PACK_A(NAME, S, LOAD)                                             \
  static void NAME##_pack_a(const S *a, int64_t rs, int64_t cs, int64_t rows,              \
                            int64_t depth, uint16_t *restrict out) {                       \
    enum { MR = ember_bf16_amx_mr, K = ember_bf16_amx_kstep };                             \
    const int64_t padded = ember_round_up(depth, K);                                       \
    for (int64_t i0 = 0; i0 < rows; i0 += MR) {                                            \
      const int64_t mr = ember_min(MR, rows - i0);                                         \
      const S *panel = a + i0 * rs;                                                        \
      for (int64_t p0 = 0; p0 < padded; p0 += K) {                                         \
        uint16_t *to = out + p0 * MR;                                                      \
        const int64_t run = ember_min(K, depth - p0);                                      \
        for (int i = 0; i < MR; i++)                                                       \
          for (int p = 0; p < K; p++)                                                      \
            to[i * K + p] = i < mr && p < run ? LOAD(panel[i * rs + (p0 + p) * cs]) : 0;   \
      }                                                                                    \
      out += padded * MR;                                                                  \
    }                                                                                      \
  }

EMBER_DEFINE_AMX_PACK_A(ember_bf16_amx, uint16_t, EMBER_LOAD_AS_IS)
EMBER_DEFINE_AMX_PACK_A(ember_bf16_amx_cast, float, ember_f32_to_bf16)
EMBER_DEFINE_BF16_PAIR_PACK_B(ember_bf16_amx, ember_bf16_amx, uint16_t, EMBER_LOAD_AS_IS)
EMBER_DEFINE_BF16_PAIR_PACK_B(ember_bf16_amx, ember_bf16_amx_cast, float, ember_f32_to_bf16)

/* The MR x NR tile of C at c (mr x nr of it inside C) from micropanels a and b of
 * `depth` (a multiple of 32) elements of the sum; the tile configuration loaded. */
static void ember_bf16_amx_microkernel(int64_t depth, const uint16_t *restrict a,
                                       const uint16_t *restrict b, float *restrict c,
                                       int64_t ldc, int64_t mr, int64_t nr,
                                       const ember_f32_epilogue *e) {
  enum { MR = ember_bf16_amx_mr, NR = ember_bf16_amx_nr, K = ember_bf16_amx_kstep };
  ember_f32_vector acc[MR][NR / ember_f32_lanes];
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t p = 0; p < depth; p += K) {
    const uint16_t *a_block = a + p * MR, *b_block = b + p * NR;
    _tile_loadd(4, a_block, K * sizeof *a);
    _tile_loadd(5, a_block + 16 * K, K * sizeof *a);
    _tile_loadd(6, b_block, 2 * NR * sizeof *b);
    _tile_loadd(7, b_block + 2 * 16, 2 * NR * sizeof *b);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, &acc[0][0], sizeof acc[0]);
  _tile_stored(1, &acc[0][1], sizeof acc[0]);
  _tile_stored(2, &acc[16][0], sizeof acc[0]);
  _tile_stored(3, &acc[16][1], sizeof acc[0]);
  ember_bf16_amx_store(acc, c, ldc, mr, nr, e);
}

EMBER_DEFINE_TILE_LOOPS(ember_f32, ember_bf16_amx, uint16_t, uint16_t, float)

/* ember_bf16_choice##CAST##_blocked: the product on AMX's tile where the OS grants it,
 * else on the vdpbf16ps one (CAST: empty, or _cast_a, _cast_b, _cast_ab). */
#define EMBER_DEFINE_AMX_CHOICE(CAST, SA, SB)                                              \
  static void ember_bf16_choice##CAST##_blocked(                                           \
      int64_t rows, int64_t cols, int64_t k, const SA *a, int64_t a_rs, int64_t a_cs,      \
      const SB *b, int64_t b_rs, int64_t b_cs, float *c, int64_t ldc, float alpha,         \
      const float *d, float d_scale, const float *row, float row_scale, int activation) {  \
    if (!ember_amx_granted()) {                                                            \
      ember_bf16_wide##CAST##_blocked(rows, cols, k, a, a_rs, a_cs, b, b_rs, b_cs, c, ldc,  \
                                      alpha, d, d_scale, row, row_scale, activation);      \
      return;                                                                              \
    }                                                                                      \
    _tile_loadconfig(&ember_amx_tiles);                                                    \
    ember_bf16_amx##CAST##_blocked(rows, cols, k, a, a_rs, a_cs, b, b_rs, b_cs, c, ldc,     \
                                   alpha, d, d_scale, row, row_scale, activation);         \
    _tile_release();                                                                       \
  }
