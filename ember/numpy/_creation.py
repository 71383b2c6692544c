"""Array creation (a first subset)."""
from __future__ import annotations

import numpy as np

from ember.core import dtypes
from ember.numpy._promotion import is_array

__all__ = ["asarray", "array"]


def asarray(obj, dtype=None, *, device=None, copy=None):
    from ember.runtime.array import canonical_host
    from ember.runtime.dispatch import device_put

    if is_array(obj) and dtype is None:
        return obj
    host = canonical_host(obj, dtypes.canonicalize(dtype) if dtype is not None else None)
    return device_put(host, device)


array = asarray
