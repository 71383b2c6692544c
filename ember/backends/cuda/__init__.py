"""The CUDA backend: kernels rendered as CUDA C, compiled by NVRTC for the GPU's
architecture (``nvrtc.py``), launched through the driver API (``driver.py``); DLPack
capsules over device memory (``dlpack.py``).

Without a GPU the backend still compiles (``ember.jit(f, backend="cuda").lower(*args)
.compile()`` gives the kernels' CUDA C and PTX, for sm_90 by default) but runs nothing.

float32 / float64 matrix multiplies run through cuBLAS (``cublas.py``, ctypes over the
``nvidia-cublas`` wheel's library) when it is installed, else as the generated tiled GEMM
kernel that OpenCL also uses (``GpuRenderer.render_gemm``); every program carries the
generated kernel, so kernel counts and sources do not depend on the library.
"""
