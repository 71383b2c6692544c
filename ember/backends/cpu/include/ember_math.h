/* ember_math.h: vectorizable float32 math for Ember's generated C kernels.
 *
 * Every float function is static inline, straight-line arithmetic: polynomials, bit
 * casts through unions, and selects written as ?: that the vectorizer turns into
 * blends. There are no libm calls and no data-dependent branches, so a loop such as
 *
 *     #pragma omp simd
 *     for (long i = 0; i < n; ++i) y[i] = ember_expf(x[i]);
 *
 * is vectorized by gcc -O3 -march=native (checked with -fopt-info-vec). Helpers use
 * __builtin_rint / __builtin_floor / __builtin_sqrtf /
 * __builtin_truncf, which become single instructions on x86-64 with SSE4.1 and on
 * AArch64 (with -fno-math-errno); __builtin_fmaf is used only where the target has FMA.
 *
 * Accuracy over the whole float range, measured by tests/backends/cpu/test_ember_math.py
 * against float64 references: at most 3 ulp for every function (1 ulp or less for
 * exp, log, log1p, erf, erfc, sin, cos, tan, pow; sqrt is exact), NaN in gives NaN out,
 * overflow gives inf, underflow gives 0 or the correctly rounded subnormal, and the
 * special values of C99 Annex F hold (log(0) = -inf, log(x<0) = NaN, tanh(+-inf) = +-1,
 * f(-0) = -0 for odd functions, pow's zero/infinity/negative-base rules, ...).
 * sin/cos/tan reduce their argument exactly over the whole float range and pow computes
 * internally in double, so their float results are close to correctly rounded; erf/erfc
 * stay in float with exact fma products (at most 0.988 and 0.86 ulp), or use double
 * where the target has no FMA.
 *
 * The code must not be compiled with -ffast-math (or -ffinite-math-only,
 * -fassociative-math): the rounding tricks and the NaN/inf selects rely on IEEE
 * semantics. -ffp-contract=fast (FMA contraction) is fine.
 *
 * The double versions (ember_exp, ...) simply call libm: they are correct but are not
 * vectorized by gcc (glibc declares its vector variants only under -ffast-math).
 */
#ifndef EMBER_MATH_H
#define EMBER_MATH_H

#include "ember_libm.h"
#include <stdint.h>

#if defined(__GNUC__) || defined(__clang__)
#define EMBER_INLINE static inline __attribute__((always_inline))
#else
#define EMBER_INLINE static inline
#endif

/* ------------------------------------------------------------------ bit casts */

typedef union { float f; uint32_t u; int32_t i; } ember__bits32;
typedef union { double d; uint64_t u; int64_t i; } ember__bits64;

EMBER_INLINE uint32_t ember__f2u(float x) { ember__bits32 b; b.f = x; return b.u; }
EMBER_INLINE float ember__u2f(uint32_t u) { ember__bits32 b; b.u = u; return b.f; }
EMBER_INLINE double ember__u2d(uint64_t u) { ember__bits64 b; b.u = u; return b.d; }

#define EMBER__INFF __builtin_inff()
#define EMBER__NANF __builtin_nanf("")
#define EMBER__SIGN 0x80000000u

/* |x| and copysign through the sign bit (vectorizes to and/or). */
EMBER_INLINE float ember__absf(float x) { return ember__u2f(ember__f2u(x) & ~EMBER__SIGN); }
EMBER_INLINE float ember__with_sign_of(float magnitude, float sign)
{
    return ember__u2f(ember__f2u(magnitude) | (ember__f2u(sign) & EMBER__SIGN));
}

/* Round to the nearest integer (ties to even) for |x| < 2^23, without libm. */
EMBER_INLINE float ember__roundf_small(float x)
{
    const float magic = 12582912.0f; /* 1.5 * 2^23 */
    return (x + magic) - magic;
}

/* 2^k as a float for k in [-126, 127]. */
EMBER_INLINE float ember__exp2i(int32_t k) { return ember__u2f((uint32_t)(k + 127) << 23); }

/* ------------------------------------------------------------------ sqrt */

EMBER_INLINE float ember_sqrtf(float x) { return __builtin_sqrtf(x); }

/* ------------------------------------------------------------------ exp, expm1 */

