/* Ember's own GEMM: ember_own_gemm_f32 / _f64, with the contract of ember_gemm.h's
 * ember_gemm_f32 / _f64 (and the same split over the OpenMP team), computed by a
 * BLIS-style blocked product instead of a BLAS; and ember_own_gemm_bf16 / _f16, the same
 * with A and B stored as 16-bit floats, summed and written (C, D, the row) in float32.
 * Built once per target ISA into a library of its own (ember_gemm.py), which the
 * generated modules link when config.blas is "ember" (or "auto" measured it fastest).
 *
 * Per thread, for its block of C (rows x cols of one batch item):
 *
 *   for each MC block of rows          A block, packed: MC x KC (L3)
 *     for each KC block of the sum
 *       pack A[MC x KC] into micropanels of MR rows (each MR x KC: L1)
 *       for each NC block of columns   B block, packed: KC x NC (L2)
 *         pack B[KC x NC] into micropanels of NR columns
 *         for each micropanel of A, for each micropanel of B: the MR x NR microkernel
 *
 * A product at most one vector wide (n <= 16 float32 with AVX-512) takes a narrow
 * tile, 12 rows x one vector, instead of the wide one (6 x 4 vectors); one at most half
 * the wide tile wide (n <= 32) the middle tile, 8 rows x 2 vectors. One at most one NC
 * block wide reads a row-major A in place, unpacked (EMBER_DEFINE_CHOICE).
 *
 * The microkernel keeps its MR x NR tile of C in vector registers (MR rows of NV
 * vectors: a row of B is loaded as NV vectors, each element of A's column broadcast),
 * written once per KC block. The first block writes C = alpha * AB + d_scale * D +
 * row_scale * row (the affine epilogue of ember_gemm.h, computed in registers before
 * the store: C is read and written once when k <= KC); later blocks add alpha * AB, and
 * the last applies the activation to each tile right after storing it, while it is in L1.
 * Packing pads the panels with zeros, so the microkernel always runs whole tiles; a
 * tile at the edge of C goes through a small buffer and only its valid part is written.
 * Operands are read through strides (row step, column step), so a transposed operand is
 * packed as it is, never copied transposed first.
 *
 * 16-bit operands are converted to float32 as they are packed (F16C's vcvtph2ps for
 * float16), so the float32 microkernels run on them; with AVX512_BF16 the wide tile of
 * bfloat16 keeps them 16-bit instead, packed in pairs along the sum, and multiplies a
 * pair per lane with vdpbf16ps (ember_gemm_bf16.h): twice the products per instruction;
 * with AMX-BF16 (and the OS's grant at run time) on AMX's tiles instead (ember_gemm_amx.h:
 * 16 x 16 sums of 32 products per instruction).
 * A float32 operand of a 16-bit product (`x.astype(bfloat16) @ w`) is rounded to the
 * 16-bit format as it is packed (EMBER_DEFINE_CASTS: the _cast_a, _cast_b and _cast_ab
 * entry points), so that no 16-bit copy of it is written first.
 *
 * The vector width follows the target: GCC vector extensions, 64-byte vectors where
 * the compiler targets AVX-512, 32 with AVX2, else 16 (SSE2, NEON, or scalar code the
 * compiler emulates). Built with -ffp-contract=fast so that `c += a * b` is one FMA.
 */
#define EMBER_GEMM_LIBRARY
#include "ember_gemm.h"
#include "ember_kernels.h"

#include <stdlib.h>

#if defined(__AVX512F__)
#define EMBER_VECTOR_BYTES 64
#elif defined(__AVX2__) && defined(__FMA__)
#define EMBER_VECTOR_BYTES 32
#else
#define EMBER_VECTOR_BYTES 16
#endif

/* Register tile: MR rows of NV vectors. With 32 vector registers (AVX-512) 6 x 4 keeps
 * 24 accumulators, 4 vectors of a row of B and a broadcast in registers (6 x 64 float32:
 * 10 loads per 24 FMAs; 12 x 2 and 8 x 3 ran 2-8% slower on Zen 5); with 16 (AVX2, SSE)
 * 6 x 2. */
#if defined(__AVX512F__)
#define EMBER_MR 6
#define EMBER_NV 4
#else
#define EMBER_MR 6
#define EMBER_NV 2
#endif
/* Intel's AVX-512 cores, by the -march macros of GCC and Clang (GCC 12 names Emerald
 * Rapids cooperlake): what was measured there only, so that Zen's build stays as tuned. */
#if defined(__AVX512F__) &&                                                               \
    (defined(__skylake_avx512__) || defined(__cascadelake__) || defined(__cooperlake__) ||   \
     defined(__icelake_server__) || defined(__icelake_client__) || defined(__tigerlake__) || \
     defined(__rocketlake__) || defined(__sapphirerapids__) || defined(__emeraldrapids__) || \
     defined(__graniterapids__))
#define EMBER_GEMM_INTEL 1
#else
#define EMBER_GEMM_INTEL 0
#endif
/* The narrow tile, for products with few columns (n = 10 on the wide tile would leave 54
 * of its 64 lanes idle): one vector wide, with more rows, so that each row of B loaded
 * serves 12 FMAs, as many independent sums as keep the FMA units busy. */
#define EMBER_NARROW_MR 12
/* The middle tile, for products at most half the wide tile wide (a convolution's 27 or
 * 32 output channels would leave half of the wide tile's lanes idle or more): half its
 * vectors, more rows. Only where the wide tile has 4 vectors: with 2 (AVX2, SSE), half
 * is the narrow tile's width, and the narrow tile takes those products first. */
#define EMBER_HAS_MID_TILE (EMBER_NV >= 4)
#define EMBER_MID_MR 8
#define EMBER_MID_NV (EMBER_NV / 2)

/* Cache blocks, in elements of float32 (float64 halves KC and NC): an A micropanel
 * (MR x KC, 24 KiB) stays in L1 while B's micropanels stream from L2, which holds the
 * packed KC x NC block of B (512 KiB: half of Zen 4's L2, the rest for A's panels and
 * C); the MC x KC block of A is read from L3. A long KC stores C seldom: 256 x 784 x
 * 1024 ran 8% faster with 800 than with 384. KC 1024, NC 128 against 800, 256: 1.03-1.04x
 * (geometric mean over six MLP and transformer shapes, 2 threads, Zen 4, the two
 * libraries called alternately in one process), bfloat16 1.035x, 1 thread 1.01x. */
#define EMBER_KC_BYTES (1024 * 4)
#define EMBER_NC_BYTES (128 * 4)
#define EMBER_MC 1536

#define EMBER_PACK_RUN 16 /* elements read along a row of memory at a time when packing */
#define EMBER_PACK_PANELS 8 /* of A's, packed side by side from a transposed A */

/* A thread's buffers (ember_gemm.h's ember_space): its packed panels, and the float32
 * sums of 16-bit results (ember_sums). */
static _Thread_local ember_space ember_packed, ember_sums;

static void *ember_pack_space(size_t bytes) { return ember_space_of(&ember_packed, bytes); }

static inline int64_t ember_min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t ember_round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

/* The step of `extent` cut into the fewest blocks of at most `most`, all of about the
 * same size, a multiple of `unit` (at least 1, for an empty extent). */
static inline int64_t ember_block(int64_t extent, int64_t most, int64_t unit) {
  if (extent <= 0) return 1;
  const int64_t blocks = (extent + most - 1) / most;
  return ember_min(most, ember_round_up((extent + blocks - 1) / blocks, unit));
}


/* How far ahead the microkernel fetches its row of B (in steps of the sum): B streams
 * from L2, and asking early kept the FMAs fed 2-5% better (1 thread, Zen 4, 16 vs none
 * and 8, 32; C's tile fetched at the start gained another 1-2%). */
#define EMBER_PREFETCH_STEPS 16

