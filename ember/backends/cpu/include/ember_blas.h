/* The BLAS functions generated code calls, declared directly instead of through
 * <cblas.h>, which costs the compiler about 8 ms per translation unit. Two BLAS are
 * supported, both with 32-bit integers (toolchain.blas() picks one):
 *
 *   OpenBLAS from the scipy-openblas32 wheel, linked: symbols prefixed with scipy_.
 *   Intel MKL from the mkl wheel (EMBER_BLAS_MKL): its single dynamic library, whose
 *     path is EMBER_MKL_RT, opened when the module loads instead of linked (linking
 *     it costs the linker about 0.1 s per module: its symbol tables are large). MKL
 *     threads through GNU OpenMP, the runtime generated code uses, unless the user
 *     chose a layer (MKL_THREADING_LAYER); Intel's would be a second one.
 *
 * Generated code calls the BLAS single-threaded from OpenMP's threads: the BLAS's own
 * thread count is set to 1 around the calls (ember_blas_single_threaded).
 *
 * The CBLAS enums are passed as their int values (CblasRowMajor 101, CblasNoTrans 111,
 * CblasTrans 112). Kernels are compiled with -Werror=implicit-function-declaration: a
 * function missing here is a compile error.
 */
#ifndef EMBER_BLAS_H
#define EMBER_BLAS_H

#define EMBER_SGEMM_SIGNATURE(name)                                                     \
  void name(int order, int transa, int transb, int m, int n, int k, float alpha,          \
            const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc)
#define EMBER_DGEMM_SIGNATURE(name)                                                     \
  void name(int order, int transa, int transb, int m, int n, int k, double alpha,         \
            const double *a, int lda, const double *b, int ldb, double beta, double *c,   \
            int ldc)

#ifdef EMBER_BLAS_MKL
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#define EMBER_MKL_THREADING_GNU 3 /* mkl_service.h: INTEL, SEQUENTIAL, PGI, GNU, TBB */

static EMBER_SGEMM_SIGNATURE((*ember_mkl_sgemm));
static EMBER_DGEMM_SIGNATURE((*ember_mkl_dgemm));
static int (*ember_mkl_threads_local)(int);

static void *ember_mkl_symbol(void *library, const char *name) {
  void *symbol = library ? dlsym(library, name) : NULL;
  if (symbol == NULL) { /* the toolchain checked the library: not expected */
    fprintf(stderr, "ember: %s not found in %s: %s\n", name, EMBER_MKL_RT, dlerror());
    abort();
  }
  return symbol;
}

__attribute__((constructor)) static void ember_mkl_open(void) {
  void *library = dlopen(EMBER_MKL_RT, RTLD_NOW | RTLD_LOCAL);
  if (getenv("MKL_THREADING_LAYER") == NULL) {
    int (*set_layer)(int) = (int (*)(int))ember_mkl_symbol(library, "MKL_Set_Threading_Layer");
    set_layer(EMBER_MKL_THREADING_GNU);
  }
  *(void **)&ember_mkl_sgemm = ember_mkl_symbol(library, "cblas_sgemm");
  *(void **)&ember_mkl_dgemm = ember_mkl_symbol(library, "cblas_dgemm");
  /* (MKL's C functions are the capitalized ones; lower-case ones are Fortran's, by reference) */
  *(void **)&ember_mkl_threads_local = ember_mkl_symbol(library, "MKL_Set_Num_Threads_Local");
}

#define EMBER_CBLAS(name) ember_mkl_##name
/* Sets this thread's MKL thread count to 1; returns the setting to restore. */
static inline int ember_blas_single_threaded(void) { return ember_mkl_threads_local(1); }
static inline void ember_blas_restore_threads(int saved) { ember_mkl_threads_local(saved); }

#else
#define EMBER_CBLAS(name) scipy_cblas_##name
EMBER_SGEMM_SIGNATURE(scipy_cblas_sgemm);
EMBER_DGEMM_SIGNATURE(scipy_cblas_dgemm);
int scipy_openblas_get_num_threads(void);
void scipy_openblas_set_num_threads(int num_threads);

/* Sets OpenBLAS to one thread; returns the count to restore afterwards. */
static inline int ember_blas_single_threaded(void) {
  const int saved = scipy_openblas_get_num_threads();
  scipy_openblas_set_num_threads(1);
  return saved;
}
static inline void ember_blas_restore_threads(int saved) {
  scipy_openblas_set_num_threads(saved);
}
#endif

#endif /* EMBER_BLAS_H */
