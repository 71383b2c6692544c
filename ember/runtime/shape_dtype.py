"""``ShapeDtypeStruct``: a shape and a dtype standing for an array (as JAX's), taken by
``eval_shape``, ``jit(...).lower`` and ``pure_callback``'s result description."""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.core import dtypes
from ember.core.abstract import ShapedArray


class ShapeDtypeStruct:
    """An array's shape and dtype, without data."""

    __slots__ = ("dtype", "shape", "sharding", "weak_type")

    def __init__(self, shape: Any, dtype: Any, *, sharding: Any = None,
                 weak_type: bool = False) -> None:
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.sharding = sharding
        self.weak_type = weak_type

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def aval(self) -> ShapedArray:
        """The abstract value Ember traces with (the dtype canonicalized, as for arrays)."""
        return ShapedArray(self.shape, dtypes.canonicalize(self.dtype))

    @classmethod
    def of(cls, aval: ShapedArray) -> "ShapeDtypeStruct":
        return cls(aval.shape, aval.dtype)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, ShapeDtypeStruct) and self.shape == other.shape
                and self.dtype == other.dtype and self.weak_type == other.weak_type)

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype, self.weak_type))

    def __repr__(self) -> str:
        weak = ", weak_type=True" if self.weak_type else ""
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name}{weak})"