#define EMBER__LOG2EF 1.44269504088896341f
#define EMBER__LN2_HI 0.693359375f       /* 9 significant bits: k * LN2_HI is exact */
#define EMBER__LN2_LO -2.12194440e-4f    /* LN2_HI + LN2_LO = ln 2 to 2^-33 */

/* exp(x) with x = k ln2 + r, |r| <= ln2/2 (Cody-Waite), exp(r) by a Cephes polynomial,
 * and 2^k applied as two factors so that results down to the subnormals round once. */
EMBER_INLINE float ember_expf(float x)
{
    float xc = x > -104.0f ? x : -104.0f;   /* exp(-104) rounds to 0; NaN -> -104 */
    xc = xc < 89.0f ? xc : 89.0f;           /* exp(89) overflows to inf */
    float k = ember__roundf_small(xc * EMBER__LOG2EF);
    float r = (xc - k * EMBER__LN2_HI) - k * EMBER__LN2_LO;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = (p * (r * r) + r) + 1.0f;
    int32_t ki = (int32_t)k;                /* in [-150, 128] */
    int32_t k1 = ki / 2;
    y = (y * ember__exp2i(k1)) * ember__exp2i(ki - k1);
    return x != x ? x + x : y;
}

/* expm1(r) for r = x - k ln2, |r| <= ln2/2 (k = round(x / ln2)), by a polynomial that is
 * accurate near 0. */
EMBER_INLINE float ember__expm1_reduced(float x, float k)
{
    float r = (x - k * EMBER__LN2_HI) - k * EMBER__LN2_LO;
    float p = 1.98241149e-4f;               /* minimax, relative error 4e-10 */
    p = p * r + 1.39332714e-3f;
    p = p * r + 8.33341945e-3f;
    p = p * r + 4.16664816e-2f;
    p = p * r + 1.66666657e-1f;
    return r + (r * r) * (0.5f + r * p);
}

/* expm1(x) = 2^k (expm1(r) + 1) - 1.
 * When k = 128 the scale 2^k is not a float: use 2^127 and double the result. */
EMBER_INLINE float ember_expm1f(float x)
{
    float xc = x > -20.0f ? x : -20.0f;     /* expm1(-20) rounds to -1; NaN -> -20 */
    xc = xc < 89.0f ? xc : 89.0f;
    float k = ember__roundf_small(xc * EMBER__LOG2EF);
    float q = ember__expm1_reduced(xc, k);
    int32_t ki = (int32_t)k;                /* in [-29, 128] */
    int32_t top = ki > 127;
    float s = ember__exp2i(ki - top);
    float y = (s * q + (s - (top ? 0.5f : 1.0f))) * (top ? 2.0f : 1.0f);
    y = x == 0.0f ? x : y;                  /* keeps the sign of -0 */
    return x != x ? x + x : y;
}

/* ------------------------------------------------------------------ log, log1p, log2 */

/* Splits finite x > 0 into x = 2^k * m with m in [sqrt(1/2), sqrt(2)); returns f = m - 1. */
EMBER_INLINE float ember__log_reduce(float x, float *k)
{
    int32_t tiny = x < 1.17549435e-38f;     /* subnormal: scale into the normal range */
    float xn = tiny ? x * 8388608.0f : x;
    uint32_t offset = ember__f2u(xn) - 0x3f3504f3u;   /* bits of sqrt(1/2) */
    int32_t e = (int32_t)offset >> 23;      /* arithmetic shift: floor */
    float m = ember__u2f(ember__f2u(xn) - (offset & 0xff800000u));
    *k = (float)(e - (tiny ? 23 : 0));
    return m - 1.0f;
}

/* log(1 + f) - f + f^2/2 for f in [sqrt(1/2) - 1, sqrt(2) - 1] (Cephes logf). */
EMBER_INLINE float ember__log1p_tail(float f, float z)
{
    float p = 7.0376836292e-2f;
    p = p * f - 1.1514610310e-1f;
    p = p * f + 1.1676998740e-1f;
    p = p * f - 1.2420140846e-1f;
    p = p * f + 1.4249322787e-1f;
    p = p * f - 1.6668057665e-1f;
    p = p * f + 2.0000714765e-1f;
    p = p * f - 2.4999993993e-1f;
    p = p * f + 3.3333331174e-1f;
    return p * f * z;
}

