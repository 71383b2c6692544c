"""Pytrees: nested containers of arrays, flattened to leaves and a structure.

Built-in nodes: tuple, list, dict (keys sorted), None (no leaves), namedtuples,
collections.OrderedDict / defaultdict. More via ``register_pytree_node`` or
``register_dataclass``.

Every child has a key (``SequenceKey``, ``DictKey``, ``GetAttrKey``, or
``FlattenedIndexKey`` for nodes registered without keys); a leaf's *path* is the
tuple of keys from the root, as in ``jax.tree_util.tree_flatten_with_path``.
"""
from __future__ import annotations

import collections
import dataclasses
import functools
from typing import Any, Callable, Hashable, Iterable, NamedTuple


# --- keys: how a child is reached from its parent ------------------------------------

@dataclasses.dataclass(frozen=True)
class SequenceKey:
    idx: int

    def __str__(self) -> str:
        return f"[{self.idx!r}]"


@dataclasses.dataclass(frozen=True)
class DictKey:
    key: Hashable

    def __str__(self) -> str:
        return f"[{self.key!r}]"


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
    name: str

    def __str__(self) -> str:
        return f".{self.name}"


@dataclasses.dataclass(frozen=True)
class FlattenedIndexKey:
    key: int

    def __str__(self) -> str:
        return f"[<flat index {self.key}>]"


KeyEntry = Any
KeyPath = tuple[KeyEntry, ...]


def keystr(keys: KeyPath, *, simple: bool = False, separator: str = "") -> str:
    """A path as text: ``['a'][0].x``; with ``simple``, the bare keys joined by
    ``separator`` (``a/0/x`` for ``separator="/"``)."""
    if not simple:
        return separator.join(map(str, keys))
    return separator.join(str(_simple_key(key)) for key in keys)


def _simple_key(key: KeyEntry) -> Any:
    for field in ("idx", "key", "name"):
        if hasattr(key, field):
            return getattr(key, field)
    return key


# --- the registry ----------------------------------------------------------------------

class _NodeType(NamedTuple):
    to_iterable: Callable[[Any], tuple[Iterable[Any], Hashable]]
    from_iterable: Callable[[Hashable, Iterable[Any]], Any]
    # x -> the keys of its children, in ``to_iterable``'s order (None: flat indices)
    child_keys: Callable[[Any], Iterable[KeyEntry]] | None = None


_registry: dict[type, _NodeType] = {}


def register_pytree_node(cls: type, flatten: Callable, unflatten: Callable,
                         flatten_with_keys: Callable | None = None) -> None:
    """Register ``cls``: ``flatten(x) -> (children, aux)``, ``unflatten(aux, children) -> x``;
    optionally ``flatten_with_keys(x) -> ([(key, child), ...], aux)`` for paths."""
    keys = None if flatten_with_keys is None else (
        lambda x: [key for key, _ in flatten_with_keys(x)[0]])
    _register_keyed(cls, flatten, unflatten, keys)


def register_pytree_with_keys(nodetype: type, flatten_with_keys: Callable, unflatten_func:
                              Callable, flatten_func: Callable | None = None) -> None:
    """Register ``nodetype`` by ``flatten_with_keys(x) -> ([(key, child), ...], aux)``."""
    if flatten_func is None:
        def flatten_func(x):
            pairs, aux = flatten_with_keys(x)
            return [child for _, child in pairs], aux
    register_pytree_node(nodetype, flatten_func, unflatten_func, flatten_with_keys)


def _register_keyed(cls: type, flatten: Callable, unflatten: Callable,
                    child_keys: Callable | None) -> None:
    if cls in _registry:
        raise ValueError(f"{cls.__name__} is already registered as a pytree node")
    _registry[cls] = _NodeType(flatten, unflatten, child_keys)


def register_pytree_node_class(cls: type) -> type:
    """Class decorator using the class's ``tree_flatten`` / ``tree_unflatten`` methods."""
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls


