"""Just enough pytree handling for the harness: nested dicts, tuples and lists of arrays.

The harness must not depend on any framework's tree utilities, since it compares the
outputs of all of them against one NumPy oracle.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator


def tree_map(fn: Callable[[Any], Any], tree: Any) -> Any:
    if isinstance(tree, dict):
        return {key: tree_map(fn, value) for key, value in tree.items()}
    if isinstance(tree, (list, tuple)):
        return type(tree)(tree_map(fn, value) for value in tree)
    return fn(tree)


def tree_items(tree: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(path, leaf) pairs in a canonical order: dict keys sorted, so that two frameworks
    that return the same dict in different key orders still line up."""
    if isinstance(tree, dict):
        for key in sorted(tree):
            yield from tree_items(tree[key], f"{path}[{key!r}]")
    elif isinstance(tree, (list, tuple)):
        for index, value in enumerate(tree):
            yield from tree_items(value, f"{path}[{index}]")
    else:
        yield path or "result", tree