/* log of a positive finite float, plus a small correction `lo` added before rounding. */
EMBER_INLINE float ember__log_core(float x, float lo)
{
    float k;
    float f = ember__log_reduce(x, &k);
    float z = f * f;
    float y = ember__log1p_tail(f, z) + k * EMBER__LN2_LO - 0.5f * z + lo;
    return (f + y) + k * EMBER__LN2_HI;
}

EMBER_INLINE float ember__log_special(float x, float y)
{
    y = x > 0.0f ? y : (x == 0.0f ? -EMBER__INFF : EMBER__NANF);
    y = x == EMBER__INFF ? x : y;
    return x != x ? x + x : y;
}

EMBER_INLINE float ember_logf(float x)
{
    return ember__log_special(x, ember__log_core(x, 0.0f));
}

/* log1p(x) = log(u) + (x - (u - 1)) / u with u = 1 + x rounded: the second term is the
 * rounding error of u, which keeps full accuracy near 0. */
EMBER_INLINE float ember_log1pf(float x)
{
    float u = 1.0f + x;
    float u_safe = (u > 0.0f) & (u < EMBER__INFF) ? u : 1.0f;
    float y = ember__log_core(u_safe, (x - (u_safe - 1.0f)) / u_safe);
    y = ember__log_special(u, y);
    return x == 0.0f ? x : y;               /* keeps the sign of -0 */
}

EMBER_INLINE float ember_log2f(float x)
{
    float k;
    float f = ember__log_reduce(x, &k);
    float z = f * f;
    float tail = ember__log1p_tail(f, z) - 0.5f * z;   /* log(m) = f + tail */
    float y = (f * EMBER__LOG2EF + tail * EMBER__LOG2EF) + k;
    return ember__log_special(x, y);
}

/* ------------------------------------------------------------------ tanh, sigmoid */

/* tanh|x| = e / (e + 2) with e = expm1(2|x|); for |x| >= 9.01 tanh rounds to 1.
 * With 2|x| in [0, 20], expm1 needs none of ember_expm1f's special cases: 2^k is a
 * float, a NaN passes through the arithmetic and the sign restores -0. Without them
 * tanh-GELU ran 1.4x faster (AVX2, Zen 1), as accurate (at most 2.42 ulp on [0, 10],
 * as before; 958 of the 2^32 results moved by 1 ulp, contracted differently). */
EMBER_INLINE float ember_tanhf(float x)
{
    float a = ember__absf(x);
    float t = a > 10.0f ? 20.0f : a + a;    /* NaN stays NaN */
    float t_finite = a < 10.0f ? a + a : 20.0f;   /* NaN -> 20: k converts to an int */
    float k = ember__roundf_small(t_finite * EMBER__LOG2EF);   /* in [0, 29] */
    float s = ember__exp2i((int32_t)k);
    float e = s * ember__expm1_reduced(t, k) + (s - 1.0f);
    return ember__with_sign_of(e / (e + 2.0f), x);
}

/* The logistic function 1 / (1 + exp(-x)), written with exp(-|x|) so it never overflows
 * and keeps relative accuracy for very negative x (result exp(x) / (1 + exp(x))). */
EMBER_INLINE float ember_sigmoidf(float x)
{
    float e = ember_expf(-ember__absf(x));
    return (x >= 0.0f ? 1.0f : e) / (1.0f + e);
}

/* ------------------------------------------------------------------ double kernels */
/* Internal double-precision helpers for the functions whose float result needs more
 * than float precision inside (pow, erf, erfc, sin, cos, tan). */

#define EMBER__LOG2E 0x1.71547652b82fep+0

/* 2^z for z in [-1000, 1000]; callers clamp z and filter out NaN. */
EMBER_INLINE double ember__exp2_d(double z)
{
    ember__bits64 shifted;
    shifted.d = z + 0x1.8p52;               /* rounds z; the low bits now hold k */
    double k = shifted.d - 0x1.8p52;
    double f = z - k;                       /* exact, |f| <= 1/2 */
    double p = 1.5201913855344626e-05;      /* minimax, relative error 4e-11 */
    p = p * f + 0.00015469291473961994;
    p = p * f + 0.0013333922600308999;
    p = p * f + 0.009618027252682172;
    p = p * f + 0.05550410353398512;
    p = p * f + 0.24022651198164358;
    p = p * f + 0.6931471807284628;
    p = p * f + 0.999999999961681;
    return p * ember__u2d((shifted.u + 1023) << 52);   /* 2^k: the high bits shift out */
}

