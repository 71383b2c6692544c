/* Batched, strided GEMMs for Ember's generated CPU code: C[item] = alpha A[item] @ B[item]
 * + beta C[item], row-major, through single-threaded BLAS calls split across OpenMP
 * threads. beta = 0 but for an epilogue folded into the call (program.AffineEpilogue):
 * then C starts as d_scale * D + row_scale * row (D laid out as C, possibly C itself;
 * row a vector of n values broadcast down the rows; either may be null), each thread
 * writing its own block just before its call reads it, and beta = 1. An activation
 * (EMBER_ACTIVATION_*, 0 for none) is then applied to each thread's block as it is
 * written. With E (laid out as C; null for none), C keeps the plain product A @ B and
 * E takes the epilogue's result instead: activation(alpha C + d_scale D + row_scale
 * row), computed from each thread's block of C right after it is written (a training
 * step needs both the product and the activation; D is then never C).
 *
 * Generated code calls these instead of spelling out a parallel loop per GEMM: every
 * OpenMP region costs the C compiler about 30M instructions (it is outlined into a
 * function of its own), a call costs next to nothing, and the split is the same code
 * for every GEMM. How to split is decided when the code is generated (codegen/c_gemm.py):
 *
 *   split 0: threads take whole batch items; 1: every item by blocks of rows of C;
 *            2: every item by blocks of columns of C; 3 (one item): blocks of the sum
 *            over k, added after (EMBER_GEMM_SUM_OF_PARTS).
 *   a_row_step: elements between consecutive rows of op(A) (1 when A is stored
 *            transposed, else lda); b_col_step: between columns of op(B) (ldb when B is
 *            stored transposed, else 1).
 *   batch:   the batch axes (row-major over items) and each operand's element stride
 *            along them, C's included: C is row-major with leading dimension ldc (a
 *            fresh (count, m, n) array, or the product laid out as a consumer's
 *            transpose would copy it: the heads of attention back into rows).
 *
 * The BLAS runs single-threaded inside: its own threads would compete with OpenMP's.
 *
 * Ember's own GEMM library (ember_gemm_lib.c, built with EMBER_GEMM_LIBRARY) defines
 * ember_own_gemm_f32/f64 with the same contract. A module that links it defines
 * EMBER_GEMM_OWN_CLASSES: the shape classes (ember_gemm_class) for which it calls that
 * library instead of the BLAS: 0 none, EMBER_GEMM_ALL_CLASSES all (config.blas "ember":
 * no BLAS is included), else the classes config.blas "auto" measured it fastest for
 * (backends/cpu/blas_choice.py). Such a module also has ember_gemm_bf16/f16: bfloat16
 * or float16 operands, float32 products (a BLAS has none), always Ember's.
 */
#ifndef EMBER_GEMM_H
#define EMBER_GEMM_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ember_math.h"

typedef struct {
  int rank;
  const int64_t *extents;
  const int64_t *a_strides;
  const int64_t *b_strides;
  const int64_t *c_strides;
} ember_batch;

/* Element offset of batch item `item` in an operand with these batch strides. */
static inline int64_t ember_item_offset(const ember_batch *batch, const int64_t *strides,
                                        int64_t item) {
  int64_t offset = 0;
  for (int d = batch->rank - 1; d >= 0; d--) {
    offset += (item % batch->extents[d]) * strides[d];
    item /= batch->extents[d];
  }
  return offset;
}

/* The shape classes the BLAS choice is measured on (blas_choice.py): products at most
 * one narrow tile wide (n <= 16, the MLP's last layer); skinny ones, with m or n at most
 * 32 (a convolution's weight gradient, 16 x 27 over k = 4096; its 32 output channels),
 * where packing an operand costs as much as the products; and all others. */
#define EMBER_GEMM_WIDE 1
#define EMBER_GEMM_NARROW 2
#define EMBER_GEMM_SKINNY 4
#define EMBER_GEMM_ALL_CLASSES 7
#define EMBER_GEMM_NARROW_N 16
#define EMBER_GEMM_SKINNY_MN 32
static inline int ember_gemm_class(int64_t m, int64_t n) {
  if (n <= EMBER_GEMM_NARROW_N) return EMBER_GEMM_NARROW;
  return m <= EMBER_GEMM_SKINNY_MN || n <= EMBER_GEMM_SKINNY_MN ? EMBER_GEMM_SKINNY
                                                                : EMBER_GEMM_WIDE;
}

/* The activation applied last, on the whole sum and addends, as C is stored
 * (codegen/gemm_activation.py names them): none, max(x, 0), GELU's tanh form
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) and its exact form
 * x (0.5 erfc(-x / sqrt(2))), computed in the order the graph computes them. */
