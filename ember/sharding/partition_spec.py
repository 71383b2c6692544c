"""``PartitionSpec`` (``P``): for each array dimension, the mesh axes it is split over."""
from __future__ import annotations

from typing import Any

__all__ = ["P", "PartitionSpec"]


class PartitionSpec(tuple):
    """One entry per leading array dimension: None (not split), a mesh axis name, or a
    tuple of names (split over their product, major to minor). Missing trailing
    entries mean None."""

    def __new__(cls, *entries: Any) -> PartitionSpec:
        normal = []
        for entry in entries:
            if isinstance(entry, list):
                entry = tuple(entry)
            if isinstance(entry, tuple) and len(entry) == 1:
                entry = entry[0]
            normal.append(entry)
        return super().__new__(cls, normal)

    def axes_of(self, dim: int) -> tuple[str, ...]:
        """The mesh axes that split dimension ``dim`` (empty if none)."""
        if dim >= len(self) or self[dim] is None:
            return ()
        entry = self[dim]
        return tuple(entry) if isinstance(entry, tuple) else (entry,)

    def mesh_axes(self) -> tuple[str, ...]:
        return tuple(a for dim in range(len(self)) for a in self.axes_of(dim))

    def __repr__(self) -> str:
        return f"P({', '.join(map(repr, self))})" if len(self) != 1 else f"P({self[0]!r},)"

    def __reduce__(self):
        return (PartitionSpec, tuple(self))


P = PartitionSpec