/* log2 of a positive finite float, in double (relative error about 1e-12). */
EMBER_INLINE double ember__log2_d(float x)
{
    float k;
    float f = ember__log_reduce(x, &k);
    double s = (double)f / ((double)f + 2.0);   /* log(1 + f) = 2 atanh s, |s| <= 0.172 */
    double s2 = s * s;
    double p = 1.0 / 15;
    p = p * s2 + 1.0 / 13;
    p = p * s2 + 1.0 / 11;
    p = p * s2 + 1.0 / 9;
    p = p * s2 + 1.0 / 7;
    p = p * s2 + 1.0 / 5;
    p = p * s2 + 1.0 / 3;
    double log1p_f = 2.0 * s + 2.0 * s * s2 * p;
    return (double)k + log1p_f * EMBER__LOG2E;
}

/* ------------------------------------------------------------------ pow */

/* x^y = 2^(y log2|x|) computed in double, then the C99 rules for signs, zeros,
 * infinities, integer exponents of negative bases and NaN. */
EMBER_INLINE float ember_powf(float x, float y)
{
    float ax = ember__absf(x);
    float ay = ember__absf(y);
    float ax_safe = (ax > 0.0f) & (ax < EMBER__INFF) ? ax : 1.0f;
    double l = ember__log2_d(ax_safe);
    l = ax == 0.0f ? -(double)EMBER__INFF : l;
    l = ax == EMBER__INFF ? (double)EMBER__INFF : l;
    double z = (double)y * l;               /* +-inf, or NaN for 0 * inf and NaN inputs */
    z = z < 400.0 ? z : 400.0;              /* NaN -> 400, fixed below */
    z = z > -400.0 ? z : -400.0;
    float r = (float)ember__exp2_d(z);

    /* y is an integer when frac == 0 and an odd one when y/2 ends in .5 (floats of
     * 2^24 and more are even; inf gives NaN fractions, so neither test fires). These
     * are written without selects on y: gcc threads such selects into control flow
     * that stops it from vectorizing the loop. */
    float frac = ay - __builtin_truncf(ay);
    float half = 0.5f * ay;
    float half_frac = half - __builtin_truncf(half);
    r = (half_frac == 0.5f) & ((int32_t)ember__f2u(x) < 0) ? -r : r;   /* x < 0 or -0 */
    r = (x < 0.0f) & (x > -EMBER__INFF) & (frac > 0.0f) ? EMBER__NANF : r;
    r = (x != x) | (y != y) ? x + y : r;
    r = (ax == 1.0f) & (ay == EMBER__INFF) ? 1.0f : r;  /* (-1)^(+-inf) = 1 */
    r = (y == 0.0f) | (x == 1.0f) ? 1.0f : r;
    return r;
}

/* ------------------------------------------------------------------ erf, erfc */

#define EMBER__ERFC_CUTOFF 11.0   /* erfc(11) < 2^-150: rounds to 0 */

/* erfc(a) for 0 <= a <= 11: t exp(-a^2 + g(t)) with t = 2 / (2 + a) and g a minimax
 * polynomial in t - 0.58 (absolute error 3e-9); a^2 is exact in double. */
EMBER_INLINE double ember__erfc_d(double a)
{
    double t = 2.0 / (2.0 + a);
    double u = t - 0.58;
    double g = -0.0864291919691685;
    g = g * u - 0.1397221135500268;
    g = g * u + 0.19046944102568503;
    g = g * u + 0.13651055645184693;
    g = g * u - 0.25578865892567587;
    g = g * u - 0.04670320572759607;
    g = g * u + 0.29673174813330544;
    g = g * u - 0.039632185965441054;
    g = g * u - 0.4069185332742671;
    g = g * u + 0.09476345190712422;
    g = g * u + 1.3681189981914637;
    g = g * u - 0.563156788540088;
    return t * ember__exp2_d((g - a * a) * EMBER__LOG2E);
}

