"""Abstract values: what tracing knows of an array (shape and dtype, no data)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ember.core import dtypes


@dataclass(frozen=True)
class ShapedArray:
    """The type of every value in a Graph: a static shape and a dtype."""

    shape: tuple[int, ...]
    dtype: np.dtype

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        object.__setattr__(self, "dtype", np.dtype(self.dtype))
        # Avals key every compile cache lookup: hash once. Host steps read the size of
        # their operands on every call: count it once too.
        object.__setattr__(self, "_hash", hash((self.shape, self.dtype)))
        object.__setattr__(self, "_size", math.prod(self.shape))

    def __hash__(self) -> int:
        return self._hash

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return self._size

    @property
    def nbytes(self) -> int:
        return self._size * self.dtype.itemsize

    def update(self, shape: tuple[int, ...] | None = None, dtype=None) -> "ShapedArray":
        return ShapedArray(self.shape if shape is None else shape,
                           self.dtype if dtype is None else dtype)

    def str_short(self) -> str:
        return f"{dtypes.short_name(self.dtype)}[{','.join(map(str, self.shape))}]"

    def describe(self) -> str:
        """For error messages: the short form, then the shape as users type it."""
        return f"{self.str_short()} (shape {self.shape}, dtype {self.dtype.name})"

    def __repr__(self) -> str:
        return f"ShapedArray({self.str_short()})"


def aval_of(value) -> ShapedArray:
    """The abstract value of a concrete value (NumPy array, scalar, Ember Array, tracer)."""
    aval = getattr(value, "aval", None)
    if aval is not None:
        return aval
    if dtypes.is_weak_scalar(value):
        return ShapedArray((), dtypes.python_scalar_dtype(value))
    array = np.asarray(value)
    return ShapedArray(array.shape, dtypes.canonicalize(array.dtype))
