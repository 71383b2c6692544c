"""``ember.dlpack``: arrays exchanged through the DLPack protocol, as ``jax.dlpack``."""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.core import dtypes
from ember.numpy import from_dlpack

__all__ = ["from_dlpack", "is_supported_dtype"]


# What goes through DLPack: NumPy's dtypes, and bfloat16 through Ember's own capsules
# (NumPy has no DLPack code for it).
_SUPPORTED = frozenset(np.dtype(t) for t in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
    np.uint64, np.float16, np.float32, np.float64, np.complex64, np.complex128,
    *([dtypes.bfloat16] if dtypes.bfloat16 is not None else [])))


def is_supported_dtype(dtype: Any) -> bool:
    """Whether arrays of ``dtype`` go through DLPack, as ``jax.dlpack``'s."""
    try:
        return np.dtype(dtype) in _SUPPORTED
    except TypeError:
        return False
