/* The BLAS functions generated code calls (the scipy-openblas32 wheel: 32-bit integers,
 * symbols prefixed with scipy_), declared directly instead of through <cblas.h>, which
 * costs the compiler about 8 ms per translation unit. The CBLAS enums are passed as
 * their int values (CblasRowMajor 101, CblasNoTrans 111, CblasTrans 112). Kernels are
 * compiled with -Werror=implicit-function-declaration: a function missing here is a
 * compile error.
 */
#ifndef EMBER_BLAS_H
#define EMBER_BLAS_H

void scipy_cblas_sgemm(int order, int transa, int transb, int m, int n, int k, float alpha,
                       const float *a, int lda, const float *b, int ldb, float beta,
                       float *c, int ldc);
void scipy_cblas_dgemm(int order, int transa, int transb, int m, int n, int k, double alpha,
                       const double *a, int lda, const double *b, int ldb, double beta,
                       double *c, int ldc);
int scipy_openblas_get_num_threads(void);
void scipy_openblas_set_num_threads(int num_threads);

#endif /* EMBER_BLAS_H */
