/* The host's float32 FMA throughput, measured: every thread of the OpenMP team runs
 * fused multiply-adds on independent accumulators held in registers (no memory
 * traffic), as many as the vector units can keep in flight. A GEMM can only come close
 * to this rate: `ember bench` reports it as the matmul floor. ember_bf16_dot_peak does
 * the same with vdpbf16ps (bfloat16 pairs into float32 lanes), the floor of a
 * bfloat16 GEMM, where the CPU has AVX512_BF16.
 *
 * Vectors are as wide as the target's (64 bytes with AVX-512, 32 with AVX2, else 16);
 * 16 accumulators cover the FMA latency times the FMA ports of current x86 and Arm
 * cores (4 cycles x 2 ports, twice over). Built with -ffp-contract=fast: `acc = acc *
 * x + y` is one FMA.
 */
#include <stdint.h>

#if defined(__AVX512BF16__)
#include <immintrin.h>
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