def register_pytree_with_keys_class(cls: type) -> type:
    """Class decorator using the class's ``tree_flatten_with_keys`` / ``tree_unflatten``."""
    register_pytree_with_keys(cls, lambda x: x.tree_flatten_with_keys(), cls.tree_unflatten,
                              getattr(cls, "tree_flatten", None))
    return cls


def register_static(cls: type) -> type:
    """Register ``cls`` as a pytree with no leaves: a value of it is static structure
    (it must be hashable), as ``jax.tree_util.register_static``."""
    _register_keyed(cls, lambda x: ((), x), lambda x, _: x, lambda _: [])
    return cls


def register_dataclass(nodetype: type | None = None, data_fields: Iterable[str] | None = None,
                       meta_fields: Iterable[str] | None = None,
                       drop_fields: Iterable[str] = ()):
    """Register a dataclass (as ``jax.tree_util.register_dataclass``): data fields are
    children, meta fields static structure; by default the fields with
    ``metadata={"static": True}`` are meta and the others data. Together they must be the
    ``init=True`` fields less ``drop_fields``. Usable as a decorator."""

    def register(klass: type) -> type:
        data, meta = _dataclass_fields(klass, data_fields, meta_fields, drop_fields)

        def flatten(x):
            return [getattr(x, n) for n in data], tuple(getattr(x, n) for n in meta)

        def unflatten(aux, children):
            obj = object.__new__(klass)
            for name, value in zip(data, children):
                object.__setattr__(obj, name, value)
            for name, value in zip(meta, aux):
                object.__setattr__(obj, name, value)
            return obj

        _register_keyed(klass, flatten, unflatten, lambda x: [GetAttrKey(n) for n in data])
        return klass

    return register if nodetype is None else register(nodetype)


def _dataclass_fields(klass: type, data_fields: Iterable[str] | None,
                      meta_fields: Iterable[str] | None, drop_fields: Iterable[str]
                      ) -> tuple[list[str], list[str]]:
    """The data and meta field names of ``klass``, checked as JAX checks them."""
    if (data_fields is None) != (meta_fields is None):
        raise TypeError("register_dataclass: give both data_fields and meta_fields, or "
                        "neither (then fields with metadata={'static': True} are meta)")
    is_dataclass = dataclasses.is_dataclass(klass)
    if data_fields is None:
        if not is_dataclass:
            raise TypeError(f"register_dataclass: {klass.__name__} is not a dataclass; "
                            "decorate it with @dataclasses.dataclass, or give data_fields "
                            "and meta_fields")
        fields = dataclasses.fields(klass)
        data = [f.name for f in fields if not f.metadata.get("static", False)]
        meta = [f.name for f in fields if f.metadata.get("static", False)]
    else:
        data, meta = list(data_fields), list(meta_fields)
    if overlap := set(data) & set(meta):
        raise ValueError(f"register_dataclass: fields {sorted(overlap)} are both data and meta")
    if is_dataclass:
        init = {f.name for f in dataclasses.fields(klass) if f.init} - set(drop_fields)
        if set(data) | set(meta) != init:
            raise ValueError(
                f"register_dataclass: data_fields and meta_fields must be the init=True "
                f"fields of {klass.__name__}; missing {sorted(init - set(data) - set(meta))}"
                f" (add them to drop_fields to leave them out), unexpected "
                f"{sorted(set(data) | set(meta) - init)}")
    return data, meta


def _sequence_keys(x: Any) -> list[SequenceKey]:
    return [SequenceKey(i) for i in range(len(x))]


def _dict_keys(d: dict) -> list[DictKey]:
    return [DictKey(k) for k in dict_flatten(d)[1]]


_register_keyed(tuple, lambda t: (t, None), lambda _, c: tuple(c), _sequence_keys)
_register_keyed(list, lambda x: (x, None), lambda _, c: list(c), _sequence_keys)
_register_keyed(type(None), lambda _: ((), None), lambda _, c: None, lambda _: [])


def dict_flatten(d: dict) -> tuple[list, tuple]:
    """A dict's values and keys in pytree order (keys sorted, by type name first)."""
    keys = sorted(d.keys(), key=_sort_key)
    return [d[k] for k in keys], tuple(keys)


