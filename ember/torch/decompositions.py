"""PyTorch's table of decompositions to core ATen, as the torch.compile backend and the
lazy device use it."""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from torch._decomp import core_aten_decompositions


@functools.cache
def core_aten_table() -> dict[Any, Callable[..., Any]]:
    """The table, read once per process, as inductor reads its own
    (``select_decomp_table``): ``core_aten_decompositions()`` builds a table that collects
    every registered composite op when first read, 45 ms a compile. (AOTAutograd copies
    it into a table of its own; nothing writes to this one.)"""
    return core_aten_decompositions().materialize()
