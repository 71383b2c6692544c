"""Pytrees: nested containers of arrays, flattened to leaves and a structure.

Built-in nodes: tuple, list, dict (keys sorted), None (no leaves), namedtuples,
collections.OrderedDict / defaultdict. More via ``register_pytree_node`` or
``register_dataclass``.
"""
from __future__ import annotations

import collections
import dataclasses
from typing import Any, Callable, Hashable, Iterable, NamedTuple


class _NodeType(NamedTuple):
    to_iterable: Callable[[Any], tuple[Iterable[Any], Hashable]]
    from_iterable: Callable[[Hashable, Iterable[Any]], Any]


_registry: dict[type, _NodeType] = {}


def register_pytree_node(cls: type, flatten: Callable, unflatten: Callable) -> None:
    """Register ``cls``: ``flatten(x) -> (children, aux)``, ``unflatten(aux, children) -> x``."""
    if cls in _registry:
        raise ValueError(f"{cls.__name__} is already registered as a pytree node")
    _registry[cls] = _NodeType(flatten, unflatten)


def register_pytree_node_class(cls: type) -> type:
    """Class decorator using the class's ``tree_flatten`` / ``tree_unflatten`` methods."""
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls


def register_dataclass(cls: type | None = None, *, data_fields: Iterable[str] | None = None,
                       meta_fields: Iterable[str] | None = None):
    """Register a dataclass: data fields are children, meta fields are static structure."""

    def register(klass: type) -> type:
        fields = [f.name for f in dataclasses.fields(klass)]
        meta = list(meta_fields or [f.name for f in dataclasses.fields(klass)
                                    if f.metadata.get("static", False)])
        data = list(data_fields or [name for name in fields if name not in meta])

        def flatten(x):
            return [getattr(x, n) for n in data], tuple(getattr(x, n) for n in meta)

        def unflatten(aux, children):
            obj = object.__new__(klass)
            for name, value in zip(data, children):
                object.__setattr__(obj, name, value)
            for name, value in zip(meta, aux):
                object.__setattr__(obj, name, value)
            return obj

        register_pytree_node(klass, flatten, unflatten)
        return klass

    return register if cls is None else register(cls)


register_pytree_node(tuple, lambda t: (t, None), lambda _, c: tuple(c))
register_pytree_node(list, lambda x: (x, None), lambda _, c: list(c))
register_pytree_node(type(None), lambda _: ((), None), lambda _, c: None)


def dict_flatten(d: dict) -> tuple[list, tuple]:
    """A dict's values and keys in pytree order (keys sorted, by type name first)."""
    keys = sorted(d.keys(), key=_sort_key)
    return [d[k] for k in keys], tuple(keys)


def _sort_key(key):
    return (type(key).__name__, key) if not isinstance(key, str) else ("str", key)


register_pytree_node(dict, dict_flatten, lambda keys, c: dict(zip(keys, c)))
register_pytree_node(
    collections.OrderedDict,
    lambda d: (list(d.values()), tuple(d.keys())),
    lambda keys, c: collections.OrderedDict(zip(keys, c)),
)
register_pytree_node(
    collections.defaultdict,
    lambda d: (dict_flatten(d)[0], (d.default_factory, dict_flatten(d)[1])),
    lambda aux, c: collections.defaultdict(aux[0], zip(aux[1], c)),
)


def _is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


class PyTreeDef:
    """The structure of a pytree; hashable, comparable, used in jit cache keys."""

    __slots__ = ("node_type", "aux", "children", "num_leaves", "_hash")

    def __init__(self, node_type, aux, children: tuple["PyTreeDef", ...]):
        self.node_type = node_type  # None for a leaf
        self.aux = aux
        self.children = children
        self.num_leaves = 1 if node_type is None else sum(c.num_leaves for c in children)
        self._hash = hash((node_type, _hashable(aux), children))

    @property
    def num_nodes(self) -> int:
        return 1 + sum(c.num_nodes for c in self.children)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, PyTreeDef) and self._hash == other._hash
                and self.node_type == other.node_type and _eq(self.aux, other.aux)
                and self.children == other.children)

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        if self.node_type is None:
            return "*"
        inner = ", ".join(map(repr, self.children))
        name = getattr(self.node_type, "__name__", str(self.node_type))
        return f"{name}({inner})" if name not in ("tuple", "list") else (
            f"({inner})" if name == "tuple" else f"[{inner}]")

    def unflatten(self, leaves: Iterable[Any]) -> Any:
        return tree_unflatten(self, leaves)