def _sort_key(key):
    return (type(key).__name__, key) if not isinstance(key, str) else ("str", key)


_register_keyed(dict, dict_flatten, lambda keys, c: dict(zip(keys, c)), _dict_keys)
_register_keyed(
    collections.OrderedDict,
    lambda d: (list(d.values()), tuple(d.keys())),
    lambda keys, c: collections.OrderedDict(zip(keys, c)),
    lambda d: [DictKey(k) for k in d],
)
_register_keyed(
    collections.defaultdict,
    lambda d: (dict_flatten(d)[0], (d.default_factory, dict_flatten(d)[1])),
    lambda aux, c: collections.defaultdict(aux[0], zip(aux[1], c)),
    _dict_keys,
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


def _flatten(tree: Any, leaves: list, is_leaf: Callable | None,
             path: KeyPath | None = None, leaf_takes_path: bool = False) -> PyTreeDef:
    """The structure of ``tree``; appends its leaves to ``leaves`` (as ``(path, leaf)``
    pairs when ``path`` is given: the path of ``tree`` itself)."""
    if is_leaf is not None and (is_leaf(path, tree) if leaf_takes_path else is_leaf(tree)):
        leaves.append(tree if path is None else (path, tree))
        return PyTreeDef(None, None, ())
    node = _registry.get(type(tree))
    if node is not None:
        children, aux = node.to_iterable(tree)
        node_type = type(tree)
    elif _is_namedtuple(tree):
        children, aux, node_type = tree, None, type(tree)
    else:
        leaves.append(tree if path is None else (path, tree))
        return PyTreeDef(None, None, ())
    if path is None:
        subtrees = tuple(_flatten(c, leaves, is_leaf) for c in children)
    else:
        children = list(children)
        keys = _child_keys(node, tree, len(children))
        subtrees = tuple(_flatten(c, leaves, is_leaf, (*path, key), leaf_takes_path)
                         for key, c in zip(keys, children))
    return PyTreeDef(node_type, aux, subtrees)


def _child_keys(node: _NodeType | None, tree: Any, count: int) -> list[KeyEntry]:
    if node is None:  # a namedtuple
        return [GetAttrKey(name) for name in type(tree)._fields]
    if node.child_keys is None:
        return [FlattenedIndexKey(i) for i in range(count)]
    return list(node.child_keys(tree))


def tree_flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None):
    """(leaves, treedef) of a pytree."""
    leaves: list[Any] = []
    treedef = _flatten(tree, leaves, is_leaf)
    return leaves, treedef


def tree_flatten_with_path(tree: Any, is_leaf: Callable[..., bool] | None = None,
                           is_leaf_takes_path: bool = False
                           ) -> tuple[list[tuple[KeyPath, Any]], PyTreeDef]:
    """``([(path, leaf), ...], treedef)``: each leaf with the keys that reach it."""
    pairs: list[Any] = []
    treedef = _flatten(tree, pairs, is_leaf, (), is_leaf_takes_path)
    return pairs, treedef


def tree_leaves_with_path(tree: Any, is_leaf: Callable[..., bool] | None = None,
                          is_leaf_takes_path: bool = False) -> list[tuple[KeyPath, Any]]:
    return tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)[0]


def tree_map_with_path(fn: Callable, tree: Any, *rest: Any,
                       is_leaf: Callable[..., bool] | None = None,
                       is_leaf_takes_path: bool = False) -> Any:
    """``tree_map`` where ``fn`` also receives each leaf's path first."""
    pairs, treedef = tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)
    others = [_flatten_up_to(treedef, r) for r in rest]
    return tree_unflatten(treedef, [fn(path, leaf, *xs)
                                    for (path, leaf), *xs in zip(pairs, *others)])


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


def broadcast_prefix(prefix: Any, tree: Any,
                     is_leaf: Callable[[Any], bool] | None = None) -> list[Any]:
    """One leaf of ``prefix`` (a pytree prefix of ``tree``: vmap's in_axes, shard_map's
    specs) per leaf of ``tree``; ValueError when ``prefix`` is not a prefix of it."""
    leaves, treedef = tree_flatten(prefix, is_leaf=is_leaf)
    return [leaf for leaf, sub in zip(leaves, flatten_up_to(treedef, tree))
            for _ in range(tree_flatten(sub)[1].num_leaves)]


