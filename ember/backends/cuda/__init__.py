"""The CUDA backend: kernels rendered as CUDA C, compiled by NVRTC for the GPU's
architecture (``nvrtc.py``), launched through the driver API (``driver.py``); DLPack
capsules over device memory (``dlpack.py``).

Without a GPU the backend still compiles (``ember.jit(f, backend="cuda").lower(*args)
.compile()`` gives the kernels' CUDA C and PTX, for sm_90 by default) but runs nothing.

Matrix multiplies run as the generated tiled GEMM kernel that OpenCL also uses
(``GpuRenderer.render_gemm``), not cuBLAS: ``cuda.bindings`` has no cuBLAS binding, the
``nvidia-cublas`` wheel is several hundred MB, and a ctypes binding to it could not be
run anywhere Ember is developed or tested (no GPU), while the generated kernel runs on
PoCL in CI. cuBLAS(Lt) through ctypes is the next step where GEMM speed matters.
"""
