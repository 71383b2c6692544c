"""ATen's type promotion, asked of PyTorch itself: Ember values stand in as meta tensors
of the same dtype and rank (rank decides priority: a 0-d tensor yields to a dimensioned
one of the same category, and a Python number to both)."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

from ember.torch.exchange import numpy_dtype, torch_dtype

Kind = ELEMENTWISE_TYPE_PROMOTION_KIND

def is_array(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype")


def _stand_in(value: Any) -> Any:
    if is_array(value):
        return torch.empty((1,) * len(value.shape), dtype=torch_dtype(value.dtype),
                           device="meta")
    return value


def promote(*operands: Any, kind: Kind = Kind.DEFAULT) -> tuple[np.dtype, np.dtype]:
    """``(computation dtype, result dtype)`` of an elementwise ATen op over ``operands``
    (Ember arrays and Python numbers; None is skipped)."""
    stand_ins = [_stand_in(value) for value in operands if value is not None]
    compute, result = elementwise_dtypes(*stand_ins, type_promotion_kind=kind)
    return numpy_dtype(compute), numpy_dtype(result)


def default_dtype(value: Any) -> np.dtype:
    """The dtype ATen gives a tensor made from the Python number ``value``."""
    if isinstance(value, bool):
        return np.dtype(np.bool_)
    if isinstance(value, int):
        return np.dtype(np.int64)
    if isinstance(value, complex):
        return numpy_dtype(torch.complex64)
    return numpy_dtype(torch.get_default_dtype())