def tree_all(tree: Any, *, is_leaf: Callable[[Any], bool] | None = None) -> bool:
    return all(tree_leaves(tree, is_leaf))


def tree_reduce(fn: Callable, tree: Any, initializer: Any = ...,
                is_leaf: Callable[[Any], bool] | None = None) -> Any:
    leaves = tree_leaves(tree, is_leaf)
    if initializer is ...:
        return functools.reduce(fn, leaves)
    return functools.reduce(fn, leaves, initializer)


def tree_reduce_associative(operation: Callable, tree: Any, *, identity: Any = ...,
                            is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """Reduce the leaves pairwise, as a balanced tree (fewer sequential steps than
    ``tree_reduce`` for an associative ``operation``)."""
    leaves = tree_leaves(tree, is_leaf)
    if not leaves:
        if identity is ...:
            raise TypeError("Must specify identity for parallel reduction of empty sequence.")
        return identity
    while len(leaves) > 1:
        pairs = [operation(a, b) for a, b in zip(leaves[::2], leaves[1::2])]
        leaves = pairs + leaves[len(pairs) * 2:]
    return leaves[0]


def tree_broadcast(prefix_tree: Any, full_tree: Any,
                   is_leaf: Callable[[Any], bool] | None = None) -> Any:
    """``prefix_tree`` with each leaf repeated over the subtree of ``full_tree`` it
    stands for: ``tree_broadcast([1, 2], [(a, b), c]) == [(1, 1), 2]``."""
    prefix_leaves, prefix_def = tree_flatten(prefix_tree, is_leaf)
    subtrees = _flatten_up_to(prefix_def, full_tree)
    return tree_unflatten(prefix_def, [
        tree_map(lambda _, leaf=leaf: leaf, sub, is_leaf=is_leaf)
        for leaf, sub in zip(prefix_leaves, subtrees)])


def tree_transpose(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None,
                   pytree_to_transpose: Any) -> Any:
    """Turn an outer structure of inner structures into an inner one of outer ones
    (``inner_treedef`` None: the structure of the first outer leaf)."""
    flat = _flatten_up_to(outer_treedef, pytree_to_transpose)
    if inner_treedef is None:
        inner_treedef = tree_structure(flat[0]) if flat else PyTreeDef(tuple, None, ())
    per_inner = [_flatten_up_to(inner_treedef, sub) for sub in flat]
    transposed = [tree_unflatten(outer_treedef, [row[i] for row in per_inner])
                  for i in range(inner_treedef.num_leaves)]
    return tree_unflatten(inner_treedef, transposed)


class Partial(functools.partial):
    """A ``functools.partial`` that is a pytree: the bound arguments are its children,
    the function is static structure, so it can be passed to and returned from jitted
    functions (as ``jax.tree_util.Partial``)."""


register_pytree_node(
    Partial,
    lambda p: ((p.args, p.keywords), p.func),
    lambda func, children: Partial(func, *children[0], **children[1]),
)


def all_leaves(iterable: Iterable[Any], is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """True if every element of ``iterable`` is a leaf. With ``is_leaf``, as JAX: the
    elements must be the leaves of the list of them (a list that ``is_leaf`` takes
    whole is not)."""
    items = list(iterable)
    if is_leaf is None:
        return all(tree_structure(x).node_type is None for x in items)
    leaves = tree_leaves(items, is_leaf)
    return len(leaves) == len(items) and all(a is b for a, b in zip(leaves, items))


def treedef_tuple(treedefs: Iterable[PyTreeDef]) -> PyTreeDef:
    """The structure of a tuple whose elements have the structures ``treedefs``."""
    return PyTreeDef(tuple, None, tuple(treedefs))


def treedef_children(treedef: PyTreeDef) -> list[PyTreeDef]:
    return list(treedef.children)


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    return treedef.node_type is None
