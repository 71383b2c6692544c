/* Helpers for Ember's generated CPU kernels: half-precision storage, integer power, and
 * the OpenMP team functions.
 *
 * float16 and bfloat16 are stored as 16-bit patterns and computed in float. Conversions
 * round to nearest even, keep NaN a (quiet) NaN and are branch-free, so loops that use
 * them still vectorize.
 */
#ifndef EMBER_KERNELS_H
#define EMBER_KERNELS_H

#include "ember_libm.h"
#include <stdint.h>
#include <string.h>

/* The team of a parallel reduction (which block of iterations is this thread's); one
 * thread when the compiler has no OpenMP. */
#ifdef _OPENMP
int omp_get_thread_num(void);
int omp_get_num_threads(void);
#else
static inline int omp_get_thread_num(void) { return 0; }
static inline int omp_get_num_threads(void) { return 1; }
#endif

static inline float ember_bits_to_f32(uint32_t bits) {
  float value;
  memcpy(&value, &bits, sizeof value);
  return value;
}

static inline uint32_t ember_f32_to_bits(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof bits);
  return bits;
}

static inline float ember_bf16_to_f32(uint16_t bits) {
  return ember_bits_to_f32((uint32_t)bits << 16);
}

static inline uint16_t ember_f32_to_bf16(float value) {
  uint32_t bits = ember_f32_to_bits(value);
  uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
  uint32_t quiet_nan = (bits >> 16) | 0x40u;
  return (uint16_t)(value != value ? quiet_nan : rounded);
}

/* float32 to float16 bits in integer arithmetic, rounded to nearest even. Used also
 * where the compiler has _Float16 for a value rounded to float16 and read back as a
 * float: GCC 12 targeting AVX512-FP16 drops a vectorized round trip through _Float16
 * ((float)(_Float16)x becomes x at -O3). */
static inline uint16_t ember_f32_to_f16_bits(float value) {
  uint32_t bits = ember_f32_to_bits(value);
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return (uint16_t)(sign | 0x7E00u);
  if (magnitude >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u); /* overflow to inf */
  if (magnitude < 0x38800000u) {                                  /* subnormal or zero */
    float scaled = ember_bits_to_f32(magnitude) * 16777216.0f;     /* 2^24, exact */
    uint32_t rounded = (uint32_t)__builtin_rintf(scaled);
    return (uint16_t)(sign | rounded);
  }
  uint32_t rounded = magnitude + 0xFFFu + ((magnitude >> 13) & 1u);
  return (uint16_t)(sign | ((rounded - 0x38000000u) >> 13));
}

#if defined(__FLT16_MAX__)
static inline float ember_f16_to_f32(uint16_t bits) {
  _Float16 half;
  memcpy(&half, &bits, sizeof half);
  return (float)half;
}

static inline uint16_t ember_f32_to_f16(float value) {
  _Float16 half = (_Float16)value;
  uint16_t bits;
  memcpy(&bits, &half, sizeof bits);
  return bits;
}
#else
static inline float ember_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1Fu;
  uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1Fu) return ember_bits_to_f32(sign | 0x7F800000u | (mantissa << 13));
  if (exponent == 0) {
    float magnitude = (float)mantissa * 5.9604644775390625e-8f; /* 2^-24 */
    return sign ? -magnitude : magnitude;
  }
  return ember_bits_to_f32(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

static inline uint16_t ember_f32_to_f16(float value) {
  return ember_f32_to_f16_bits(value);
}
#endif

/* The logistic function, for targets whose math library lacks a vectorized one. */
static inline float ember_logisticf(float x) { return 1.0f / (1.0f + expf(-x)); }
static inline double ember_logistic(double x) { return 1.0 / (1.0 + exp(-x)); }

/* x ** y for integers, wrapping modulo 2^64 like NumPy; negative y gives 0. */
static inline uint64_t ember_ipow(uint64_t base, int64_t exponent) {
  if (exponent < 0) return 0;
  uint64_t result = 1;
  while (exponent) {
    if (exponent & 1) result *= base;
    base *= base;
    exponent >>= 1;
  }
  return result;
}

#endif