#define EMBER_ACTIVATION_NONE 0
#define EMBER_ACTIVATION_RELU 1
#define EMBER_ACTIVATION_GELU_TANH 2
#define EMBER_ACTIVATION_GELU_ERFC 3

/* ember_activate_float / _double: the activation over n values in place (one loop per
 * activation, so that each vectorizes). */
#define EMBER_DEFINE_ACTIVATE(T, TANH, ERFC)                                               \
  static inline __attribute__((unused)) void ember_activate_##T(T *x, int64_t n,           \
                                                                int activation) {          \
    switch (activation) {                                                                  \
    case EMBER_ACTIVATION_RELU: /* (NaN stays NaN, as max propagates it) */                \
      for (int64_t j = 0; j < n; j++) x[j] = x[j] < 0 ? (T)0 : x[j];                       \
      break;                                                                               \
    case EMBER_ACTIVATION_GELU_TANH:                                                       \
      for (int64_t j = 0; j < n; j++)                                                      \
        x[j] = ((T)0.5 * x[j]) *                                                           \
               ((T)1 + TANH((T)0.7978845608028654 * (x[j] + (T)0.044715 * (x[j] * x[j] * x[j])))); \
      break;                                                                               \
    case EMBER_ACTIVATION_GELU_ERFC:                                                       \
      for (int64_t j = 0; j < n; j++)                                                      \
        x[j] = x[j] * ((T)0.5 * ERFC(x[j] * -(T)0.7071067811865476));                     \
      break;                                                                               \
    default:                                                                               \
      break;                                                                               \
    }                                                                                      \
  }
EMBER_DEFINE_ACTIVATE(float, ember_tanhf, ember_erfcf)
EMBER_DEFINE_ACTIVATE(double, ember_tanh, ember_erfc)

/* ember_gemm_finish_float / _double: e = activation(alpha c + d_scale d + row_scale row)
 * over a block (rows x cols; e, c and d laid out alike, leading dimension ldc; d and
 * row optional). */
#define EMBER_DEFINE_GEMM_FINISH(T)                                                        \
  static inline __attribute__((unused)) void ember_gemm_finish_##T(                         \
      T *e, const T *c, int64_t ldc, int64_t rows, int64_t cols, T alpha, const T *d,      \
      T d_scale, const T *row, T row_scale, int activation) {                              \
    for (int64_t r = 0; r < rows; r++) {                                                   \
      T *out = e + r * ldc;                                                                \
      const T *in = c + r * ldc, *add = d ? d + r * ldc : NULL;                            \
      for (int64_t j = 0; j < cols; j++)                                                   \
        out[j] = alpha * in[j] + (add ? d_scale * add[j] : 0) + (row ? row_scale * row[j] : 0); \
      ember_activate_##T(out, cols, activation);                                           \
    }                                                                                      \
  }
EMBER_DEFINE_GEMM_FINISH(float)
EMBER_DEFINE_GEMM_FINISH(double)

/* The functions' signature, for operands A and B stored as S, results (C, D, the row)
 * as T and the scales as R. */
#define EMBER_GEMM_SIGNATURE_OF(NAME, S, T, R) EMBER_GEMM_MIXED_SIGNATURE(NAME, S, S, T, R)
/* (A stored as SA, B as SB: a float32 operand of a 16-bit product, rounded as packed) */
#define EMBER_GEMM_MIXED_SIGNATURE(NAME, SA, SB, T, R)                                      \
  void NAME(int split, int parts, int64_t count, const ember_batch *batch, int ta, int tb, \
            int64_t m, int64_t n, int64_t k, const SA *A, int64_t lda, int64_t a_row_step, \
            const SB *B, int64_t ldb, int64_t b_col_step, T *C, int64_t ldc, R alpha,      \
            const T *D, R d_scale, const T *row, R row_scale, int activation, T *E)
#define EMBER_GEMM_SIGNATURE(NAME, T) EMBER_GEMM_SIGNATURE_OF(NAME, T, T, T)
#define EMBER_GEMM_ARGUMENTS                                                               \
  split, parts, count, batch, ta, tb, m, n, k, A, lda, a_row_step, B, ldb, b_col_step, C,  \
      ldc, alpha, D, d_scale, row, row_scale, activation, E

/* C = d_scale * D + row_scale * row (broadcast down the rows), each term optional; D is
 * laid out as C and may be C itself. */
