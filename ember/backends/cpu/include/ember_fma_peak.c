/* The host's float32 FMA throughput, measured: every thread of the OpenMP team runs
 * fused multiply-adds on independent accumulators held in registers (no memory
 * traffic), as many as the vector units can keep in flight. A GEMM can only come close
 * to this rate: `ember bench` reports it as the matmul floor. ember_bf16_dot_peak does
 * the same with vdpbf16ps (bfloat16 pairs into float32 lanes), the floor of a
 * bfloat16 GEMM, where the CPU has AVX512_BF16; ember_amx_dot_peak with AMX's
 * TDPBF16PS (16 x 32 by 32 x 16 bfloat16 tiles into 16 x 16 float32 sums), where the CPU
 * has AMX-BF16 and the OS grants the tiles: the floor of Ember's AMX tile.
 *
 * Vectors are as wide as the target's (64 bytes with AVX-512, 32 with AVX2, else 16);
 * 16 accumulators cover the FMA latency times the FMA ports of current x86 and Arm
 * cores (4 cycles x 2 ports, twice over). Built with -ffp-contract=fast: `acc = acc *
 * x + y` is one FMA.
 */
#include <stdint.h>

#if defined(__AVX512BF16__) || defined(__AMX_TILE__)
#include <immintrin.h>
#endif
#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
#include <sys/syscall.h>
long syscall(long number, ...); /* (unistd.h's, hidden by -std=c11) */
#endif

#if defined(__AVX512F__)
#define EMBER_PEAK_BYTES 64
#elif defined(__AVX2__)
#define EMBER_PEAK_BYTES 32
#else
#define EMBER_PEAK_BYTES 16
#endif
#define EMBER_PEAK_CHAINS 16

typedef float ember_peak_vector __attribute__((vector_size(EMBER_PEAK_BYTES)));

int omp_get_num_threads(void);

/* Runs `iterations` rounds of EMBER_PEAK_CHAINS FMAs per thread on `threads` threads;
 * returns the float32 flops done (2 per lane per FMA). `sink` receives a value that
 * depends on every accumulator, so the compiler cannot drop the work. */
double ember_fma_peak(int threads, int64_t iterations, float *sink) {
  double flops = 0;
  float total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : flops, total)
  {
    ember_peak_vector acc[EMBER_PEAK_CHAINS];
    const ember_peak_vector x = (ember_peak_vector){0} + 0.999999f;
    const ember_peak_vector y = (ember_peak_vector){0} + 1e-7f;
    for (int c = 0; c < EMBER_PEAK_CHAINS; c++) acc[c] = (ember_peak_vector){0} + (float)c;
    for (int64_t i = 0; i < iterations; i++) {
      for (int c = 0; c < EMBER_PEAK_CHAINS; c++) acc[c] = acc[c] * x + y;
    }
    for (int c = 0; c < EMBER_PEAK_CHAINS; c++)
      for (unsigned l = 0; l < EMBER_PEAK_BYTES / sizeof(float); l++) total += acc[c][l];
    flops += 2.0 * EMBER_PEAK_CHAINS * (EMBER_PEAK_BYTES / sizeof(float)) * (double)iterations;
  }
  *sink = total;
  return flops;
}

/* As ember_fma_peak, with vdpbf16ps: 2 products per float32 lane per instruction (4
 * flops); 0 flops where the target lacks AVX512_BF16. */
double ember_bf16_dot_peak(int threads, int64_t iterations, float *sink) {
#if defined(__AVX512BF16__)
  double flops = 0;
  float total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : flops, total)
  {
    __m512 acc[EMBER_PEAK_CHAINS];
    const __m512bh x = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
    for (int c = 0; c < EMBER_PEAK_CHAINS; c++) acc[c] = _mm512_set1_ps((float)c);
    for (int64_t i = 0; i < iterations; i++) {
      for (int c = 0; c < EMBER_PEAK_CHAINS; c++) acc[c] = _mm512_dpbf16_ps(acc[c], x, x);
    }
    for (int c = 0; c < EMBER_PEAK_CHAINS; c++) total += _mm512_reduce_add_ps(acc[c]);
    flops += 4.0 * EMBER_PEAK_CHAINS * 16 * (double)iterations;
  }
  *sink = total;
  return flops;
#else
  (void)threads, (void)iterations;
  *sink = 0;
  return 0;
#endif
}

/* As ember_bf16_dot_peak, with TDPBF16PS on 6 independent tiles of sums (their latency
 * over the instruction's throughput), A and B fixed in the other two: 16 x 16 x 32 x 2
 * flops each; 0 flops where the target lacks AMX-BF16 or the OS refuses the tiles
 * (arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA). */
double ember_amx_dot_peak(int threads, int64_t iterations, float *sink) {
#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
  if (syscall(SYS_arch_prctl, 0x1023, 18) != 0) {
    *sink = 0;
    return 0;
  }
  static const struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t bytes_per_row[16];
    uint8_t rows[16];
  } config = {1, 0, {0}, {64, 64, 64, 64, 64, 64, 64, 64}, {16, 16, 16, 16, 16, 16, 16, 16}};
  double flops = 0;
  float total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : flops, total)
  {
    uint16_t operand[16 * 32]; /* (bfloat16 1e-3) */
    float sums[16 * 16];
    for (int i = 0; i < 16 * 32; i++) operand[i] = 0x3a83;
    _tile_loadconfig(&config);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_zero(4);
    _tile_zero(5);
    _tile_loadd(6, operand, 64);
    _tile_loadd(7, operand, 64);
    /* (a round of 6 takes about 12 rounds of FMAs' time: an eighth as many rounds keeps
     * the probe about as long as the others) */
    for (int64_t i = 0; i < iterations / 8; i++) {
      _tile_dpbf16ps(0, 6, 7);
      _tile_dpbf16ps(1, 6, 7);
      _tile_dpbf16ps(2, 6, 7);
      _tile_dpbf16ps(3, 6, 7);
      _tile_dpbf16ps(4, 6, 7);
      _tile_dpbf16ps(5, 6, 7);
    }
    _tile_stored(0, sums, 64);
    _tile_release();
    for (int i = 0; i < 16 * 16; i++) total += sums[i];
    flops += 6.0 * 16 * 16 * 32 * 2 * (double)(iterations / 8);
  }
  *sink = total;
  return flops;
#else
  (void)threads, (void)iterations;
  *sink = 0;
  return 0;
#endif
}
