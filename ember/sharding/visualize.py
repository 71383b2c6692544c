"""``visualize_array_sharding``: a text picture of which device holds which block of a
1-D or 2-D array (as ``jax.debug.visualize_array_sharding``, without colours)."""
from __future__ import annotations

from typing import Any

from ember.errors import EmberValueError

__all__ = ["sharding_layout", "visualize_array_sharding"]


def sharding_layout(x: Any) -> str:
    """The grid of blocks of ``x``; each cell names the devices holding that block."""
    shape = tuple(x.shape)
    if len(shape) not in (1, 2):
        raise EmberValueError(f"visualize_array_sharding shows 1-D and 2-D arrays, got "
                              f"shape {shape}")
    indices = x.sharding.devices_indices_map(shape)
    holders: dict[tuple, list] = {}
    for device, index in indices.items():
        key = tuple(s.indices(n)[:2] for s, n in zip(index, shape))
        holders.setdefault(key, []).append(device)
    rows = sorted({key[0] for key in holders})
    cols = sorted({key[1] for key in holders}) if len(shape) == 2 else [None]

    def label(row, col) -> str:
        devices = holders[(row, col) if col is not None else (row,)]
        ids = ",".join(str(d.id) for d in sorted(devices, key=lambda d: d.id))
        return f"{devices[0].platform.upper()} {ids}"

    if len(shape) == 1:  # one row of blocks, left to right
        rows, cols = [None], rows
        cells = [[label(col, None) for col in cols]]
    else:
        cells = [[label(row, col) for col in cols] for row in rows]
    width = max(len(c) for line in cells for c in line) + 2
    bar = lambda left, mid, right: left + mid.join(["─" * width] * len(cols)) + right  # noqa: E731
    lines = [bar("┌", "┬", "┐")]
    for i, line in enumerate(cells):
        lines.append("│" + "│".join(c.center(width) for c in line) + "│")
        lines.append(bar("├", "┼", "┤") if i < len(cells) - 1 else bar("└", "┴", "┘"))
    return "\n".join(lines)


def visualize_array_sharding(x: Any) -> None:
    print(sharding_layout(x))
