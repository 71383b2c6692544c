/* The C library's math functions that generated kernels may call, declared directly
 * (C11 7.1.4 allows it) instead of through <math.h>: glibc's header declares every
 * function for six floating types and costs the compiler about 8 ms per translation
 * unit. gcc knows these names as builtins either way: the code is the same. Kernels are
 * compiled with -Werror=implicit-function-declaration, so a function missing here is a
 * compile error, never a call through a guessed prototype.
 */
#ifndef EMBER_LIBM_H
#define EMBER_LIBM_H

#define INFINITY (__builtin_inff())
#define NAN (__builtin_nanf(""))

double acos(double);
float acosf(float);
double acosh(double);
float acoshf(float);
double asin(double);
float asinf(float);
double asinh(double);
float asinhf(float);
double atan(double);
float atanf(float);
double atanh(double);
float atanhf(float);
double cbrt(double);
float cbrtf(float);
double ceil(double);
float ceilf(float);
double cos(double);
float cosf(float);
double cosh(double);
float coshf(float);
double erf(double);
float erff(float);
double erfc(double);
float erfcf(float);
double exp(double);
float expf(float);
double exp2(double);
float exp2f(float);
double expm1(double);
float expm1f(float);
double fabs(double);
float fabsf(float);
double floor(double);
float floorf(float);
double lgamma(double);
float lgammaf(float);
double log(double);
float logf(float);
double log10(double);
float log10f(float);
double log1p(double);
float log1pf(float);
double log2(double);
float log2f(float);
double logb(double);
float logbf(float);
double nearbyint(double);
float nearbyintf(float);
double rint(double);
float rintf(float);
double round(double);
float roundf(float);
double sin(double);
float sinf(float);
double sinh(double);
float sinhf(float);
double sqrt(double);
float sqrtf(float);
double tan(double);
float tanf(float);
double tanh(double);
float tanhf(float);
double tgamma(double);
float tgammaf(float);
double trunc(double);
float truncf(float);
double atan2(double, double);
float atan2f(float, float);
double copysign(double, double);
float copysignf(float, float);
double fdim(double, double);
float fdimf(float, float);
double fmax(double, double);
float fmaxf(float, float);
double fmin(double, double);
float fminf(float, float);
double fmod(double, double);
float fmodf(float, float);
double hypot(double, double);
float hypotf(float, float);
double nextafter(double, double);
float nextafterf(float, float);
double pow(double, double);
float powf(float, float);
double remainder(double, double);
float remainderf(float, float);
double fma(double, double, double);
float fmaf(float, float, float);
double frexp(double, int *);
float frexpf(float, int *);
double ldexp(double, int);
float ldexpf(float, int);
double scalbn(double, int);
float scalbnf(float, int);
int ilogb(double);
int ilogbf(float);

#endif /* EMBER_LIBM_H */
