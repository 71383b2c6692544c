"""The native CPU backend: fused kernels rendered as C, compiled by the system C
compiler (``toolchain.py``), one shared object per compiled graph (``backend.py``)."""