/* erf(a) / a = P(a^2) for 0 <= a < 0.875 (minimax, relative error 2e-10). */
EMBER_INLINE double ember__erf_small_d(double a)
{
    double s = a * a;
    double p = 8.6753874004195e-05;
    p = p * s - 0.0008211103133809525;
    p = p * s + 0.005206747381016993;
    p = p * s - 0.026861584695900265;
    p = p * s + 0.11283733002841896;
    p = p * s - 0.3761263606580518;
    p = p * s + 1.1283791668694045;
    return a * p;
}

#if defined(__FMA__) || defined(__FP_FAST_FMAF) || defined(__ARM_FEATURE_FMA)
#define EMBER__ERF_IN_FLOAT 1
/* With a fused multiply-add, erf and erfc are computed in float: 16 lanes per AVX-512
 * vector instead of 8 doubles, about half the time of the double code. The fma gives
 * products exactly as unevaluated sums of two floats; every term that is not small is
 * carried exactly, so only small terms round before the result: erfc is at most 0.86
 * ulp over all floats (exhaustive check against libm's double erfc); erf, below, has a
 * method of its own.
 *
 * erfc(a) = t exp(-a^2 + g(u)) with t = C / (1 + p a), u = t - tc and g a minimax
 * polynomial (|error| < 2^-30.9); p = 0.65 trades the spread of g against its degree,
 * and C, tc are chosen so that g(tc) = 0 to 2^-39. Exact pieces:
 *   a^2 = h - nl;  1.3468249f u = P + Pl;  k = round((P - h) / ln 2) and
 *   r1 = -h - k ln2_hi (|r1| < 0.87, and k != 0 only where h >= 1/4, so r1 fits in
 *   24 bits: checked for every float a);
 *   r1 + P = s + sl (TwoSum);  1 + s = ehi + lo1.
 * t is off by en / C relative (d = 1 + p a rounds by dl, the quotient by the fma
 * residual) and u by ul where t < tc / 2 (elsewhere u is exact): the exponent gets
 * en H(u), with H ~ (1 + t g') / C, and ul g', g' ~ 1.477 there. Then
 * exp(s + w) = ehi + (lo1 + w + r^2 Q(r)) with Q minimax (2^-31.6), times t rounded once
 * by the last fma. 2^k is applied as 2^(k+64), exact, and 2^-64, which rounds again
 * only into the subnormals (0.81 ulp at worst there). erfc(10.0625) < 2^-150 rounds
 * to 0, so a is clamped there; NaN passes through the clamp. */