#define EMBER_DEFINE_GEMM_START(NAME, T)                                                   \
  static inline void ember_gemm_start_##NAME(T *c, int64_t ldc, int64_t rows, int64_t cols, \
                                             const T *d, T d_scale, const T *row,          \
                                             T row_scale) {                                \
    if (d == c && d_scale == 1 && row == NULL) return; /* in place, as it is */            \
    for (int64_t r = 0; r < rows; r++) {                                                   \
      T *out = c + r * ldc;                                                                \
      const T *in = d ? d + r * ldc : NULL;                                                \
      if (in != NULL && d_scale == 1 && row == NULL) {                                     \
        memcpy(out, in, sizeof(T) * cols);                                                 \
        continue;                                                                          \
      }                                                                                    \
      for (int64_t j = 0; j < cols; j++)                                                   \
        out[j] = (in ? d_scale * in[j] : 0) + (row ? row_scale * row[j] : 0);              \
    }                                                                                      \
  }

/* The split of ember_gemm_f32/f64 over the OpenMP team, shared by the BLAS path below
 * and Ember's own GEMM (ember_gemm_lib.c): split 0 divides the batch items, 1 the rows of
 * C, 2 its columns, into `parts` static blocks. BLOCK runs once per item of a thread's
 * block with a, b (of SA, SB), c (of T: that item's operands, moved to the block), rows,
 * cols and lo (the block's first row or column) in scope. */
#define EMBER_GEMM_PARTS(SA, SB, T, BLOCK)                                                    \
  _Pragma("omp parallel for num_threads(parts) schedule(static) if(parts > 1)")            \
  for (int64_t part = 0; part < parts; part++) {                                           \
    const int64_t size = split == 1 ? m : n;                                               \
    const int64_t first = split == 0 ? part * count / parts : 0;                           \
    const int64_t last = split == 0 ? (part + 1) * count / parts : count;                  \
    const int64_t lo = split == 0 ? 0 : part * size / parts;                               \
    const int64_t hi = split == 0 ? size : (part + 1) * size / parts;                      \
    for (int64_t item = first; item < last; item++) {                                      \
      const SA *a = A + ember_item_offset(batch, batch->a_strides, item);                  \
      const SB *b = B + ember_item_offset(batch, batch->b_strides, item);                  \
      T *c = C + ember_item_offset(batch, batch->c_strides, item);                         \
      int64_t rows = m, cols = n;                                                          \
      if (split == 1) { a += lo * a_row_step; c += lo * ldc; rows = hi - lo; }             \
      if (split == 2) { b += lo * b_col_step; c += lo; cols = hi - lo; }                   \
      BLOCK                                                                                \
    }                                                                                      \
  }

/* A thread's buffer, kept between calls (OpenMP's threads live on) and grown as needed:
 * split 3's partial sums here, the packed panels of Ember's GEMM (ember_gemm_lib.c). */
#define EMBER_ALIGN 64
typedef struct {
  void *data;
  size_t bytes;
} ember_space;

/* `space`'s buffer, grown to at least `bytes` (null when out of memory). */
static __attribute__((unused)) void *ember_space_of(ember_space *space, size_t bytes) {
  if (bytes > space->bytes) {
    free(space->data);
    bytes = (bytes + EMBER_ALIGN - 1) / EMBER_ALIGN * EMBER_ALIGN;
    space->data = aligned_alloc(EMBER_ALIGN, bytes);
    space->bytes = space->data ? bytes : 0;
  }
  return space->data;
}

static _Thread_local __attribute__((unused)) ember_space ember_partial_sums;

/* Split 3: the sum over k cut into `parts` static blocks, one product each into a
 * partial sum of its own (m x n, in the calling thread's ember_partial_sums), then every
 * element of C from the partial sums added in their order (the same result on every
 * run) and the epilogue: for a product with too few rows and columns to give each
 * thread a block of either (a convolution's weight gradient, 16 x 27 over k = 4096).
 * NAME computes each block (split 0, one part); T is the type of C's elements. */
