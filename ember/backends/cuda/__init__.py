"""The CUDA backend: kernels rendered as CUDA C, compiled by NVRTC for the GPU's
architecture (``nvrtc.py``), launched through the driver API (``driver.py``).

Without a GPU the backend still compiles (``ember.jit(f, backend="cuda").lower(*args)
.compile()`` gives the kernels' CUDA C and PTX, for sm_90 by default) but runs nothing.
"""