/* One element type: its vectors and the epilogue of a tile. */
#define EMBER_DEFINE_TYPE(NAME, T)                                                         \
  typedef T NAME##_vector __attribute__((vector_size(EMBER_VECTOR_BYTES)));                \
  typedef T NAME##_unaligned                                                               \
      __attribute__((vector_size(EMBER_VECTOR_BYTES), aligned(sizeof(T))));                \
  enum {                                                                                   \
    NAME##_lanes = EMBER_VECTOR_BYTES / sizeof(T),                                         \
    NAME##_kc = EMBER_KC_BYTES / sizeof(T),                                                \
  };                                                                                       \
                                                                                           \
  /* The epilogue's terms for one tile: where C, D and the row start, whether this is    \
   * the first block of the sum (which writes the addends) or a later one, and whether    \
   * the last (after which the activation is applied). */                                 \
  typedef struct {                                                                         \
    T alpha, d_scale, row_scale;                                                           \
    const T *d; /* laid out as C (ldc); null for none */                                   \
    const T *row; /* one value per column; null for none */                                \
    int first, last;                                                                       \
    int activation; /* EMBER_ACTIVATION_* (ember_gemm.h) */                                \
  } NAME##_epilogue;                                                                       \
                                                                                           \
  /* C[i][j] for one element of a tile, from its sum `acc`. */                             \
  static inline T NAME##_finish(T acc, const NAME##_epilogue *e, const T *c, int64_t ldc,  \
                                int64_t i, int64_t j) {                                    \
    if (!e->first) return c[i * ldc + j] + e->alpha * acc;                                 \
    T value = e->alpha * acc;                                                              \
    if (e->d) value += e->d_scale * e->d[i * ldc + j];                                     \
    if (e->row) value += e->row_scale * e->row[j];                                         \
    return value;                                                                          \
  }

/* A register tile's sizes: MR rows of NV vectors of the element type of TYPE; KSTEP
 * elements of the sum per step of its microkernel (2 for pairs); KC elements of the sum
 * per block at most (TYPE##_kc but for a tile whose A panel needs another). */
#define EMBER_DEFINE_TILE_SIZES(TYPE, TILE, MR, NV, KSTEP, KC)                             \
  enum {                                                                                   \
    TILE##_mr = MR,                                                                        \
    TILE##_kc = KC,                                                                        \
    TILE##_nr = NV * TYPE##_lanes,                                                         \
    TILE##_nc = EMBER_NC_BYTES * TYPE##_lanes / EMBER_VECTOR_BYTES / TILE##_nr * TILE##_nr,   \
    TILE##_mc = EMBER_MC / MR * MR,                                                        \
    TILE##_kstep = KSTEP,                                                                  \
  };

/* The store of a tile's sums `acc` (MR x NV vectors) into C at c, mr x nr of it inside
 * C, with the epilogue: straight from the registers for a whole tile; at C's edge
 * through a small buffer, each whole vector inside C as a vector (a 32-column product
 * on the 64-column tile stores two vectors a row, where element by element took as
 * long as its products) and the rest element by element; after the last block of the
 * sum, the activation on the tile just stored (in L1). */
