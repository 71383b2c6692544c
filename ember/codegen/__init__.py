"""Kernel IR shared by all renderers, and the renderers (C, CUDA C, OpenCL C)."""