EMBER_INLINE float ember__erfcf_pos(float a)
{
    float ac = a > 10.0625f ? 10.0625f : a;
    float h = ac * ac;
    float nl = __builtin_fmaf(-ac, ac, h);
    float d = __builtin_fmaf(ac, 0.65f, 1.0f);
    float dl = __builtin_fmaf(ac, 0.65f, 1.0f - d);
    float t = 0.73983777f / d;
    float en = __builtin_fmaf(-t, dl, __builtin_fmaf(-t, d, 0.73983777f));  /* C * rel. error of t */
    float u = t - 0.48313025f;
    float ul = t - (u + 0.48313025f);
    float R = -9.461199f;                   /* (g(u) - G1H u) / u */
    R = __builtin_fmaf(R, u, -0.49929205f);
    R = __builtin_fmaf(R, u, 5.34696f);
    R = __builtin_fmaf(R, u, -2.2544496f);
    R = __builtin_fmaf(R, u, -0.7336901f);
    R = __builtin_fmaf(R, u, 1.6943249f);
    R = __builtin_fmaf(R, u, -0.96228224f);
    R = __builtin_fmaf(R, u, -0.30097723f);
    R = __builtin_fmaf(R, u, 0.9103053f);
    R = __builtin_fmaf(R, u, -0.46397212f);
    R = __builtin_fmaf(R, u, -0.60721195f);
    R = __builtin_fmaf(R, u, 3.5242337e-08f);
    float P = 1.3468249f * u;
    float Pl = __builtin_fmaf(1.3468249f, u, -P);
    float kk = __builtin_fmaf(P - h, 1.44269504f, 12582912.0f);  /* k + 1.5 * 2^23 */
    float k = kk - 12582912.0f;
    float r1 = __builtin_fmaf(k, -0.6931472f, -h);   /* ln2_hi = 0.6931472f */
    float r2 = __builtin_fmaf(k, 1.9046542e-09f, nl);  /* ln 2 - 0.6931472f = -1.9e-9 */
    float s = r1 + P;
    float bp = s - r1;
    float ehi = 1.0f + s;
    float lo1 = (1.0f - ehi) + s;
    float H = __builtin_fmaf(__builtin_fmaf(-1.9418869f, u, 1.0390974f), u, 2.2194252f);
    float corr = __builtin_fmaf(H, en, __builtin_fmaf(1.4772722f, ul, lo1));
    float side = ((r1 - (s - bp)) + (P - bp)) + ((Pl + r2) + corr);
    float w = __builtin_fmaf(R, u, side);   /* the exponent is s + w, less lo1 */
    float r = (ehi - 1.0f) + w;             /* ehi - 1 = s - lo1 exactly */
    float rr = r * r;
    float Q = __builtin_fmaf(__builtin_fmaf(0.00019704165f, r, 0.0013950596f), rr,
                             __builtin_fmaf(0.008333767f, r, 0.041666303f));
    Q = __builtin_fmaf(Q, rr, __builtin_fmaf(0.16666664f, r, 0.5f));
    float elo = __builtin_fmaf(rr, Q, w);
    float y = __builtin_fmaf(t, ehi, t * elo);
    float scale = ember__u2f((ember__f2u(kk) + 191u) << 23);   /* 2^(k+64): k in [-147, 0] */
    return (y * scale) * 0x1p-64f;
}

/* erf needs erfc only where erf is not yet 1 (a < 3.92) and only to an absolute error
 * below half an ulp of erf, not to erfc's own ulp down to its subnormal tail: its own
 * method takes about two thirds of erfc's time (GELU over 64K floats, one thread:
 * 3.7 against 5.6 ns per float). At most 0.988 ulp over all floats (exhaustive check
 * against libm's double erf, in the SIMD loop with -ffp-contract=fast).
 *
 * Below 0.9: a (c0 + a^2 E(a^2)), c0 = 2/sqrt(pi) carried as two floats, a^2 = s + sl
 * exactly (the small product loses sl otherwise: 1.07 ulp), and a scaled by 2^64 so
 * that the small product keeps its bits for subnormal a. From 0.9 (a clamped at 4,
 * where erf rounds to 1; NaN passes): erfc(a) = exp(-q(a)), q fitting -log erfc on
 * [0.9, 4] weighted by erfc (|error| < 2^-34 relative to erfc(0.9)), then
 * exp(-q) = 2^k (1 + w) with w = expm1(r), r = -q - k ln 2, and
 * erf = (1 - 2^k) - 2^k w in one fma: 1 - 2^k is exact for k in [-26, -2]. Every
 * coefficient was fitted after the lower ones were rounded to float. */
EMBER_INLINE float ember_erff(float x)
{
    float a = ember__absf(x);
    float s = a * a;
    float sl = __builtin_fmaf(a, a, -s);
    float E = __builtin_fmaf(__builtin_fmaf(8.681096e-05f, s, -0.0008218003f), s, 0.0052079055f);
    E = __builtin_fmaf(__builtin_fmaf(E, s, -0.026862316f), s, 0.11283752f);
    E = __builtin_fmaf(E, s, -0.37612638f);
    float a64 = a * 0x1p64f;
    float tail = __builtin_fmaf(s, E, __builtin_fmaf(sl, E, -5.8635383e-08f));
    float small = __builtin_fmaf(a64, 1.1283792f, a64 * tail) * 0x1p-64f;
    float ac = a > 4.0f ? 4.0f : a;
    ac = ac < 0.9f ? 0.9f : ac;
    float q = __builtin_fmaf(__builtin_fmaf(4.8883015e-07f, ac, 1.4653397e-05f), ac, -0.00039803443f);
    q = __builtin_fmaf(__builtin_fmaf(q, ac, 0.004055549f), ac, -0.024894677f);
    q = __builtin_fmaf(__builtin_fmaf(q, ac, 0.10800521f), ac, 0.6335534f);
    q = __builtin_fmaf(__builtin_fmaf(q, ac, 1.1294278f), ac, -0.00015885703f);
    float kk = __builtin_fmaf(-q, EMBER__LOG2EF, 12582912.0f);  /* k + 1.5 * 2^23 */
    float w = ember__expm1_reduced(-q, kk - 12582912.0f);
    float scale = ember__u2f((ember__f2u(kk) - 0x4B400000u + 127u) << 23);  /* 2^k */
    float big = __builtin_fmaf(-scale, w, 1.0f - scale);
    float y = a < 0.9f ? small : big;       /* NaN: big is NaN */
    return ember__with_sign_of(y, x);
}

