"""The OpenCL backend: kernels rendered as OpenCL C, built with pyopencl, one program per
compiled graph; runs on any OpenCL device, and on CPUs through PoCL."""
