/* The wide tile of ember_own_gemm_bf16 on CPUs with AVX512_BF16 (included by
 * ember_gemm_lib.c in its 16-bit unit): operands stay bfloat16, packed in pairs of
 * consecutive elements of the sum, and vdpbf16ps adds a pair's two products to each
 * float32 lane, twice the products of an FMA per instruction, rounded once per pair.
 *
 * Micropanels, the depth rounded up to even (zeros past the end):
 *   A: pair q, then the MR rows, then the pair (a(i, 2q), a(i, 2q + 1)): one 32-bit
 *      broadcast per row and pair;
 *   B: pair q, then the NR columns, then the pair: NV vectors of 16 columns x 2.
 * Same tile (6 x 4 vectors), sums, epilogue and loops as the float32 wide tile.
 */
#include <immintrin.h>

EMBER_DEFINE_TILE_SIZES(ember_f32, ember_bf16_wide, EMBER_MR, EMBER_NV, 2, ember_f32_kc)
EMBER_DEFINE_TILE_STORE(ember_f32, ember_bf16_wide, float, EMBER_NV)

/* NAME##_pack_b: op(B) as TILE's pair micropanels (NR columns, the depth rounded up
 * to TILE##_kstep), from elements stored as S (converted to bfloat16 by LOAD: as they
 * are, or float32 rounded, a cast fused into the product). Also AMX's B tiles: 16 pairs
 * of a micropanel's 16 columns are the rows of one (ember_gemm_amx.h). */
#define EMBER_DEFINE_BF16_PAIR_PACK_B(TILE, NAME, S, LOAD)                                 \
  /* depth x cols of op(B) (element (p, j) at b[p * rs + j * cs]) as pair micropanels. */  \
  static void NAME##_pack_b(const S *b, int64_t rs, int64_t cs, int64_t depth,             \
                            int64_t cols, uint16_t *restrict out) {                        \
    const int64_t pairs = ember_round_up(depth, TILE##_kstep) / 2;                         \
    for (int64_t j0 = 0; j0 < cols; j0 += TILE##_nr) {                                     \
      const int64_t nr = ember_min(TILE##_nr, cols - j0);                                  \
      const S *panel = b + j0 * cs;                                                        \
      for (int64_t q = 0; q < pairs; q++) {                                                \
        uint16_t *to = out + q * TILE##_nr * 2;                                            \
        const int whole = 2 * q + 1 < depth && nr == TILE##_nr;                            \
        for (int j = 0; j < TILE##_nr; j++)                                                \
          for (int h = 0; h < 2; h++) {                                                    \
            const int64_t p = 2 * q + h;                                                   \
            to[j * 2 + h] =                                                                \
                whole || (j < nr && p < depth) ? LOAD(panel[p * rs + j * cs]) : 0;         \
          }                                                                                \
      }                                                                                    \
      out += 2 * pairs * TILE##_nr;                                                        \
    }                                                                                      \
  }

/* NAME##_pack_a and _pack_b: the wide tile's pair micropanels from elements stored as S
 * (converted by LOAD). */
#define EMBER_DEFINE_BF16_PAIR_PACKS(NAME, S, LOAD)                                        \
  /* rows x depth of op(A) (element (i, p) at a[i * rs + p * cs]) as pair micropanels. */  \
  static void NAME##_pack_a(const S *a, int64_t rs, int64_t cs, int64_t rows,              \
                            int64_t depth, uint16_t *restrict out) {                       \
    const int64_t pairs = (depth + 1) / 2;                                                 \
    for (int64_t i0 = 0; i0 < rows; i0 += ember_bf16_wide_mr) {                            \
      const int64_t mr = ember_min(ember_bf16_wide_mr, rows - i0);                         \
      const S *panel = a + i0 * rs;                                                        \
      for (int64_t q = 0; q < pairs; q++)                                                  \
        for (int i = 0; i < ember_bf16_wide_mr; i++)                                       \
          for (int h = 0; h < 2; h++) {                                                    \
            const int64_t p = 2 * q + h;                                                   \
            out[(q * ember_bf16_wide_mr + i) * 2 + h] =                                    \
                i < mr && p < depth ? LOAD(panel[i * rs + p * cs]) : 0;                    \
          }                                                                                \
      out += 2 * pairs * ember_bf16_wide_mr;                                               \
    }                                                                                      \
  }                                                                                        \
  EMBER_DEFINE_BF16_PAIR_PACK_B(ember_bf16_wide, NAME, S, LOAD)

EMBER_DEFINE_BF16_PAIR_PACKS(ember_bf16_wide, uint16_t, EMBER_LOAD_AS_IS)
EMBER_DEFINE_BF16_PAIR_PACKS(ember_bf16_wide_cast, float, ember_f32_to_bf16)

/* The MR x NR tile of C at c (mr x nr of it inside C) from pair micropanels a and b of
 * `depth` (even) elements of the sum. */
static void ember_bf16_wide_microkernel(int64_t depth, const uint16_t *restrict a,
                                        const uint16_t *restrict b, float *restrict c,
                                        int64_t ldc, int64_t mr, int64_t nr,
                                        const ember_f32_epilogue *e) {
  enum { MR = ember_bf16_wide_mr, NR = ember_bf16_wide_nr, NV = EMBER_NV };
  ember_f32_vector acc[MR][NV];
  for (int i = 0; i < MR; i++)
    for (int v = 0; v < NV; v++) acc[i][v] = (ember_f32_vector){0};
  for (int i = 0; i < MR; i++) /* (C's tile and B ahead, as the float32 tile fetches them) */
    for (int v = 0; v < NV; v++) __builtin_prefetch(c + i * ldc + v * ember_f32_lanes, 1, 3);
  for (int64_t q = 0; q < depth / 2; q++) {
    __m512bh row[NV];
    for (int v = 0; v < NV; v++)
      __builtin_prefetch(b + ((q + EMBER_PREFETCH_STEPS / 2) * NR + v * ember_f32_lanes) * 2, 0,
                         3);
    for (int v = 0; v < NV; v++)
      row[v] = (__m512bh)_mm512_loadu_si512(b + (q * NR + v * ember_f32_lanes) * 2);
    for (int i = 0; i < MR; i++) {
      int32_t pair;
      memcpy(&pair, a + (q * MR + i) * 2, sizeof pair);
      const __m512bh broadcast = (__m512bh)_mm512_set1_epi32(pair);
      for (int v = 0; v < NV; v++)
        acc[i][v] = (ember_f32_vector)_mm512_dpbf16_ps((__m512)acc[i][v], broadcast, row[v]);
    }
  }
  ember_bf16_wide_store(acc, c, ldc, mr, nr, e);
}

EMBER_DEFINE_TILE_LOOPS(ember_f32, ember_bf16_wide, uint16_t, uint16_t, float)
