"""``ember.typeof``: an array's type, with its sharding, as ``jax.typeof``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ember.core import dtypes
from ember.core.abstract import aval_of

__all__ = ["ArrayType", "typeof"]


@dataclass(frozen=True)
class ArrayType:
    """Shape, dtype and sharding; prints as ``f32[8@x,4]`` (dimension 0 split over
    mesh axis 'x')."""

    shape: tuple[int, ...]
    dtype: np.dtype
    sharding: Any = None

    def str_short(self) -> str:
        spec = getattr(self.sharding, "spec", None)
        dims = []
        for dim, size in enumerate(self.shape):
            axes = spec.axes_of(dim) if spec is not None else ()
            named = axes[0] if len(axes) == 1 else f"({','.join(axes)})"
            dims.append(f"{size}@{named}" if axes else str(size))
        return f"{dtypes.short_name(self.dtype)}[{','.join(dims)}]"

    __str__ = str_short

    def __repr__(self) -> str:
        return f"ArrayType({self.str_short()})"


def typeof(x: Any) -> ArrayType:
    aval = aval_of(x)
    return ArrayType(aval.shape, aval.dtype, getattr(x, "_sharding", None))