def _hashable(aux: Any) -> Any:
    try:
        hash(aux)
        return aux
    except TypeError:
        return repr(aux)


def _eq(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return repr(a) == repr(b)


def _flatten(tree: Any, leaves: list, is_leaf: Callable | None) -> PyTreeDef:
    if is_leaf is not None and is_leaf(tree):
        leaves.append(tree)
        return PyTreeDef(None, None, ())
    node = _registry.get(type(tree))
    if node is not None:
        children, aux = node.to_iterable(tree)
        subtrees = tuple(_flatten(c, leaves, is_leaf) for c in children)
        return PyTreeDef(type(tree), aux, subtrees)
    if _is_namedtuple(tree):
        subtrees = tuple(_flatten(c, leaves, is_leaf) for c in tree)
        return PyTreeDef(type(tree), None, subtrees)
    leaves.append(tree)
    return PyTreeDef(None, None, ())


def tree_flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None):
    """(leaves, treedef) of a pytree."""
    leaves: list[Any] = []
    treedef = _flatten(tree, leaves, is_leaf)
    return leaves, treedef


def tree_unflatten(treedef: PyTreeDef, leaves: Iterable[Any]) -> Any:
    leaves = list(leaves)
    if len(leaves) != treedef.num_leaves:
        raise ValueError(f"tree structure {treedef} has {treedef.num_leaves} leaves, "
                         f"got {len(leaves)}")
    it = iter(leaves)
    return _build(treedef, it)


def _build(treedef: PyTreeDef, leaves) -> Any:
    if treedef.node_type is None:
        return next(leaves)
    children = [_build(c, leaves) for c in treedef.children]
    node = _registry.get(treedef.node_type)
    if node is not None:
        return node.from_iterable(treedef.aux, children)
    return treedef.node_type(*children)  # namedtuple


def tree_leaves(tree: Any, is_leaf: Callable | None = None) -> list[Any]:
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree: Any, is_leaf: Callable | None = None) -> PyTreeDef:
    return tree_flatten(tree, is_leaf)[1]


def tree_map(fn: Callable, tree: Any, *rest: Any, is_leaf: Callable | None = None) -> Any:
    leaves, treedef = tree_flatten(tree, is_leaf)
    others = [_flatten_up_to(treedef, r) for r in rest]
    return tree_unflatten(treedef, [fn(*xs) for xs in zip(leaves, *others)])


def _flatten_up_to(treedef: PyTreeDef, tree: Any) -> list[Any]:
    """Leaves of ``tree`` cut at ``treedef``'s leaves (its leaves may be subtrees)."""
    out: list[Any] = []

    def walk(td: PyTreeDef, sub: Any) -> None:
        if td.node_type is None:
            out.append(sub)
            return
        if type(sub) is not td.node_type:
            raise ValueError(f"tree structures differ: expected {td.node_type.__name__}, "
                             f"got {type(sub).__name__}")
        node = _registry.get(td.node_type)
        if node is not None:
            children, aux = node.to_iterable(sub)
            children = list(children)
            if not _eq(aux, td.aux) or len(children) != len(td.children):
                raise ValueError(f"tree structures differ: {td} vs a {type(sub).__name__} "
                                 "with other keys or length")
        else:
            children = list(sub)
        for child_def, child in zip(td.children, children):
            walk(child_def, child)

    walk(treedef, tree)
    return out


def flatten_up_to(treedef: PyTreeDef, tree: Any) -> list[Any]:
    return _flatten_up_to(treedef, tree)


def tree_all(tree: Any) -> bool:
    return all(tree_leaves(tree))


def tree_reduce(fn: Callable, tree: Any, initializer: Any = ...) -> Any:
    import functools

    leaves = tree_leaves(tree)
    if initializer is ...:
        return functools.reduce(fn, leaves)
    return functools.reduce(fn, leaves, initializer)


def tree_transpose(outer: PyTreeDef, inner: PyTreeDef, tree: Any) -> Any:
    flat = _flatten_up_to(outer, tree)
    per_inner = [_flatten_up_to(inner, sub) for sub in flat]
    transposed = [tree_unflatten(outer, [row[i] for row in per_inner])
                  for i in range(inner.num_leaves)]
    return tree_unflatten(inner, transposed)


def treedef_children(treedef: PyTreeDef) -> list[PyTreeDef]:
    return list(treedef.children)


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    return treedef.node_type is None
