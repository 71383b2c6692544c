/* ember_special.h: special functions the C library lacks, for Ember's generated C
 * kernels: the inverse error function and digamma, in double (float versions compute
 * in double and round once, so they are within an ulp of the reference).
 *
 * Special values are those of the reference backend (SciPy's erfinv / digamma):
 * erf_inv(+-1) = +-inf, erf_inv(|y| > 1) = NaN; digamma(+0) = -inf, digamma(-0) = +inf,
 * digamma(negative integer) = NaN, digamma(-inf) = NaN, digamma(inf) = inf; NaN in gives
 * NaN out. Away from digamma's poles and its root (where only the absolute error is
 * small) the relative error is a few 1e-16.
 *
 * These use libm (log, exp, erf, erfc, tan) and loops, so they are not vectorized.
 */
#ifndef EMBER_SPECIAL_H
#define EMBER_SPECIAL_H

#include "ember_libm.h"

#define EMBER__PI 3.14159265358979323846
#define EMBER__2_OVER_SQRTPI 1.12837916709551257390  /* erf'(0) */

/* ------------------------------------------------------------------ erf_inv */

/* A first guess with relative error below 4e-7 on |y| < 1 - 2^-24 (M. Giles,
 * "Approximating the erfinv function", GPU Computing Gems, 2010: the single-precision
 * polynomials in w = -log(1 - y^2)); beyond it (w > 16.6) the extrapolated polynomial
 * is up to 12% low at 1 - 2^-53, which only costs the refinement more steps. */
static inline double ember__erf_inv_guess(double y)
{
    double w = -log((1.0 - y) * (1.0 + y));
    double p;
    if (w < 5.0) {
        w -= 2.5;
        p = 2.81022636e-08;
        p = 3.43273939e-07 + p * w;
        p = -3.5233877e-06 + p * w;
        p = -4.39150654e-06 + p * w;
        p = 0.00021858087 + p * w;
        p = -0.00125372503 + p * w;
        p = -0.00417768164 + p * w;
        p = 0.246640727 + p * w;
        p = 1.50140941 + p * w;
    } else {
        w = sqrt(w) - 3.0;
        p = -0.000200214257;
        p = 0.000100950558 + p * w;
        p = 0.00134934322 + p * w;
        p = -0.00367342844 + p * w;
        p = 0.00573950773 + p * w;
        p = -0.0076224613 + p * w;
        p = 0.00943887047 + p * w;
        p = 1.00167406 + p * w;
        p = 2.83297682 + p * w;
    }
    return p * y;
}

/* erf_inv(y) for y = |y| < 1: Halley steps on erf(x) - y, each of which cubes the
 * relative error near the root, until a step is below an ulp: two steps from Giles'
 * guess; in the extrapolated tail, where the guess is up to 12% low, up to eight. The
 * residual is taken as (1 - y) - erfc(x) for y >= 1/2, where 1 - y is exact and
 * erf(x) - y would cancel. */
static inline double ember__erf_inv_positive(double y, int max_steps)
{
    double x = ember__erf_inv_guess(y);
    for (int step = 0; step < max_steps; ++step) {
        double residual = y < 0.5 ? erf(x) - y : (1.0 - y) - erfc(x);
        double u = residual / (EMBER__2_OVER_SQRTPI * exp(-x * x));  /* Newton step */
        double delta = u / (1.0 + x * u);  /* Halley: erf''/erf' = -2x */
        x -= delta;
        if (fabs(delta) <= 0x1p-53 * x)
            break;
    }
    return x;
}

static inline double ember__erf_inv(double y, int max_steps)
{
    double a = fabs(y);
    if (!(a < 1.0))  /* NaN, |y| > 1: NaN; +-1: +-inf */
        return a == 1.0 ? y * (double)INFINITY : (double)NAN;
    return copysign(ember__erf_inv_positive(a, max_steps), y);
}

static inline double ember_erf_inv(double y) { return ember__erf_inv(y, 10); }

/* Every float is within Giles' range (|y| <= 1 - 2^-24): one step from the guess leaves
 * a relative error far below float's ulp. */
static inline float ember_erf_invf(float y) { return (float)ember__erf_inv(y, 1); }

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