EMBER_INLINE float ember_erfcf(float x)
{
    float y = ember__erfcf_pos(ember__absf(x));
    return x < 0.0f ? 2.0f - y : y;         /* NaN in, NaN out */
}
#else
EMBER_INLINE float ember_erff(float x)
{
    float a = ember__absf(x);
    double ad = a < 6.0f ? (double)a : 6.0;  /* erf(6) rounds to 1; NaN -> 6 */
    double y = ad < 0.875 ? ember__erf_small_d(ad) : 1.0 - ember__erfc_d(ad);
    float r = ember__with_sign_of((float)y, x);
    return x != x ? x + x : r;
}

EMBER_INLINE float ember_erfcf(float x)
{
    float a = ember__absf(x);
    double ad = a < (float)EMBER__ERFC_CUTOFF ? (double)a : EMBER__ERFC_CUTOFF;
    double e = ember__erfc_d(ad);
    float r = (float)(x < 0.0f ? 2.0 - e : e);
    return x != x ? x + x : r;
}

#endif

/* ------------------------------------------------------------------ sin, cos, tan */

/* Reduce x modulo pi/2 exactly over the whole float range (a branch-free Payne-Hanek).
 *
 * 2/pi is split into seven 28-bit pieces P[i], so that each product x * P[i] is exact in
 * double (24 + 28 bits). Each product is reduced modulo 4 exactly and accumulated into a
 * fraction |s| <= 1/2 and a quadrant count n, coarsest piece first; the pieces cover
 * 2/pi down to 2^-196, enough for |x| up to FLT_MAX. Returns theta = s * pi/2 in
 * [-pi/4, pi/4] and sets *quadrant to n mod 4 (0..3, as a double). x must be finite. */
EMBER_INLINE double ember__reduce_pio2(float x, double *quadrant)
{
    static const double two_over_pi[7] = {
        0x1.45f306cp-1, 0x1.c9c882ap-29, 0x1.4fe13a8p-59, 0x1.f47d4dp-86,
        0x1.bb81b6cp-113, 0x1.4acc9ep-143, 0x1.0e4107cp-170,
    };
    double xd = (double)x;
    double s = 0.0, n = 0.0;
    for (int i = 0; i < 7; ++i) {
        double t = xd * two_over_pi[i];
        t -= 4.0 * __builtin_rint(0.25 * t);
        s += t;
        double k = __builtin_rint(s);
        s -= k;
        n += k;
    }
    *quadrant = n - 4.0 * __builtin_floor(0.25 * n);
    return s * 0x1.921fb54442d18p+0;
}

/* sin and cos of |theta| <= pi/4 (Taylor, relative error below 3e-9). */
EMBER_INLINE double ember__sin_kernel(double t)
{
    double t2 = t * t;
    double p = 1.0 / 362880;
    p = p * t2 - 1.0 / 5040;
    p = p * t2 + 1.0 / 120;
    p = p * t2 - 1.0 / 6;
    return t + t * t2 * p;
}

EMBER_INLINE double ember__cos_kernel(double t)
{
    double t2 = t * t;
    double p = -1.0 / 3628800;
    p = p * t2 + 1.0 / 40320;
    p = p * t2 - 1.0 / 720;
    p = p * t2 + 1.0 / 24;
    p = p * t2 - 0.5;
    return 1.0 + t2 * p;
}

