"""Lowerings of ATen's linear algebra beyond matrix products (``torch.linalg``:
factorizations, solves, inverses, norms) and of distances."""
from __future__ import annotations
