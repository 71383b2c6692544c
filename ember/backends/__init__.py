"""Backends: reference (NumPy oracle), cpu (generated C), cuda, opencl."""
