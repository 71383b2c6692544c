"""``ember.dlpack``: arrays exchanged through the DLPack protocol, as ``jax.dlpack``."""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.numpy import from_dlpack

__all__ = ["from_dlpack", "is_supported_dtype"]


# What NumPy, which holds Ember's host buffers, exchanges through DLPack (not bfloat16).
_SUPPORTED = frozenset(np.dtype(t) for t in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
    np.uint64, np.float16, np.float32, np.float64, np.complex64, np.complex128))


def is_supported_dtype(dtype: Any) -> bool:
    """Whether arrays of ``dtype`` go through DLPack, as ``jax.dlpack``'s, but for
    bfloat16 (JAX's device buffers export it; Ember's host buffers are NumPy's)."""
    try:
        return np.dtype(dtype) in _SUPPORTED
    except TypeError:
        return False
