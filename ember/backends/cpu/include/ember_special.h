/* ember_special.h: special functions the C library lacks, for Ember's generated C
 * kernels: the inverse error function and digamma.
 *
 * Special values are those of the reference backend (SciPy's erfinv / digamma):
 * erf_inv(+-1) = +-inf, erf_inv(|y| > 1) = NaN; digamma(+0) = -inf, digamma(-0) = +inf,
 * digamma(negative integer) = NaN, digamma(-inf) = NaN, digamma(inf) = inf; NaN in gives
 * NaN out. Away from digamma's poles and its root (where only the absolute error is
 * small) the relative error of the double versions is a few 1e-16; the float versions
 * are within an ulp of the reference.
 *
 * The double versions and digammaf use libm (log, exp, erf, erfc, tan) and loops, so they
 * are not vectorized (digammaf computes in double and rounds once). erf_invf is
 * straight-line code on ember_math.h's double kernels and vectorizes like ember_math.h's
 * functions.
 */
#ifndef EMBER_SPECIAL_H
#define EMBER_SPECIAL_H

#include "ember_math.h"  /* (which includes this file at its end) */

#define EMBER__PI 3.14159265358979323846
#define EMBER__SQRTPI 1.77245385090551602730
#define EMBER__2_OVER_SQRTPI 1.12837916709551257390  /* erf'(0) */
#define EMBER__LN2 0.69314718055994530942

/* ------------------------------------------------------------------ erf_inv */

/* Giles' guess for erf_inv(y) / y as a function of w = -log(1 - y^2) (M. Giles,
 * "Approximating the erfinv function", GPU Computing Gems, 2010: the single-precision
 * polynomials, relative error below 4e-7 for w <= 16.6, i.e. |y| <= 1 - 2^-24; beyond
 * it the extrapolated polynomial is up to 12% low at 1 - 2^-53, which only costs the
 * double version more steps). Both branches are evaluated and one is selected, so that
 * the float version vectorizes. */
EMBER_INLINE double ember__erf_inv_ratio(double w)
{
    double c = w - 2.5;
    double p = 2.81022636e-08;
    p = 3.43273939e-07 + p * c;
    p = -3.5233877e-06 + p * c;
    p = -4.39150654e-06 + p * c;
    p = 0.00021858087 + p * c;
    p = -0.00125372503 + p * c;
    p = -0.00417768164 + p * c;
    p = 0.246640727 + p * c;
    p = 1.50140941 + p * c;
    double t = __builtin_sqrt(w) - 3.0;
    double q = -0.000200214257;
    q = 0.000100950558 + q * t;
    q = 0.00134934322 + q * t;
    q = -0.00367342844 + q * t;
    q = 0.00573950773 + q * t;
    q = -0.0076224613 + q * t;
    q = 0.00943887047 + q * t;
    q = 1.00167406 + q * t;
    q = 2.83297682 + q * t;
    return w < 5.0 ? p : q;
}

/* erf_inv(y) for y = |y| < 1: Halley steps on erf(x) - y, each of which cubes the
 * relative error near the root, until a step is below an ulp: two steps from Giles'
 * guess; in the extrapolated tail, where the guess is up to 12% low, up to eight. The
 * residual is taken as (1 - y) - erfc(x) for y >= 1/2, where 1 - y is exact and
 * erf(x) - y would cancel. */
static inline double ember__erf_inv_positive(double y)
{
    double x = y * ember__erf_inv_ratio(-log((1.0 - y) * (1.0 + y)));
    for (int step = 0; step < 10; ++step) {
        double residual = y < 0.5 ? erf(x) - y : (1.0 - y) - erfc(x);
        double u = residual / (EMBER__2_OVER_SQRTPI * exp(-x * x));  /* Newton step */
        double delta = u / (1.0 + x * u);  /* Halley: erf''/erf' = -2x */
        x -= delta;
        if (fabs(delta) <= 0x1p-53 * x)
            break;
    }
    return x;
}

static inline double ember_erf_inv(double y)
{
    double a = fabs(y);
    if (!(a < 1.0))  /* NaN, |y| > 1: NaN; +-1: +-inf */
        return a == 1.0 ? y * (double)INFINITY : (double)NAN;
    return copysign(ember__erf_inv_positive(a), y);
}

/* erf(x) for 0 <= x <= 2 to about 3e-16 absolute: the Taylor series
 * 2/sqrt(pi) sum (-1)^n x^(2n+1) / (n! (2n + 1)) up to n = 31 (the next term is below
 * 1e-18; the largest, at n = 3, is 1.5). ember_math.h's erf kernels (2e-10 and 3e-9
 * relative) are enough for erff but would leave erf_invf's Newton step off by up to 1e-9
 * relative, which rounds to the wrong float about once in 200. */