#define EMBER_DEFINE_TILE_STORE(TYPE, TILE, T, NV)                                         \
  static inline void TILE##_store_vector(TYPE##_vector sum, T *restrict c, int64_t ldc,   \
                                         int64_t i, int64_t j, const TYPE##_epilogue *e) { \
    const int64_t at = i * ldc + j;                                                        \
    TYPE##_unaligned *out = (TYPE##_unaligned *)(c + at);                                  \
    TYPE##_vector value = sum * e->alpha;                                                  \
    if (!e->first) {                                                                       \
      value += *out;                                                                       \
    } else {                                                                               \
      if (e->d) value += *(const TYPE##_unaligned *)(e->d + at) * e->d_scale;              \
      if (e->row) value += *(const TYPE##_unaligned *)(e->row + j) * e->row_scale;         \
    }                                                                                      \
    *out = value;                                                                          \
  }                                                                                        \
  static inline void TILE##_store(TYPE##_vector acc[TILE##_mr][NV], T *restrict c,         \
                                  int64_t ldc, int64_t mr, int64_t nr,                     \
                                  const TYPE##_epilogue *e) {                              \
    if (mr == TILE##_mr && nr == TILE##_nr) {                                              \
      for (int i = 0; i < TILE##_mr; i++)                                                  \
        for (int v = 0; v < NV; v++)                                                       \
          TILE##_store_vector(acc[i][v], c, ldc, i, v * TYPE##_lanes, e);                  \
    } else {                                                                               \
      TYPE##_vector tile[TILE##_mr][NV];                                                   \
      for (int i = 0; i < TILE##_mr; i++)                                                  \
        for (int v = 0; v < NV; v++) tile[i][v] = acc[i][v];                               \
      const int64_t vectors = ember_min(nr, TILE##_nr) / TYPE##_lanes;                     \
      for (int64_t i = 0; i < mr; i++) {                                                   \
        for (int64_t v = 0; v < vectors; v++)                                              \
          TILE##_store_vector(tile[i][v], c, ldc, i, v * TYPE##_lanes, e);                 \
        for (int64_t j = vectors * TYPE##_lanes; j < nr; j++)                              \
          c[i * ldc + j] = TYPE##_finish(tile[i][j / TYPE##_lanes][j % TYPE##_lanes], e, c, \
                                         ldc, i, j);                                       \
      }                                                                                    \
    }                                                                                      \
    if (e->last && e->activation != EMBER_ACTIVATION_NONE)                                 \
      for (int64_t i = 0; i < mr; i++) ember_activate_##T(c + i * ldc, nr, e->activation); \
  }

/* A 16 x 16 block of float32 transposed in registers: out[p * ld + j] = in[j * cs + p]
 * (j, p < 16), rows of memory loaded as vectors, a square of L x L at a time (L, the
 * lanes of a vector: 16, or 8 with AVX2). Each stage swaps one bit of the row index with
 * that bit of the column index (blocks of L / 2, ..., 2, 1), a pair of two-vector
 * shuffles per pair of rows. Where a B stored transposed is packed (x @ W.T, every
 * Linear layer), this replaces a scalar store per element: 64 x 512 x 512 with W
 * transposed ran at 64 GFLOP/s against 84 with W as it is (Zen 4, 1 thread). With AVX2
 * (Zen 1, 2 threads, x @ W.T): 8 x 4608 x 512, ResNet-18's 3 x 3 convolution on 1 x 1
 * pixels, 1.81-2.03 -> 1.42-1.44 ms; 8 x 2304 x 512 0.89-1.48 -> 0.63; 64 x 256 x 512
 * 0.33 -> 0.30. GCC's generic shuffles: GCC builds only. */
#if EMBER_VECTOR_BYTES >= 32 && defined(__GNUC__) && !defined(__clang__)
#define EMBER_TRANSPOSE_BLOCKS 1
#define EMBER_LANES (EMBER_VECTOR_BYTES / 4)
typedef float ember_f32v __attribute__((vector_size(EMBER_VECTOR_BYTES)));
typedef float ember_f32v_unaligned __attribute__((vector_size(EMBER_VECTOR_BYTES), aligned(4)));
typedef int32_t ember_i32v __attribute__((vector_size(EMBER_VECTOR_BYTES)));
/* (row j with bit D clear takes lanes LOW of rows j and j + D, row j + D lanes HIGH) */
#define EMBER_TRANSPOSE_STAGE(D, LOW, HIGH)                                               \
  for (int j = 0; j < EMBER_LANES; j++)                                                   \
    if (!(j & D)) {                                                                       \
      const ember_f32v a = r[j], b = r[j + D];                                            \
      r[j] = __builtin_shuffle(a, b, LOW);                                                \
      r[j + D] = __builtin_shuffle(a, b, HIGH);                                           \
    }
static inline void ember_transpose_square(const float *in, int64_t cs, float *out,
                                          int64_t ld) {
  ember_f32v r[EMBER_LANES];
  for (int j = 0; j < EMBER_LANES; j++) r[j] = *(const ember_f32v_unaligned *)(in + j * cs);
#if EMBER_LANES == 16
  const ember_i32v low8 = {0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23},
                   high8 = {8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31},
                   low4 = {0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27},
                   high4 = {4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31},
                   low2 = {0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29},
                   high2 = {2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31},
                   low1 = {0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30},
                   high1 = {1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31};
  EMBER_TRANSPOSE_STAGE(8, low8, high8)
#else
  const ember_i32v low4 = {0, 1, 2, 3, 8, 9, 10, 11}, high4 = {4, 5, 6, 7, 12, 13, 14, 15},
                   low2 = {0, 1, 8, 9, 4, 5, 12, 13}, high2 = {2, 3, 10, 11, 6, 7, 14, 15},
                   low1 = {0, 8, 2, 10, 4, 12, 6, 14}, high1 = {1, 9, 3, 11, 5, 13, 7, 15};
#endif
  EMBER_TRANSPOSE_STAGE(4, low4, high4)
  EMBER_TRANSPOSE_STAGE(2, low2, high2)
  EMBER_TRANSPOSE_STAGE(1, low1, high1)
  for (int p = 0; p < EMBER_LANES; p++) *(ember_f32v_unaligned *)(out + p * ld) = r[p];
}
static inline void ember_transpose_16x16(const float *in, int64_t cs, float *out, int64_t ld) {
  for (int j = 0; j < 16; j += EMBER_LANES)
    for (int p = 0; p < 16; p += EMBER_LANES)
      ember_transpose_square(in + j * cs + p, cs, out + p * ld + j, ld);
}
#else
#define EMBER_TRANSPOSE_BLOCKS 0
static inline void ember_transpose_16x16(const float *in, int64_t cs, float *out, int64_t ld) {
  for (int j = 0; j < 16; j++)
    for (int p = 0; p < 16; p++) out[p * ld + j] = in[j * cs + p];
}
#endif

/* op(B)'s packing into TILE's micropanels of NR columns, from elements stored as S
 * (converted by LOAD): the function NAME##_pack_b. */
#define EMBER_DEFINE_PACK_B(TILE, NAME, S, T, LOAD)                                        \
  /* depth x cols of op(B) (element (p, j) at b[p * rs + j * cs]) as micropanels of NR     \
   * columns: panel-major, then p, then the NR columns; columns past the end are zeros. */ \
  static void NAME##_pack_b(const S *b, int64_t rs, int64_t cs, int64_t depth,             \
                            int64_t cols, T *restrict out) {                               \
    if (rs != 1 && cs == 1) {                                                              \
      /* Row-major: each row read along memory once for all whole panels (a panel at a     \
       * time read 64 bytes of every row, a row apart: 64 x 512 x 512 with B cold, split   \
       * by rows: 1004-1046 -> 858-879 us a call, Zen 1); the partial panel below. */      \
      const int64_t whole = cols / TILE##_nr * TILE##_nr;                                  \
      for (int64_t p = 0; p < depth; p++)                                                  \
        for (int64_t j0 = 0; j0 < whole; j0 += TILE##_nr)                                  \
          for (int j = 0; j < TILE##_nr; j++)                                              \
            out[j0 * depth + p * TILE##_nr + j] = LOAD(b[p * rs + j0 + j]);                \
      out += whole * depth;                                                                \
      b += whole;                                                                          \
      cols -= whole;                                                                       \
    }                                                                                      \
    for (int64_t j0 = 0; j0 < cols; j0 += TILE##_nr) {                                     \
      const int64_t nr = ember_min(TILE##_nr, cols - j0);                                  \
      const S *panel = b + j0 * cs;                                                        \
      if (rs == 1) {                                                                       \
        /* Stored transposed: the nr columns are rows of memory, read along them a few     \
         * elements at a time (reading across them, element by element, touched NR         \
         * pages per step: 7 ms of 29 in a 256 x 1024 x 1024 product; a panel at the edge  \
         * too: 16 x 27 x 4096 with B transposed). Its whole 16 x 16 blocks (rows pt,      \
         * columns jt) are transposed in registers. */                                     \
        int64_t pt = 0, jt = 0;                                                            \
        if (EMBER_TRANSPOSE_BLOCKS && sizeof(S) == 4 && sizeof(T) == 4 && TILE##_nr % 16 == 0) { \
          /* float32 (LOAD then applied in place: none, or a rounding to 16 bits) */        \
          pt = depth / 16 * 16;                                                            \
          jt = nr / 16 * 16;                                                               \
          for (int64_t p0 = 0; p0 < pt; p0 += 16)                                          \
            for (int j0 = 0; j0 < jt; j0 += 16) {                                          \
              T *to = out + p0 * TILE##_nr + j0;                                           \
              ember_transpose_16x16((const float *)(panel + j0 * cs + p0), cs, (float *)to, \
                                    TILE##_nr);                                            \
              for (int p = 0; p < 16; p++)                                                 \
                for (int j = 0; j < 16; j++)                                               \
                  to[p * TILE##_nr + j] = LOAD((S)to[p * TILE##_nr + j]);                  \
            }                                                                              \
        }                                                                                  \
        for (int64_t p0 = 0; p0 < depth; p0 += EMBER_PACK_RUN) {                           \
          const int64_t run = ember_min(EMBER_PACK_RUN, depth - p0);                       \
          for (int64_t j = p0 + run <= pt ? jt : 0; j < nr; j++)                           \
            for (int64_t p = p0; p < p0 + run; p++)                                        \
              out[p * TILE##_nr + j] = LOAD(panel[j * cs + p]);                            \
          for (int64_t p = p0; p < p0 + run; p++)                                          \
            for (int64_t j = nr; j < TILE##_nr; j++) out[p * TILE##_nr + j] = 0;           \
        }                                                                                  \
        out += depth * TILE##_nr;                                                          \
        continue;                                                                          \
      }                                                                                    \
      for (int64_t p = 0; p < depth; p++) {                                                \
        T *to = out + p * TILE##_nr;                                                       \
        const S *from = panel + p * rs;                                                    \
        for (int j = 0; j < TILE##_nr; j++) to[j] = j < nr ? LOAD(from[j * cs]) : 0;       \
      }                                                                                    \
      out += depth * TILE##_nr;                                                            \
    }                                                                                      \
  }

/* A tile of TYPE's elements, for operands stored as S (converted by LOAD as they are
 * packed): its sizes, the store of its sums and the packing of B. Either
 * EMBER_DEFINE_PACKED or EMBER_DEFINE_IN_PLACE completes it. */
#define EMBER_DEFINE_TILE(TYPE, TILE, S, T, LOAD, MR, NV)                                  \
  EMBER_DEFINE_TILE_SIZES(TYPE, TILE, MR, NV, 1, TYPE##_kc)                                \
  EMBER_DEFINE_TILE_STORE(TYPE, TILE, T, NV)                                               \
  EMBER_DEFINE_PACK_B(TILE, TILE, S, T, LOAD)

/* op(A)'s packing into TILE's micropanels of MR rows, from elements stored as S
 * (converted by LOAD): the function NAME##_pack_a. */
#define EMBER_DEFINE_PACK_A(TILE, NAME, S, T, LOAD) EMBER_DEFINE_PACK_A_IN(TILE, NAME, S, T, LOAD, 0)

/* The same, written IN_ORDER (where measured: Intel, float32 and float64 elements;
 * 16-bit ones as they were): the panels in the order they are written, a transposed A
 * EMBER_PACK_PANELS panels side by side (whole lines of memory read once, where a panel
 * at a time read each line again for the next panel: 2048 x 512 x 64 with A transposed
 * ran 1.2x faster), a row-major A its MR rows side by side (row by row, writing at a
 * stride of MR, took 1.2 ms of 14 in a 1024^3 product; this 0.8). */
#define EMBER_DEFINE_PACK_A_IN(TILE, NAME, S, T, LOAD, IN_ORDER)                           \
  /* rows x depth of op(A) (element (i, p) at a[i * rs + p * cs]) as micropanels of MR     \
   * rows: panel-major, then p, then the MR rows; rows past the end are zeros. */          \
  static void NAME##_pack_a(const S *a, int64_t rs, int64_t cs, int64_t rows,              \
                            int64_t depth, T *restrict out) {                              \
    enum { MR = TILE##_mr, PANELS = EMBER_PACK_PANELS };                                   \
    int64_t grouped = 0; /* (rows packed PANELS panels at a time) */                       \
    if (IN_ORDER && rs == 1) {                                                             \
      grouped = rows / (PANELS * MR) * (PANELS * MR);                                      \
      for (int64_t i0 = 0; i0 < grouped; i0 += PANELS * MR, out += PANELS * depth * MR)    \
        for (int64_t p = 0; p < depth; p++)                                                \
          for (int g = 0; g < PANELS; g++)                                                 \
            for (int i = 0; i < MR; i++)                                                   \
              out[(g * depth + p) * MR + i] = LOAD(a[i0 + g * MR + i + p * cs]);           \
    }                                                                                      \
    for (int64_t i0 = grouped; i0 < rows; i0 += MR) {                                      \
      const int64_t mr = ember_min(MR, rows - i0);                                         \
      const S *panel = a + i0 * rs;                                                        \
      if (rs == 1 && mr == MR) { /* stored transposed: rows are contiguous */              \
        for (int64_t p = 0; p < depth; p++)                                                \
          for (int i = 0; i < MR; i++) out[p * MR + i] = LOAD(panel[p * cs + i]);          \
      } else if (IN_ORDER && mr == MR) {                                                   \
        for (int64_t p = 0; p < depth; p++)                                                \
          for (int i = 0; i < MR; i++) out[p * MR + i] = LOAD(panel[i * rs + p * cs]);     \
      } else {                                                                             \
        for (int i = 0; i < MR; i++) {                                                     \
          if (i < mr)                                                                      \
            for (int64_t p = 0; p < depth; p++) out[p * MR + i] = LOAD(panel[i * rs + p * cs]); \
          else                                                                             \
            for (int64_t p = 0; p < depth; p++) out[p * MR + i] = 0;                       \
        }                                                                                  \
      }                                                                                    \
      out += depth * MR;                                                                   \
    }                                                                                      \
  }

/* The packed tile: A packed too, its microkernel, and the blocked product on one thread. */
#define EMBER_DEFINE_PACKED(TYPE, TILE, S, T, LOAD)                                         \
  EMBER_DEFINE_PACK_A_IN(TILE, TILE, S, T, LOAD, EMBER_GEMM_INTEL && sizeof(S) == sizeof(T)) \
                                                                                           \
/* The MR x NR tile of C at c (mr x nr of it inside C) from packed micropanels a         \
   * (depth x MR) and b (depth x NR). */                                                   \
  static void TILE##_microkernel(int64_t depth, const T *restrict a, const T *restrict b,  \
                                 T *restrict c, int64_t ldc, int64_t mr, int64_t nr,       \
                                 const TYPE##_epilogue *e) {                               \
    enum { NV = TILE##_nr / TYPE##_lanes };                                                \
    TYPE##_vector acc[TILE##_mr][NV];                                                      \
    for (int i = 0; i < TILE##_mr; i++)                                                    \
      for (int v = 0; v < NV; v++) acc[i][v] = (TYPE##_vector){0};                         \
    for (int i = 0; i < TILE##_mr; i++) /* (C's tile, read or written at the end) */      \
      for (int v = 0; v < NV; v++) __builtin_prefetch(c + i * ldc + v * TYPE##_lanes, 1, 3); \
    for (int64_t p = 0; p < depth; p++) {                                                  \
      TYPE##_vector row[NV];                                                               \
      for (int v = 0; v < NV; v++)                                                         \
        __builtin_prefetch(b + (p + EMBER_PREFETCH_STEPS) * TILE##_nr + v * TYPE##_lanes, 0, 3); \
      for (int v = 0; v < NV; v++)                                                         \
        row[v] = *(const TYPE##_vector *)(b + p * TILE##_nr + v * TYPE##_lanes);           \
      for (int i = 0; i < TILE##_mr; i++) {                                                \
        const T scalar = a[p * TILE##_mr + i];                                             \
        for (int v = 0; v < NV; v++) acc[i][v] += row[v] * scalar;                         \
      }                                                                                    \
    }                                                                                      \
    TILE##_store(acc, c, ldc, mr, nr, e);                                                  \
  }                                                                                        \
                                                                                           \
  EMBER_DEFINE_TILE_LOOPS(TYPE, TILE, S, T, T)

/* The loops of a tile around its packing and microkernel (TILE##_pack_a, _pack_b and
 * _microkernel, packed into elements of P, depth rounded up to TILE##_kstep). */
#define EMBER_DEFINE_TILE_LOOPS(TYPE, TILE, S, P, T)                                       \
  EMBER_DEFINE_TILES(TYPE, TILE, P, T)                                                     \
  EMBER_DEFINE_BLOCKED(TYPE, TILE, TILE, S, S, TILE##_pack_a, TILE##_pack_b, P, T)

/* The tiles of C from packed panels of P (TILE##_microkernel's), for every blocked
 * product of TILE (EMBER_DEFINE_BLOCKED). */
#define EMBER_DEFINE_TILES(TYPE, TILE, P, T)                                               \
  /* The tiles of C (mc x nc at c) from packed A (mc x kc) and packed B (kc x nc): the     \
   * first block of the sum writes the addends (d laid out as C, row one per column). */   \
  static void TILE##_tiles(int64_t mc, int64_t nc, int64_t kc, const P *packed_a,          \
                           const P *packed_b, T *c, int64_t ldc, T alpha, const T *d,      \
                           T d_scale, const T *row, T row_scale, int first, int last,      \
                           int activation) {                                               \
    const int64_t depth = ember_round_up(kc, TILE##_kstep);                                \
    for (int64_t i = 0; i < mc; i += TILE##_mr) {                                          \
      for (int64_t j = 0; j < nc; j += TILE##_nr) {                                        \
        const int64_t at = i * ldc + j;                                                    \
        const TYPE##_epilogue e = {alpha, d_scale, row_scale, d ? d + at : NULL,           \
                                   row ? row + j : NULL, first, last, activation};         \
        TILE##_microkernel(depth, packed_a + i * depth, packed_b + j * depth, c + at, ldc, \
                           ember_min(TILE##_mr, mc - i), ember_min(TILE##_nr, nc - j), &e); \
      }                                                                                    \
    }                                                                                      \
  }

/* NAME##_blocked: TILE's product with op(A) stored as SA and packed by PACK_A, op(B)
 * stored as SB and packed by PACK_B (a float32 operand rounded to 16 bits as it is
 * packed: a cast fused into the product, no 16-bit copy written first). */
#define EMBER_DEFINE_BLOCKED(TYPE, TILE, NAME, SA, SB, PACK_A, PACK_B, P, T)               \
  /* C (rows x cols, leading dimension ldc) = activation(alpha op(A) op(B) + the        \
   * addends), on one thread: op(A)(i, p) at a[i * a_rs + p * a_cs], op(B)(p, j) at       \
   * b[p * b_rs + j * b_cs]; d laid out as C (may be C), row one value per column. */      \
  static void NAME##_blocked(int64_t rows, int64_t cols, int64_t k, const SA *a,           \
                             int64_t a_rs, int64_t a_cs, const SB *b, int64_t b_rs,        \
                             int64_t b_cs, T *c, int64_t ldc, T alpha, const T *d,         \
                             T d_scale, const T *row, T row_scale, int activation) {       \
    /* Blocks of equal size (a sum of 784 in blocks of 262, not 384 + 384 + 16: a thin     \
     * last block would spend more on storing C than on its products). */                  \
    const int64_t mc_step = ember_block(rows, TILE##_mc, TILE##_mr);                       \
    const int64_t kc_step = ember_block(k, TILE##_kc, TILE##_kstep);                       \
    const int64_t nc_step = ember_block(cols, TILE##_nc, TILE##_nr);                       \
    /* (B's panels start aligned, as the microkernel's loads need) */                      \
    const size_t a_size = (size_t)ember_round_up(mc_step * kc_step, EMBER_ALIGN / sizeof(P)); \
    P *packed_a = ember_pack_space(sizeof(P) * (a_size + (size_t)(kc_step * nc_step)));    \
    if (packed_a == NULL) abort(); /* out of memory: as a failed BLAS allocation does */   \
    P *packed_b = packed_a + a_size;                                                       \
    for (int64_t i0 = 0; i0 < rows; i0 += mc_step) {                                       \
      const int64_t mc = ember_min(mc_step, rows - i0);                                    \
      int64_t p0 = 0;                                                                      \
      do { /* (once when k == 0: the addends alone) */                                     \
        const int64_t kc = ember_min(kc_step, k - p0);                                     \
        PACK_A(a + i0 * a_rs + p0 * a_cs, a_rs, a_cs, mc, kc, packed_a);                   \
        for (int64_t j0 = 0; j0 < cols; j0 += nc_step) {                                   \
          const int64_t nc = ember_min(nc_step, cols - j0);                                \
          PACK_B(b + p0 * b_rs + j0 * b_cs, b_rs, b_cs, kc, nc, packed_b);                 \
          const int64_t at = i0 * ldc + j0;                                                \
          TILE##_tiles(mc, nc, kc, packed_a, packed_b, c + at, ldc, alpha,                 \
                       d ? d + at : NULL, d_scale, row ? row + j0 : NULL, row_scale, p0 == 0, \
                       p0 + kc >= k, activation);                                          \
        }                                                                                  \
        p0 += kc;                                                                          \
      } while (p0 < k);                                                                    \
    }                                                                                      \
  }

/* A tile that reads op(A) in place, unpacked: the narrow one, whose few columns leave
 * packing A (a strided copy of every element, element by element) as costly as the
 * product itself. Each row of the tile broadcasts its own row of A from memory; B is
 * packed as for the packed tile (TILE##_pack_b), and the sums stored as it stores them. */
#define EMBER_DEFINE_IN_PLACE(TYPE, TILE, S, T, LOAD)                                      \
  EMBER_DEFINE_IN_PLACE_KERNEL(TYPE, TILE, TILE, S, T, LOAD)                               \
  EMBER_DEFINE_IN_PLACE_LOOPS(TYPE, TILE, TILE, S, S, TILE##_in_place_kernel, TILE##_pack_b, T)

/* NAME##_in_place_kernel: TILE's kernel on op(A) stored as S, converted by LOAD. */
#define EMBER_DEFINE_IN_PLACE_KERNEL(TYPE, TILE, NAME, S, T, LOAD)                         \
  /* The MR x NR tile of C at c (mr x nr of it inside C) from op(A)'s mr rows at a         \
   * (element (i, p) at a[i * rs + p * cs]) and a packed micropanel b (depth x NR). */     \
  static void NAME##_in_place_kernel(int64_t depth, const S *a, int64_t rs, int64_t cs,    \
                                     const T *restrict b, T *restrict c, int64_t ldc,      \
                                     int64_t mr, int64_t nr, const TYPE##_epilogue *e) {   \
    enum { NV = TILE##_nr / TYPE##_lanes };                                                \
    const S *rows[TILE##_mr]; /* (rows past mr repeat the last: computed, not stored) */   \
    for (int i = 0; i < TILE##_mr; i++) rows[i] = a + ember_min(i, mr - 1) * rs;           \
    TYPE##_vector acc[TILE##_mr][NV];                                                      \
    for (int i = 0; i < TILE##_mr; i++)                                                    \
      for (int v = 0; v < NV; v++) acc[i][v] = (TYPE##_vector){0};                         \
    if (cs == 1) { /* (A row-major: each row read along memory) */                         \
      for (int64_t p = 0; p < depth; p++) {                                                \
        TYPE##_vector row[NV];                                                             \
        for (int v = 0; v < NV; v++)                                                       \
          row[v] = *(const TYPE##_vector *)(b + p * TILE##_nr + v * TYPE##_lanes);         \
        for (int i = 0; i < TILE##_mr; i++) {                                              \
          const T scalar = LOAD(rows[i][p]);                                               \
          for (int v = 0; v < NV; v++) acc[i][v] += row[v] * scalar;                       \
        }                                                                                  \
      }                                                                                    \
    } else {                                                                               \
      for (int64_t p = 0; p < depth; p++) {                                                \
        TYPE##_vector row[NV];                                                             \
        for (int v = 0; v < NV; v++)                                                       \
          row[v] = *(const TYPE##_vector *)(b + p * TILE##_nr + v * TYPE##_lanes);         \
        for (int i = 0; i < TILE##_mr; i++) {                                              \
          const T scalar = LOAD(rows[i][p * cs]);                                          \
          for (int v = 0; v < NV; v++) acc[i][v] += row[v] * scalar;                       \
        }                                                                                  \
      }                                                                                    \
    }                                                                                      \
    TILE##_store(acc, c, ldc, mr, nr, e);                                                  \
  }

/* NAME##_in_place: TILE's product with op(A) (stored as SA) read in place by KERNEL and
 * op(B) (stored as SB) packed by PACK_B. */
#define EMBER_DEFINE_IN_PLACE_LOOPS(TYPE, TILE, NAME, SA, SB, KERNEL, PACK_B, T)           \
  /* TILE##_blocked's product with op(A) read in place: blocks of the sum only. */         \
  static void NAME##_in_place(int64_t rows, int64_t cols, int64_t k, const SA *a,          \
                              int64_t a_rs, int64_t a_cs, const SB *b, int64_t b_rs,       \
                              int64_t b_cs, T *c, int64_t ldc, T alpha, const T *d,        \
                              T d_scale, const T *row, T row_scale, int activation) {      \
    const int64_t kc_step = ember_block(k, TYPE##_kc, 1);                                  \
    const int64_t panels = (cols + TILE##_nr - 1) / TILE##_nr;                             \
    T *packed_b = ember_pack_space(sizeof(T) * (size_t)(kc_step * panels * TILE##_nr));    \
    if (packed_b == NULL) abort(); /* out of memory: as a failed BLAS allocation does */   \
    int64_t p0 = 0;                                                                        \
    do { /* (once when k == 0: the addends alone) */                                       \
      const int64_t kc = ember_min(kc_step, k - p0);                                       \
      PACK_B(b + p0 * b_rs, b_rs, b_cs, kc, cols, packed_b);                               \
      for (int64_t i = 0; i < rows; i += TILE##_mr) {                                      \
        for (int64_t j = 0; j < cols; j += TILE##_nr) {                                    \
          const int64_t at = i * ldc + j;                                                  \
          const TYPE##_epilogue e = {alpha, d_scale, row_scale, d ? d + at : NULL,         \
                                     row ? row + j : NULL, p0 == 0, p0 + kc >= k,          \
                                     activation};                                          \
          KERNEL(kc, a + i * a_rs + p0 * a_cs, a_rs, a_cs, packed_b + j * kc, c + at, ldc, \
                 ember_min(TILE##_mr, rows - i), ember_min(TILE##_nr, cols - j), &e);      \
        }                                                                                  \
      }                                                                                    \
      p0 += kc;                                                                            \
    } while (p0 < k);                                                                      \
  }

/* TILE's product (TILE##_choice_blocked, as TILE##_blocked) with op(A) read in place
 * (TILE##_in_place) where packing it would not pay: op(B) at most EMBER_IN_PLACE_COLUMNS
 * wide, so that each packed micropanel of A would serve few tiles, and
 * op(A) row-major, so that its MR rows are read along memory (a transposed A read in
 * place, a row of memory per step, ran 1.3-2x slower at 1024 x 1024 x 128 and
 * 2048 x 2048 x 256). On Emerald Rapids, 1 thread: 1024 x 1024 x 64 ran 1.5x faster,
 * 256 x 256 x 64 (attention's scores @ V) 1.3x, 1024 x 1024 x 256 1.13x; on Zen 4,
 * 1 thread: 1024 x 48 x 64 1.18x, 256 x 192 x 64 1.08x; up to 256 columns, not NC's
 * 128, attention's 256 x 64 x 256 and 256 x 256 x 64 1.03x, larger products 1.02x. Up to
 * 512 on Zen 4 (2 threads, the libraries alternated, 25 rounds): the MLP's 256-row
 * products (256 x 1024 x 1024 and x 784, 512 columns a thread) 1.03-1.07x, the
 * transformer's 2048 x 512 x 512 1.01-1.04x and 2048 x 512 x 2048 1.08x, float64
 * 1.04-1.13x; 1024 x 1024 x 1024, which it leaves packed, 1.01x. And up to 1024 for
 * at least 512 rows a thread: 2048 x 1024 x 1024 1.06x, 1024 x 1024 x 1024 1.03x; not
 * fewer (128 x 1024 x 2048, 64 rows a thread, 0.93x), nor wider (512 x 4096 x 1024 at
 * 2048 columns 0.98x, 4096 0.63x: the packed block of B, k x columns, outgrows L2 then
 * L3). Intel's stays at 256 (not measured beyond). The tall rule is the AVX-512 builds'
 * (Zen 4 and 5); the others stop at 512 columns, as measured on Zen 1 (AVX2, 2 threads,
 * its packed B of 1024 x 1024 streamed from L3): 1024 x 1024 x 1024 ran at 55-58
 * GFLOP/s in place against 69-70 packed, while 512 columns still gained in place
 * (2048 x 512 x 512 1.01-1.03x, 2048 x 2048 x 512 1.02-1.05x, 2048 x 512 x 256
 * 1.02-1.05x). */
#define EMBER_IN_PLACE_COLUMNS (EMBER_GEMM_INTEL ? 256 : 512)
#define EMBER_IN_PLACE_TALL_COLUMNS                                                         \
  (EMBER_GEMM_INTEL || EMBER_VECTOR_BYTES < 64 ? EMBER_IN_PLACE_COLUMNS : 1024)
#define EMBER_IN_PLACE_TALL_ROWS 512
#define EMBER_DEFINE_CHOICE(TYPE, TILE, T)                                                 \
  static void TILE##_choice_blocked(int64_t rows, int64_t cols, int64_t k, const T *a,     \
                                    int64_t a_rs, int64_t a_cs, const T *b, int64_t b_rs,  \
                                    int64_t b_cs, T *c, int64_t ldc, T alpha, const T *d,  \
                                    T d_scale, const T *row, T row_scale, int activation) { \
    const int in_place = a_cs == 1 && (cols <= EMBER_IN_PLACE_COLUMNS ||                  \
                                       (cols <= EMBER_IN_PLACE_TALL_COLUMNS &&             \
                                        rows >= EMBER_IN_PLACE_TALL_ROWS));                \
    (in_place ? TILE##_in_place : TILE##_blocked)(rows, cols, k, a, a_rs, a_cs, b, b_rs,   \
                                                  b_cs, c, ldc, alpha, d, d_scale, row,    \
                                                  row_scale, activation);                  \
  }

/* One element type's parallel entry point of ember_gemm.h (A stored as SA, B as SB,
 * results as T), with its tiles' products WIDE##CAST##_blocked, MID##CAST##_blocked
 * (for at most MID_NR columns: 0 where a type has no middle tile) and
 * NARROW##CAST##_in_place (CAST: empty, or the operands cast as packed: _cast_a, ...). */
#define EMBER_DEFINE_OWN_GEMM(NAME, SA, SB, T, WIDE, MID, MID_NR, NARROW, CAST)            \
  EMBER_GEMM_MIXED_SIGNATURE(NAME, SA, SB, T, T) {                                         \
    if (split == 3 && parts > 1) {                                                         \
      EMBER_GEMM_SUM_OF_PARTS(NAME, T)                                                     \
      return;                                                                              \
    }                                                                                      \
    const int64_t a_col_step = ta == EMBER_TRANS ? lda : 1;                                \
    const int64_t b_row_step = tb == EMBER_TRANS ? 1 : ldb;                                \
    /* (a product as thin as one narrow tile: the wide one would compute 64 columns) */    \
    const int narrow = n <= NARROW##_nr;                                                   \
    const int mid = n <= MID_NR;                                                           \
    EMBER_GEMM_PARTS(SA, SB, T, {                                                          \
      const T *d = D ? D + (c - C) : NULL; /* (no commas: a macro argument) */           \
      const T *r = row ? row + (split == 2 ? lo : 0) : NULL;                               \
      /* (with E: C the plain product, then E from each thread's block of it) */           \
      (narrow ? NARROW##CAST##_in_place : mid ? MID##CAST##_blocked : WIDE##CAST##_blocked)( \
          rows, cols, k, a, a_row_step, a_col_step, b, b_row_step, b_col_step, c, ldc,     \
          E ? 1 : alpha, E ? NULL : d, d_scale, E ? NULL : r, row_scale,                   \
          E ? EMBER_ACTIVATION_NONE : activation);                                         \
      if (E != NULL)                                                                       \
        ember_gemm_finish_##T(E + (c - C), c, ldc, rows, cols, alpha, d, d_scale, r,       \
                              row_scale, activation);                                      \
    })                                                                                     \
  }

/* 16-bit operands with results of their own type (bfloat16 x bfloat16 -> bfloat16):
 * each thread's block of C is summed in float32 by the tiles of the float32 results
 * into a buffer of its own (ember_sums), then finished as it is written: the addends
 * (16-bit, converted by LOAD), the activation, and one rounding (STORE: to nearest,
 * ties to even), so that C holds the float32 result rounded once. */
#define EMBER_DEFINE_OWN_GEMM_16_BIT_RESULTS(NAME, SA, SB, WIDE, NARROW, CAST, LOAD, STORE) \
  EMBER_GEMM_MIXED_SIGNATURE(NAME, SA, SB, uint16_t, float) {                              \
    const int64_t a_col_step = ta == EMBER_TRANS ? lda : 1;                                \
    const int64_t b_row_step = tb == EMBER_TRANS ? 1 : ldb;                                \
    const int narrow = n <= NARROW##_nr;                                                   \
    EMBER_GEMM_PARTS(SA, SB, uint16_t, {                                                   \
      const size_t sum_bytes = sizeof(float) * (size_t)(rows * cols);                      \
      float *sums = sum_bytes ? ember_space_of(&ember_sums, sum_bytes) : NULL;             \
      if (sum_bytes && sums == NULL) abort(); /* out of memory */                          \
      if (sums != NULL) {                                                                  \
        (narrow ? NARROW##CAST##_in_place : WIDE##CAST##_blocked)(                       \
            rows, cols, k, a, a_row_step, a_col_step, b, b_row_step, b_col_step, sums,     \
            cols, E ? 1 : alpha, NULL, 0, NULL, 0, EMBER_ACTIVATION_NONE);                 \
        const uint16_t *d = D ? D + (c - C) : NULL;                                        \
        const uint16_t *r = row ? row + (split == 2 ? lo : 0) : NULL;                      \
        uint16_t *out = E ? E + (c - C) : c;                                               \
        for (int64_t i = 0; i < rows; i++) {                                               \
          float *sum = sums + i * cols;                                                    \
          if (E != NULL) /* C: the plain product, rounded; E from it, as a graph would */  \
            for (int64_t j = 0; j < cols; j++) {                                           \
              c[i * ldc + j] = STORE(sum[j]);                                              \
              sum[j] = alpha * LOAD(c[i * ldc + j]);                                       \
            }                                                                              \
          for (int64_t j = 0; j < cols; j++) {                                             \
            if (d) sum[j] += d_scale * LOAD(d[i * ldc + j]);                               \
            if (r) sum[j] += row_scale * LOAD(r[j]);                                       \
          }                                                                                \
          ember_activate_float(sum, cols, activation);                                     \
          for (int64_t j = 0; j < cols; j++) out[i * ldc + j] = STORE(sum[j]);             \
        }                                                                                  \
      }                                                                                    \
    })                                                                                     \
  }

/* A 16-bit FORMAT's products with float32 operands cast to it as they are packed
 * (`x.astype(bfloat16) @ w`, as mixed-precision code writes it: no 16-bit copy of x is
 * written first): ember_own_gemm_FORMAT_cast_a (A stored as float32), _cast_b, _cast_ab,
 * each also with FORMAT results (_FORMAT_FORMAT_cast_a, ...). Rounded to nearest, ties
 * to even, as the cast would store it (the narrow tile's NARROW_CAST: rounded and back
 * to float32); the wide tile's products WIDE##_cast_a_blocked, ... are defined before
 * (EMBER_DEFINE_CAST_TILES). */
#define EMBER_DEFINE_CASTS(FORMAT, WIDE, NARROW, NARROW_CAST, LOAD, STORE)                 \
  EMBER_DEFINE_PACK_B(NARROW, NARROW##_cast, float, float, NARROW_CAST)                    \
  EMBER_DEFINE_IN_PLACE_KERNEL(ember_f32, NARROW, NARROW##_cast, float, float, NARROW_CAST) \
  EMBER_DEFINE_IN_PLACE_LOOPS(ember_f32, NARROW, NARROW##_cast_a, float, uint16_t,         \
                              NARROW##_cast_in_place_kernel, NARROW##_pack_b, float)       \
  EMBER_DEFINE_IN_PLACE_LOOPS(ember_f32, NARROW, NARROW##_cast_b, uint16_t, float,         \
                              NARROW##_in_place_kernel, NARROW##_cast_pack_b, float)       \
  EMBER_DEFINE_IN_PLACE_LOOPS(ember_f32, NARROW, NARROW##_cast_ab, float, float,           \
                              NARROW##_cast_in_place_kernel, NARROW##_cast_pack_b, float)  \
  EMBER_DEFINE_OWN_GEMM(ember_own_gemm_##FORMAT##_cast_a, float, uint16_t, float, WIDE,     \
                        WIDE, 0, NARROW, _cast_a)                                          \
  EMBER_DEFINE_OWN_GEMM(ember_own_gemm_##FORMAT##_cast_b, uint16_t, float, float, WIDE,     \
                        WIDE, 0, NARROW, _cast_b)                                          \
  EMBER_DEFINE_OWN_GEMM(ember_own_gemm_##FORMAT##_cast_ab, float, float, float, WIDE,       \
                        WIDE, 0, NARROW, _cast_ab)                                         \
  EMBER_DEFINE_OWN_GEMM_16_BIT_RESULTS(ember_own_gemm_##FORMAT##_##FORMAT##_cast_a, float, \
                                       uint16_t, WIDE, NARROW, _cast_a, LOAD, STORE)       \
  EMBER_DEFINE_OWN_GEMM_16_BIT_RESULTS(ember_own_gemm_##FORMAT##_##FORMAT##_cast_b,        \
                                       uint16_t, float, WIDE, NARROW, _cast_b, LOAD, STORE) \
  EMBER_DEFINE_OWN_GEMM_16_BIT_RESULTS(ember_own_gemm_##FORMAT##_##FORMAT##_cast_ab, float, \
                                       float, WIDE, NARROW, _cast_ab, LOAD, STORE)

/* A wide TILE's products with float32 operands cast as packed (TILE##_cast_a_blocked,
 * _cast_b, _cast_ab), from its packers from float32 (TILE##_cast_pack_a, _b), packed
 * into elements of P. */
#define EMBER_DEFINE_CAST_TILES(TILE, P)                                                   \
  EMBER_DEFINE_BLOCKED(ember_f32, TILE, TILE##_cast_a, float, uint16_t, TILE##_cast_pack_a, \
                       TILE##_pack_b, P, float)                                            \
  EMBER_DEFINE_BLOCKED(ember_f32, TILE, TILE##_cast_b, uint16_t, float, TILE##_pack_a,      \
                       TILE##_cast_pack_b, P, float)                                       \
  EMBER_DEFINE_BLOCKED(ember_f32, TILE, TILE##_cast_ab, float, float, TILE##_cast_pack_a,   \
                       TILE##_cast_pack_b, P, float)

#define EMBER_TRANS 112 /* CblasTrans */
#define EMBER_LOAD_AS_IS(x) (x)
/* A float32 rounded to a 16-bit format and back (a cast's value, for float32 tiles) */
#define EMBER_BF16_ROUNDED(x) ember_bf16_to_f32(ember_f32_to_bf16(x))
#define EMBER_F16_ROUNDED(x) ember_f16_to_f32(ember_f32_to_f16_bits(x)) /* (ember_kernels.h) */

/* One type per unit, EMBER_GEMM_TYPE: 32, 64, 16 for both 16-bit formats, or 17 for
 * their products with float32 operands cast as packed (ember_gemm.py compiles the units
 * in parallel: the casts' 12 entry points took 3 times the 16-bit unit's time); all of
 * them without it. */
#if !defined(EMBER_GEMM_TYPE) || EMBER_GEMM_TYPE != 64
EMBER_DEFINE_TYPE(ember_f32, float)
#endif
#if !defined(EMBER_GEMM_TYPE) || EMBER_GEMM_TYPE == 32
EMBER_DEFINE_TILE(ember_f32, ember_f32_narrow, float, float, EMBER_LOAD_AS_IS, EMBER_NARROW_MR, 1)
EMBER_DEFINE_IN_PLACE(ember_f32, ember_f32_narrow, float, float, EMBER_LOAD_AS_IS)
EMBER_DEFINE_TILE(ember_f32, ember_f32_wide, float, float, EMBER_LOAD_AS_IS, EMBER_MR, EMBER_NV)
EMBER_DEFINE_PACKED(ember_f32, ember_f32_wide, float, float, EMBER_LOAD_AS_IS)
EMBER_DEFINE_IN_PLACE(ember_f32, ember_f32_wide, float, float, EMBER_LOAD_AS_IS)
EMBER_DEFINE_CHOICE(ember_f32, ember_f32_wide, float)
#if EMBER_HAS_MID_TILE
EMBER_DEFINE_TILE(ember_f32, ember_f32_mid, float, float, EMBER_LOAD_AS_IS, EMBER_MID_MR,
                  EMBER_MID_NV)
EMBER_DEFINE_PACKED(ember_f32, ember_f32_mid, float, float, EMBER_LOAD_AS_IS)
EMBER_DEFINE_IN_PLACE(ember_f32, ember_f32_mid, float, float, EMBER_LOAD_AS_IS)
EMBER_DEFINE_CHOICE(ember_f32, ember_f32_mid, float)
EMBER_DEFINE_OWN_GEMM(ember_own_gemm_f32, float, float, float, ember_f32_wide_choice,
                      ember_f32_mid_choice, ember_f32_mid_nr, ember_f32_narrow, )
#else
EMBER_DEFINE_OWN_GEMM(ember_own_gemm_f32, float, float, float, ember_f32_wide_choice,
                      ember_f32_wide_choice, 0, ember_f32_narrow, )
#endif
#endif
#if !defined(EMBER_GEMM_TYPE) || EMBER_GEMM_TYPE == 64
EMBER_DEFINE_TYPE(ember_f64, double)
EMBER_DEFINE_TILE(ember_f64, ember_f64_wide, double, double, EMBER_LOAD_AS_IS, EMBER_MR, EMBER_NV)
EMBER_DEFINE_PACKED(ember_f64, ember_f64_wide, double, double, EMBER_LOAD_AS_IS)
EMBER_DEFINE_IN_PLACE(ember_f64, ember_f64_wide, double, double, EMBER_LOAD_AS_IS)
EMBER_DEFINE_CHOICE(ember_f64, ember_f64_wide, double)
EMBER_DEFINE_TILE(ember_f64, ember_f64_narrow, double, double, EMBER_LOAD_AS_IS,
                  EMBER_NARROW_MR, 1)
EMBER_DEFINE_IN_PLACE(ember_f64, ember_f64_narrow, double, double, EMBER_LOAD_AS_IS)
#if EMBER_HAS_MID_TILE
EMBER_DEFINE_TILE(ember_f64, ember_f64_mid, double, double, EMBER_LOAD_AS_IS, EMBER_MID_MR,
                  EMBER_MID_NV)
EMBER_DEFINE_PACKED(ember_f64, ember_f64_mid, double, double, EMBER_LOAD_AS_IS)
EMBER_DEFINE_IN_PLACE(ember_f64, ember_f64_mid, double, double, EMBER_LOAD_AS_IS)
EMBER_DEFINE_CHOICE(ember_f64, ember_f64_mid, double)
EMBER_DEFINE_OWN_GEMM(ember_own_gemm_f64, double, double, double, ember_f64_wide_choice,
                      ember_f64_mid_choice, ember_f64_mid_nr, ember_f64_narrow, )
#else
EMBER_DEFINE_OWN_GEMM(ember_own_gemm_f64, double, double, double, ember_f64_wide_choice,
                      ember_f64_wide_choice, 0, ember_f64_narrow, )
#endif
#endif
#if !defined(EMBER_GEMM_TYPE) || EMBER_GEMM_TYPE == 16 || EMBER_GEMM_TYPE == 17
EMBER_DEFINE_TILE(ember_f32, ember_f16_narrow, uint16_t, float, ember_f16_to_f32,
                  EMBER_NARROW_MR, 1)
EMBER_DEFINE_IN_PLACE(ember_f32, ember_f16_narrow, uint16_t, float, ember_f16_to_f32)
EMBER_DEFINE_TILE(ember_f32, ember_f16_wide, uint16_t, float, ember_f16_to_f32, EMBER_MR,
                  EMBER_NV)
EMBER_DEFINE_PACKED(ember_f32, ember_f16_wide, uint16_t, float, ember_f16_to_f32)
EMBER_DEFINE_PACK_A(ember_f16_wide, ember_f16_wide_cast, float, float, EMBER_F16_ROUNDED)
EMBER_DEFINE_PACK_B(ember_f16_wide, ember_f16_wide_cast, float, float, EMBER_F16_ROUNDED)
EMBER_DEFINE_TILE(ember_f32, ember_bf16_narrow, uint16_t, float, ember_bf16_to_f32,
                  EMBER_NARROW_MR, 1)
EMBER_DEFINE_IN_PLACE(ember_f32, ember_bf16_narrow, uint16_t, float, ember_bf16_to_f32)
#if defined(__AVX512BF16__)
#define EMBER_BF16_PAIRS 1
#define EMBER_BF16_PACKED uint16_t /* (the wide tile's packed elements) */
#include "ember_gemm_bf16.h"
#else
#define EMBER_BF16_PAIRS 0
#define EMBER_BF16_PACKED float
EMBER_DEFINE_TILE(ember_f32, ember_bf16_wide, uint16_t, float, ember_bf16_to_f32, EMBER_MR,
                  EMBER_NV)
EMBER_DEFINE_PACKED(ember_f32, ember_bf16_wide, uint16_t, float, ember_bf16_to_f32)
EMBER_DEFINE_PACK_A(ember_bf16_wide, ember_bf16_wide_cast, float, float, EMBER_BF16_ROUNDED)
EMBER_DEFINE_PACK_B(ember_bf16_wide, ember_bf16_wide_cast, float, float, EMBER_BF16_ROUNDED)
#endif
/* bfloat16's wide products (ember_bf16_choice##CAST##_blocked): on AMX's tiles where the
 * target has them (and the OS grants them at run time), else on the tile above. */
#if defined(__AVX512BF16__) && defined(__AMX_TILE__) && defined(__AMX_BF16__)
#define EMBER_BF16_AMX 1
#include "ember_gemm_amx.h"
#else
#define EMBER_BF16_AMX 0
#define ember_bf16_choice_blocked ember_bf16_wide_blocked
#define ember_bf16_choice_cast_a_blocked ember_bf16_wide_cast_a_blocked
#define ember_bf16_choice_cast_b_blocked ember_bf16_wide_cast_b_blocked
#define ember_bf16_choice_cast_ab_blocked ember_bf16_wide_cast_ab_blocked
#endif
#endif
#if !defined(EMBER_GEMM_TYPE) || EMBER_GEMM_TYPE == 16
/* Whether bfloat16's wide tile multiplies pairs with vdpbf16ps (for the tests). */
const int ember_own_gemm_bf16_pairs = EMBER_BF16_PAIRS;
/* Whether it runs on AMX's tiles where the OS grants them (for the tests), and whether
 * it does in this process (asking the OS, if not asked yet). */
const int ember_own_gemm_bf16_amx = EMBER_BF16_AMX;
int ember_own_gemm_bf16_amx_granted(void) {
#if EMBER_BF16_AMX
  return ember_amx_granted();
#else
  return 0;
#endif
}
#if EMBER_BF16_AMX
EMBER_DEFINE_AMX_CHOICE(, uint16_t, uint16_t)
#endif
EMBER_DEFINE_OWN_GEMM(ember_own_gemm_f16, uint16_t, uint16_t, float, ember_f16_wide,
                      ember_f16_wide, 0, ember_f16_narrow, )
EMBER_DEFINE_OWN_GEMM(ember_own_gemm_bf16, uint16_t, uint16_t, float, ember_bf16_choice,
                      ember_bf16_choice, 0, ember_bf16_narrow, )
EMBER_DEFINE_OWN_GEMM_16_BIT_RESULTS(ember_own_gemm_bf16_bf16, uint16_t, uint16_t,
                                     ember_bf16_choice, ember_bf16_narrow, , ember_bf16_to_f32,
                                     ember_f32_to_bf16)
EMBER_DEFINE_OWN_GEMM_16_BIT_RESULTS(ember_own_gemm_f16_f16, uint16_t, uint16_t, ember_f16_wide,
                                     ember_f16_narrow, , ember_f16_to_f32, ember_f32_to_f16)
#endif
#if !defined(EMBER_GEMM_TYPE) || EMBER_GEMM_TYPE == 17
EMBER_DEFINE_CAST_TILES(ember_bf16_wide, EMBER_BF16_PACKED)
#if EMBER_BF16_AMX
EMBER_DEFINE_CAST_TILES(ember_bf16_amx, uint16_t)
EMBER_DEFINE_AMX_CHOICE(_cast_a, float, uint16_t)
EMBER_DEFINE_AMX_CHOICE(_cast_b, uint16_t, float)
EMBER_DEFINE_AMX_CHOICE(_cast_ab, float, float)
#endif
EMBER_DEFINE_CASTS(bf16, ember_bf16_choice, ember_bf16_narrow, EMBER_BF16_ROUNDED,
                   ember_bf16_to_f32, ember_f32_to_bf16)
EMBER_DEFINE_CAST_TILES(ember_f16_wide, float)
EMBER_DEFINE_CASTS(f16, ember_f16_wide, ember_f16_narrow, EMBER_F16_ROUNDED,
                   ember_f16_to_f32, ember_f32_to_f16)
#endif
