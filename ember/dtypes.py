"""``ember.dtypes``: dtype helpers, as ``jax.dtypes``."""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.core import dtypes as _core
from ember.numpy._dtypes import finfo, iinfo, issubdtype, promote_types, result_type  # noqa: F401
from ember.ops.rules import float0  # noqa: F401

bfloat16 = _core.bfloat16

__all__ = ["bfloat16", "canonicalize_dtype", "finfo", "float0", "iinfo", "issubdtype",
           "promote_types", "result_type"]


def canonicalize_dtype(dtype: Any) -> np.dtype:
    """The dtype Ember actually uses for ``dtype`` (64-bit types narrow without x64)."""
    return _core.canonicalize(dtype)