EMBER_INLINE double ember__erf_taylor_d(double x)
{
    double s = x * x;
    double p = -1.930357208815108e-36;
    p = p * s + 6.180307588222796e-35;
    p = p * s - 1.9169428621097826e-33;
    p = p * s + 5.754191643982172e-32;
    p = p * s - 1.669761793417372e-30;
    p = p * s + 4.6784835155184856e-29;
    p = p * s - 1.2641078988989164e-27;
    p = p * s + 3.289260349175752e-26;
    p = p * s - 8.230149299214221e-25;
    p = p * s + 1.977064753877905e-23;
    p = p * s - 4.5518467589282e-22;
    p = p * s + 1.0025164934907719e-20;
    p = p * s - 2.107855191442136e-19;
    p = p * s + 4.221407288807088e-18;
    p = p * s - 8.032735012415773e-17;
    p = p * s + 1.4483264643598138e-15;
    p = p * s - 2.466827010264457e-14;
    p = p * s + 3.9554295164585257e-13;
    p = p * s - 5.9477940136376354e-12;
    p = p * s + 8.35070279514724e-11;
    p = p * s - 1.0892221037148573e-09;
    p = p * s + 1.3122532963802806e-08;
    p = p * s - 1.4503852223150468e-07;
    p = p * s + 1.4589169000933706e-06;
    p = p * s - 1.3227513227513228e-05;
    p = p * s + 0.00010683760683760684;
    p = p * s - 0.0007575757575757576;
    p = p * s + 0.004629629629629629;
    p = p * s - 0.023809523809523808;
    p = p * s + 0.1;
    p = p * s - 0.3333333333333333;
    p = p * s + 1.0;
    return EMBER__2_OVER_SQRTPI * x * p;
}

/* float erf_inv, vectorizable (straight-line code on ember_math.h's double kernels):
 * Giles' guess, within 4e-7 relative for every float below 1, then one Newton step on
 * erf(x) - |y| in double, which squares that error (|erf''/erf'| = 2x: to below 1e-12).
 * What is left is the residual's own error: below |y| = 0.995 (x < 2) the Taylor erf
 * makes it negligible, and x rounds to the same float as libm-based code; above, the
 * residual is (1 - |y|) - erfc(x) (1 - |y| is exact, erf(x) - |y| would cancel) with
 * ember_math.h's erfc (3e-9 relative), which leaves x within 1e-9 relative: one float in
 * a few hundred there rounds to a neighbour, an ulp away. */
EMBER_INLINE float ember_erf_invf(float y)
{
    float a = ember__absf(y);
    double ad = a < 1.0f ? (double)a : 0.0;  /* NaN, |y| >= 1: replaced below */
    /* 1 - a^2 is exact in double; its rounding to float moves w by at most 2^-24 */
    double w = -EMBER__LN2 * ember__log2_d((float)((1.0 - ad) * (1.0 + ad)));
    double x = ad * ember__erf_inv_ratio(w);
    double residual = ad < 0.995 ? ember__erf_taylor_d(x) - ad : (1.0 - ad) - ember__erfc_d(x);
    x -= residual * (0.5 * EMBER__SQRTPI) * ember__exp2_d(x * x * EMBER__LOG2E);
    float r = a < 1.0f ? (float)x : a == 1.0f ? EMBER__INFF : EMBER__NANF;
    return ember__with_sign_of(r, y);  /* erf_inv(-0) = -0 */
}

/* ------------------------------------------------------------------ digamma */

/* digamma(x) for x >= 10: log x - 1/(2x) - sum B_2k / (2k x^2k), up to k = 7 (the next
 * term is below 3e-17 of the result). */
static inline double ember__digamma_series(double x)
{
    double f = 1.0 / (x * x);
    double s = 1.0 / 12 - f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240 - f * (
        1.0 / 132 - f * (691.0 / 32760 - f * (1.0 / 12))))));
    return log(x) - 0.5 / x - f * s;
}

static inline double ember_digamma(double x)
{
    if (x != x || x == -(double)INFINITY)
        return (double)NAN;
    if (x == 0.0)
        return -1.0 / x;  /* the pole at 0: -inf from the right, +inf from the left */
    double shift = 0.0;
    if (x < 0.0) {
        /* reflection: digamma(x) = digamma(1 - x) - pi / tan(pi x); tan has period pi, so
         * its argument is reduced exactly to pi (x - n) first */
        double n = rint(x);
        if (x == n)
            return (double)NAN;  /* the poles at negative integers */
        shift = -EMBER__PI / tan(EMBER__PI * (x - n));
        x = 1.0 - x;
    }
    while (x < 10.0) {  /* digamma(x) = digamma(x + 1) - 1/x */
        shift -= 1.0 / x;
        x += 1.0;
    }
    return shift + ember__digamma_series(x);  /* (x = inf: inf) */
}

static inline float ember_digammaf(float x) { return (float)ember_digamma(x); }

#endif /* EMBER_SPECIAL_H */
