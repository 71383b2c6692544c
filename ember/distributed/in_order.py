"""Reductions of rows in one fixed order: row 0, then row 1 folded in, and so on.

Every process reduces the contributions of a collective in their global order, so the
result is bitwise the same on every process, however the contributions are split among
processes. The C meeting (``meeting.c``) sums small ones the same way.
"""
from __future__ import annotations

import numpy as np

__all__ = ["reduce_rows"]

_REDUCERS = {"sum": np.add, "max": np.maximum, "min": np.minimum}


def reduce_rows(rows: np.ndarray, op: str, out: np.ndarray | None = None) -> np.ndarray:
    """The reduction (``sum``, ``max``, ``min``) of ``rows`` (axis 0) in their order,
    into ``out`` where given."""
    combine = _REDUCERS[op]
    if len(rows) == 1:
        if out is None:
            return np.array(rows[0])
        out[...] = rows[0]
        return out
    # (a fresh array where out is None; a 0-d one where the rows are scalars)
    out = np.asarray(combine(rows[0], rows[1], out=out))
    for row in rows[2:]:
        combine(out, row, out=out)
    return out