#define EMBER_GEMM_SUM_OF_PARTS(NAME, T)                                                   \
  {                                                                                        \
    const int64_t a_col_step = ta == 112 ? lda : 1; /* (CblasTrans) */                    \
    const int64_t b_row_step = tb == 112 ? 1 : ldb;                                        \
    T *sums = ember_space_of(&ember_partial_sums, sizeof(T) * (size_t)(parts * m * n));   \
    if (sums == NULL) abort(); /* out of memory: as a failed BLAS allocation does */       \
    _Pragma("omp parallel num_threads(parts)")                                             \
    {                                                                                      \
      _Pragma("omp for schedule(static)")                                                  \
      for (int64_t part = 0; part < parts; part++) {                                       \
        const int64_t lo = part * k / parts, hi = (part + 1) * k / parts;                  \
        NAME(0, 1, 1, batch, ta, tb, m, n, hi - lo, A + lo * a_col_step, lda,              \
             a_row_step, B + lo * b_row_step, ldb, b_col_step,                            \
             sums + part * m * n, n, 1, NULL, 0, NULL, 0, EMBER_ACTIVATION_NONE, NULL);    \
      }                                                                                    \
      _Pragma("omp for schedule(static)")                                                  \
      for (int64_t i = 0; i < m; i++) {                                                    \
        T *c = C + i * ldc, *e = E ? E + i * ldc : NULL;                                   \
        const T *d = D ? D + i * ldc : NULL; /* (may be C: read before C is written) */    \
        for (int64_t j = 0; j < n; j++) {                                                  \
          T sum = sums[i * n + j];                                                         \
          for (int64_t part = 1; part < parts; part++) sum += sums[(part * m + i) * n + j]; \
          const T value = alpha * sum + (d ? d_scale * d[j] : 0) + (row ? row_scale * row[j] : 0); \
          if (e) {                                                                         \
            c[j] = sum;                                                                    \
            e[j] = value;                                                                  \
          } else {                                                                         \
            c[j] = value;                                                                  \
          }                                                                                \
        }                                                                                  \
        ember_activate_##T(e ? e : c, n, activation);                                      \
      }                                                                                    \
    }                                                                                      \
  }

/* Ember's library for the shape classes of EMBER_GEMM_OWN_CLASSES, else the BLAS. */
#if EMBER_GEMM_OWN_CLASSES
#define EMBER_GEMM_OWN_CALL(OWN)                                                           \
  if (ember_gemm_class(m, n) & EMBER_GEMM_OWN_CLASSES) {                                   \
    OWN(EMBER_GEMM_ARGUMENTS);                                                             \
    return;                                                                                \
  }
#else
#define EMBER_GEMM_OWN_CALL(OWN)
#endif

/* (static in each module; exported from the wrapper library, which defines
 * EMBER_GEMM_LINKAGE before including this header) */
#ifndef EMBER_GEMM_LINKAGE
#define EMBER_GEMM_LINKAGE static
#endif
#define EMBER_DEFINE_GEMM(NAME, OWN, T, CBLAS_GEMM)                                        \
  EMBER_DEFINE_GEMM_START(NAME, T)                                                         \
  EMBER_GEMM_LINKAGE __attribute__((noinline, unused)) EMBER_GEMM_SIGNATURE(NAME, T) {     \
    EMBER_GEMM_OWN_CALL(OWN)                                                               \
    const int saved_threads = ember_blas_single_threaded();                                \
    if (split == 3 && parts > 1) { /* (the blocks' calls find BLAS single-threaded) */     \
      EMBER_GEMM_SUM_OF_PARTS(NAME, T)                                                     \
      ember_blas_restore_threads(saved_threads);                                           \
      return;                                                                              \
    }                                                                                      \
    EMBER_GEMM_PARTS(T, T, T, {                                                            \
      const T *d = D ? D + (c - C) : NULL; /* (no commas: a macro argument) */           \
      const T *r = row ? row + (split == 2 ? lo : 0) : NULL;                               \
      const int start = E == NULL && (d != NULL || r != NULL);                             \
      if (start) /* this thread's block of C starts as the addends */                      \
        ember_gemm_start_##NAME(c, ldc, rows, cols, d, d_scale, r, row_scale);             \
      CBLAS_GEMM(101, ta, tb, (int)rows, (int)cols, (int)k, E ? 1 : alpha, a, (int)lda, b, \
                 (int)ldb, start ? 1 : 0, c, (int)ldc);                                    \
      if (E != NULL) /* (the block just written: in cache) */                              \
        ember_gemm_finish_##T(E + (c - C), c, ldc, rows, cols, alpha, d, d_scale, r,       \
                              row_scale, activation);                                      \
      else if (activation != EMBER_ACTIVATION_NONE)                                        \
        for (int64_t i = 0; i < rows; i++) ember_activate_##T(c + i * ldc, cols, activation); \
    })                                                                                     \
    ember_blas_restore_threads(saved_threads);                                             \
  }

/* A call that goes straight to Ember's library (operands S, results T, scales R). */
#define EMBER_DEFINE_OWN_CALL(NAME, OWN, S, T, R)                                          \
  static inline __attribute__((unused)) EMBER_GEMM_SIGNATURE_OF(NAME, S, T, R) {           \
    OWN(EMBER_GEMM_ARGUMENTS);                                                             \
  }

