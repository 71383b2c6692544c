"""Lowerings of ATen's special functions (``torch.special``: Bessel functions, orthogonal
polynomials, gamma-related functions)."""
from __future__ import annotations
