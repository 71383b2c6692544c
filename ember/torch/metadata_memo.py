"""What an op's metadata decides, computed once per distinct call: the lazy device's
recording of a step runs PyTorch's meta kernel on every op to learn its outputs' shapes,
strides and dtypes, and that was most of the time a step took to record. A training loop
records the same ops on the same shapes every step, so the results are kept by the op
and its arguments' metadata: tensors by shape, strides and dtype, other arguments by type
and value (``1``, ``1.0`` and ``True`` apart), and Python floats by type alone where the
caller says their value cannot matter (an optimizer's step size changes every step).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["clear", "memo"]

MAX_ENTRIES = 1 << 14  # (then the memo starts again: a loop needs far fewer)
_KEYED_BY_VALUE = (type(None), bool, int, float, str, torch.dtype, torch.device,
                   torch.memory_format, torch.layout)
_entries: dict[tuple, Any] = {}


class _Unkeyable(Exception):
    """An argument the memo cannot key by (an object it does not know)."""


def memo(what: str, func: Any, args: tuple, kwargs: dict, compute: Callable[[], Any],
         floats_by_type: bool = False) -> Any:
    """``compute()``, or what it returned for an earlier call of ``what`` on ``func``
    with arguments of the same metadata. What raises is not kept."""
    try:
        key = (what, func, _key(args, floats_by_type), _key(kwargs, floats_by_type))
    except _Unkeyable:
        return compute()
    found = _entries.get(key, _entries)
    if found is not _entries:
        return found
    result = compute()
    if len(_entries) >= MAX_ENTRIES:
        _entries.clear()
    _entries[key] = result
    return result


def clear() -> None:
    """Forget every result kept."""
    _entries.clear()


def _key(item: Any, floats_by_type: bool) -> Any:
    if isinstance(item, torch.Tensor):
        return (torch.Tensor, tuple(item.shape), item.stride(), item.dtype)
    kind = type(item)
    if kind is float and floats_by_type:
        return float
    if kind in _KEYED_BY_VALUE:
        return (kind, item)
    if kind in (tuple, list):
        return (kind, *(_key(element, floats_by_type) for element in item))
    if kind is dict:
        return (dict, *((name, _key(value, floats_by_type)) for name, value in item.items()))
    raise _Unkeyable(kind)
