"""Native CPU backend: generated C compiled by the system C compiler, BLAS for matmul."""
