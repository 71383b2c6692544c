"""``ember.typing``: the annotations of JAX's ``jax.typing``, for Ember's arrays."""
from __future__ import annotations

from typing import Any, Union

import numpy as np

from ember.runtime.array import Array

# Anything Ember functions take as an array: Ember and NumPy arrays, NumPy scalars and
# Python numbers (as ``jax.typing.ArrayLike``).
ArrayLike = Union[Array, np.ndarray, np.generic, bool, int, float, complex]

# Anything that names a dtype: a NumPy dtype, a scalar type, a string, or an object with
# a ``dtype`` (as ``jax.typing.DTypeLike``).
DTypeLike = Union[str, type[Any], np.dtype, Any]

__all__ = ["ArrayLike", "DTypeLike"]