EMBER_INLINE float ember_sinf(float x)
{
    float finite = ember__absf(x) < EMBER__INFF ? x : 0.0f;
    double q;
    double t = ember__reduce_pio2(finite, &q);
    int32_t odd = (q == 1.0) | (q == 3.0);
    double v = odd ? ember__cos_kernel(t) : ember__sin_kernel(t);
    float r = (float)(q >= 2.0 ? -v : v);
    r = x == 0.0f ? x : r;                  /* keeps the sign of -0 */
    return ember__absf(x) < EMBER__INFF ? r : x - x;   /* inf, NaN -> NaN */
}

EMBER_INLINE float ember_cosf(float x)
{
    float finite = ember__absf(x) < EMBER__INFF ? x : 0.0f;
    double q;
    double t = ember__reduce_pio2(finite, &q);
    int32_t odd = (q == 1.0) | (q == 3.0);
    double v = odd ? ember__sin_kernel(t) : ember__cos_kernel(t);
    float r = (float)((q == 1.0) | (q == 2.0) ? -v : v);
    return ember__absf(x) < EMBER__INFF ? r : x - x;
}

EMBER_INLINE float ember_tanf(float x)
{
    float finite = ember__absf(x) < EMBER__INFF ? x : 0.0f;
    double q;
    double t = ember__reduce_pio2(finite, &q);
    double s = ember__sin_kernel(t);
    double c = ember__cos_kernel(t);
    int32_t odd = (q == 1.0) | (q == 3.0);
    float r = (float)(odd ? -c / s : s / c);
    r = x == 0.0f ? x : r;
    return ember__absf(x) < EMBER__INFF ? r : x - x;
}

/* ------------------------------------------------------------------ atan */

/* Cephes atanf: reduce |x| to [0, tan(pi/8)] with atan x = pi/2 + atan(-1/x) or
 * pi/4 + atan((x-1)/(x+1)), one division for all three cases, odd polynomial. */
EMBER_INLINE float ember_atanf(float x)
{
    float a = ember__absf(x);
    int32_t big = a > 2.414213562373095f;
    int32_t mid = a > 0.4142135623730950f;
    float num = big ? -1.0f : (mid ? a - 1.0f : a);
    float den = big ? a : (mid ? a + 1.0f : 1.0f);
    float t = num / den;
    float hi = big ? 1.5707963705062866f : (mid ? 0.7853981852531433f : 0.0f);
    float lo = big ? -4.371139000186243e-08f : (mid ? -2.1855695000931214e-08f : 0.0f);
    float z = t * t;
    float p = 8.05374449538e-2f;
    p = p * z - 1.38776856032e-1f;
    p = p * z + 1.99777106478e-1f;
    p = p * z - 3.33329491539e-1f;
    float y = hi + (t + (t * z * p + lo));
    return ember__with_sign_of(y, x);       /* NaN stays NaN (a - 1, a + 1 are NaN) */
}

/* ------------------------------------------------------------------ double versions */
/* float64 kernels call libm: correctly rounded or nearly, but not vectorized. */

EMBER_INLINE double ember_exp(double x) { return exp(x); }
EMBER_INLINE double ember_expm1(double x) { return expm1(x); }
EMBER_INLINE double ember_log(double x) { return log(x); }
EMBER_INLINE double ember_log1p(double x) { return log1p(x); }
EMBER_INLINE double ember_log2(double x) { return log2(x); }
EMBER_INLINE double ember_tanh(double x) { return tanh(x); }
EMBER_INLINE double ember_erf(double x) { return erf(x); }
EMBER_INLINE double ember_erfc(double x) { return erfc(x); }
EMBER_INLINE double ember_sin(double x) { return sin(x); }
EMBER_INLINE double ember_cos(double x) { return cos(x); }
EMBER_INLINE double ember_tan(double x) { return tan(x); }
EMBER_INLINE double ember_atan(double x) { return atan(x); }
EMBER_INLINE double ember_pow(double x, double y) { return pow(x, y); }
EMBER_INLINE double ember_sqrt(double x) { return __builtin_sqrt(x); }

EMBER_INLINE double ember_sigmoid(double x)
{
    double e = exp(-fabs(x));
    return (x >= 0.0 ? 1.0 : e) / (1.0 + e);
}

/* erf_inv and digamma, which build on the kernels above */
#include "ember_special.h"

#endif /* EMBER_MATH_H */