#ifndef EMBER_GEMM_LIBRARY
#ifdef EMBER_GEMM_OWN_CLASSES
EMBER_GEMM_SIGNATURE(ember_own_gemm_f32, float);
EMBER_GEMM_SIGNATURE(ember_own_gemm_f64, double);
/* (bfloat16, float16 operands as their bits; float32 results, or results of the
 * operands' type: _bf16_bf16, _f16_f16, summed in float32 and rounded once) */
EMBER_GEMM_SIGNATURE_OF(ember_own_gemm_bf16, uint16_t, float, float);
EMBER_GEMM_SIGNATURE_OF(ember_own_gemm_f16, uint16_t, float, float);
EMBER_GEMM_SIGNATURE_OF(ember_own_gemm_bf16_bf16, uint16_t, uint16_t, float);
EMBER_GEMM_SIGNATURE_OF(ember_own_gemm_f16_f16, uint16_t, uint16_t, float);
EMBER_DEFINE_OWN_CALL(ember_gemm_bf16, ember_own_gemm_bf16, uint16_t, float, float)
EMBER_DEFINE_OWN_CALL(ember_gemm_f16, ember_own_gemm_f16, uint16_t, float, float)
EMBER_DEFINE_OWN_CALL(ember_gemm_bf16_bf16, ember_own_gemm_bf16_bf16, uint16_t, uint16_t, float)
EMBER_DEFINE_OWN_CALL(ember_gemm_f16_f16, ember_own_gemm_f16_f16, uint16_t, uint16_t, float)
/* (the same with float32 A, B or both, rounded to 16 bits as they are packed: a cast
 * fused into the product: NAME##_cast_a, _cast_b, _cast_ab) */
#define EMBER_DECLARE_CASTS(NAME, T)                                                       \
  EMBER_GEMM_MIXED_SIGNATURE(ember_own_##NAME##_cast_a, float, uint16_t, T, float);        \
  EMBER_GEMM_MIXED_SIGNATURE(ember_own_##NAME##_cast_b, uint16_t, float, T, float);        \
  EMBER_GEMM_MIXED_SIGNATURE(ember_own_##NAME##_cast_ab, float, float, T, float);          \
  static inline __attribute__((unused))                                                    \
  EMBER_GEMM_MIXED_SIGNATURE(ember_##NAME##_cast_a, float, uint16_t, T, float) {           \
    ember_own_##NAME##_cast_a(EMBER_GEMM_ARGUMENTS);                                       \
  }                                                                                        \
  static inline __attribute__((unused))                                                    \
  EMBER_GEMM_MIXED_SIGNATURE(ember_##NAME##_cast_b, uint16_t, float, T, float) {           \
    ember_own_##NAME##_cast_b(EMBER_GEMM_ARGUMENTS);                                       \
  }                                                                                        \
  static inline __attribute__((unused))                                                    \
  EMBER_GEMM_MIXED_SIGNATURE(ember_##NAME##_cast_ab, float, float, T, float) {             \
    ember_own_##NAME##_cast_ab(EMBER_GEMM_ARGUMENTS);                                      \
  }
EMBER_DECLARE_CASTS(gemm_bf16, float)
EMBER_DECLARE_CASTS(gemm_f16, float)
EMBER_DECLARE_CASTS(gemm_bf16_bf16, uint16_t)
EMBER_DECLARE_CASTS(gemm_f16_f16, uint16_t)
#endif
#if EMBER_GEMM_OWN_CLASSES == EMBER_GEMM_ALL_CLASSES
EMBER_DEFINE_OWN_CALL(ember_gemm_f32, ember_own_gemm_f32, float, float, float)
EMBER_DEFINE_OWN_CALL(ember_gemm_f64, ember_own_gemm_f64, double, double, double)
#elif defined(EMBER_GEMM_WRAPPER_LINKED)
/* Compiled once per toolchain and BLAS into the wrapper library that the module links
 * (toolchain.py's _with_gemm_wrapper): its OpenMP region and activation loops cost gcc
 * about 0.5 s, four times a module's fused kernels. */
EMBER_GEMM_SIGNATURE(ember_gemm_f32, float);
EMBER_GEMM_SIGNATURE(ember_gemm_f64, double);
#else
#include "ember_blas.h"
EMBER_DEFINE_GEMM(ember_gemm_f32, ember_own_gemm_f32, float, EMBER_CBLAS(sgemm))
EMBER_DEFINE_GEMM(ember_gemm_f64, ember_own_gemm_f64, double, EMBER_CBLAS(dgemm))
#endif
#endif

#endif /* EMBER_GEMM_H */
