"""``ember.tree`` and the path API of ``ember.tree_util``, compared with JAX where installed."""
from __future__ import annotations

import collections
import dataclasses
import functools
import operator

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import tree, tree_util

Point = collections.namedtuple("Point", "x y")


class Box:
    """A node registered without keys: its children get flat indices."""

    def __init__(self, a, b):
        self.a, self.b = a, b


tree_util.register_pytree_node(Box, lambda box: ((box.a, box.b), None),
                               lambda _, children: Box(*children))


@dataclasses.dataclass
class Params:
    w: object
    b: object
    name: str = dataclasses.field(default="layer", metadata={"static": True})


tree_util.register_dataclass(Params)


def _example():
    return {"b": [1.0, (2.0, 3.0)], "a": Point(4.0, None), "c": Box(5.0, 6.0),
            "d": collections.OrderedDict(z=7.0, y=8.0)}


def test_tree_namespace_is_tree_util():
    assert tree.map is tree_util.tree_map
    assert tree.flatten is tree_util.tree_flatten
    assert ember.tree is tree


def test_flatten_unflatten_round_trip():
    leaves, treedef = tree.flatten(_example())
    assert leaves == [4.0, 1.0, 2.0, 3.0, 5.0, 6.0, 7.0, 8.0]
    rebuilt = tree.unflatten(treedef, leaves)
    assert tree.structure(rebuilt) == treedef
    assert tree.leaves(rebuilt) == leaves


def test_map_reduce_all():
    doubled = tree.map(lambda x: 2 * x, {"a": [1, 2], "b": 3})
    assert doubled == {"a": [2, 4], "b": 6}
    assert tree.map(operator.add, (1, [2]), (10, [20])) == (11, [22])
    assert tree.reduce(operator.add, {"a": [1, 2], "b": 3}) == 6
    assert tree.reduce(operator.add, [[1], [2]], 10) == 13
    assert tree.all([True, (True, 1)]) and not tree.all([True, (0,)])
    assert tree.reduce(lambda a, b: a + len(b), [[1, 2], [3]], 0,
                       is_leaf=lambda x: isinstance(x, list) and not isinstance(x[0], list)) == 3


def test_paths_name_each_key_type():
    pairs, _ = tree.flatten_with_path(_example())
    texts = [tree_util.keystr(path) for path, _ in pairs]
    assert texts == ["['a'].x", "['b'][0]", "['b'][1][0]", "['b'][1][1]",
                     "['c'][<flat index 0>]", "['c'][<flat index 1>]", "['d']['z']", "['d']['y']"]
    assert [leaf for _, leaf in pairs] == tree.leaves(_example())
    path = pairs[0][0]
    assert path == (tree_util.DictKey("a"), tree_util.GetAttrKey("x"))
    assert tree_util.keystr(path, simple=True, separator="/") == "a/x"


def test_map_with_path_and_dataclass_paths():
    params = Params(np.ones(2), np.zeros(1))
    names = tree.map_with_path(lambda p, x: tree_util.keystr(p), params)
    assert (names.w, names.b, names.name) == (".w", ".b", "layer")
    assert tree.leaves_with_path([3]) == [((tree_util.SequenceKey(0),), 3)]
    summed = tree_util.tree_map_with_path(lambda p, x, y: x + y, [1, 2], [10, 20])
    assert summed == [11, 22]


def test_is_leaf_takes_path():
    pairs, _ = tree.flatten_with_path({"a": [1, 2], "b": [3]}, is_leaf_takes_path=True,
                                      is_leaf=lambda path, x: path == (tree_util.DictKey("a"),))
    assert pairs[0] == ((tree_util.DictKey("a"),), [1, 2])
    assert len(pairs) == 2


def test_register_with_keys():
    class Pair:
        def __init__(self, left, right):
            self.left, self.right = left, right

    tree_util.register_pytree_with_keys(
        Pair, lambda p: (((tree_util.GetAttrKey("left"), p.left),
                          (tree_util.GetAttrKey("right"), p.right)), None),
        lambda _, children: Pair(*children))
    pairs, treedef = tree.flatten_with_path(Pair(1, 2))
    assert [tree_util.keystr(p) for p, _ in pairs] == [".left", ".right"]
    assert tree.unflatten(treedef, [3, 4]).right == 4


def test_register_dataclass_explicit_fields_and_decorator():
    @functools.partial(tree_util.register_dataclass, data_fields=["a"], meta_fields=["n"])
    @dataclasses.dataclass
    class Explicit:
        a: float
        n: int

    leaves, treedef = tree.flatten(Explicit(1.0, 3))
    assert leaves == [1.0]
    assert tree.unflatten(treedef, [2.0]) == Explicit(2.0, 3)
    assert tree.structure(Explicit(1.0, 3)) != tree.structure(Explicit(1.0, 4))
    with pytest.raises(TypeError, match="not a dataclass"):
        tree_util.register_dataclass(Box)


def test_register_dataclass_drop_fields_match_jax():
    def define(register):
        @dataclasses.dataclass
        class Cached:
            value: float
            scale: int = dataclasses.field(default=2, metadata={"static": True})
            cache: object = None

        register(Cached, data_fields=["value"], meta_fields=["scale"], drop_fields=["cache"])
        return Cached

    ours = define(tree_util.register_dataclass)
    leaves, treedef = tree.flatten(ours(1.0, 3, cache="dropped"))
    assert leaves == [1.0]
    rebuilt = tree.unflatten(treedef, [5.0])
    assert (rebuilt.value, rebuilt.scale) == (5.0, 3)

    @dataclasses.dataclass
    class Pair:
        a: float
        b: float

    with pytest.raises(ValueError, match=r"missing \['b'\]"):
        tree_util.register_dataclass(Pair, data_fields=["a"], meta_fields=[])
    with pytest.raises(TypeError, match="both"):
        tree_util.register_dataclass(Pair, data_fields=["a", "b"])
    jax = pytest.importorskip("jax")
    theirs = define(jax.tree_util.register_dataclass)
    assert jax.tree.leaves(theirs(1.0, 3, cache="dropped")) == leaves


def test_static_nodes_and_small_helpers():
    @tree_util.register_static
    class Activation:
        def __init__(self, name):
            self.name = name

        def __eq__(self, other):
            return isinstance(other, Activation) and other.name == self.name

        def __hash__(self):
            return hash(self.name)

    value = {"act": Activation("relu"), "w": 1.0}
    assert tree.leaves(value) == [1.0]
    assert tree.structure(value) != tree.structure({"act": Activation("gelu"), "w": 1.0})
    assert tree.unflatten(tree.structure(value), [2.0])["act"].name == "relu"
    assert tree_util.all_leaves([1, 2.0]) and not tree_util.all_leaves([1, [2]])
    assert tree_util.all_leaves([[1], (2,)], is_leaf=lambda x: isinstance(x, tuple)) is False
    assert tree_util.all_leaves([(1,), (2,)], is_leaf=lambda x: isinstance(x, tuple))
    joined = tree_util.treedef_tuple([tree.structure(1), tree.structure((1, 2))])
    assert joined == tree.structure((0, (0, 0)))

    @tree_util.register_pytree_with_keys_class
    class Named:
        def __init__(self, x):
            self.x = x

        def tree_flatten_with_keys(self):
            return ((tree_util.GetAttrKey("x"), self.x),), None

        @classmethod
        def tree_unflatten(cls, aux, children):
            return cls(*children)

    assert [tree_util.keystr(p) for p, _ in tree.leaves_with_path(Named(3))] == [".x"]
    assert tree.map(lambda v: v + 1, Named(3)).x == 4


def test_partial_is_a_pytree_through_jit():
    scale = tree_util.Partial(lambda s, x: s * x, jnp.asarray(3.0))
    leaves, _ = tree.flatten(scale)
    assert len(leaves) == 1

    @ember.jit
    def apply(fn, x):
        return fn(x)

    np.testing.assert_allclose(np.asarray(apply(scale, jnp.asarray([1.0, 2.0]))), [3.0, 6.0])
    assert scale(2.0) == 6.0


def test_transpose_infers_inner():
    outer = tree.structure([0, 0])
    assert tree.transpose(outer, None, [(1, 2), (3, 4)]) == ([1, 3], [2, 4])
    inner = tree.structure((0, 0))
    assert tree_util.tree_transpose(outer, inner, [(1, 2), (3, 4)]) == ([1, 3], [2, 4])


def test_broadcast_and_reduce_associative():
    assert tree.broadcast([1, {"a": 2}], [(3, 4), {"a": [5, 6]}]) == [(1, 1), {"a": [2, 2]}]
    assert tree.broadcast(0, {"a": 1, "b": (2, 3)}) == {"a": 0, "b": (0, 0)}
    order = []

    def combine(a, b):
        order.append((a, b))
        return a + b

    assert tree.reduce_associative(combine, [[1, 2], (3, 4, 5)]) == 15
    assert order[:2] == [(1, 2), (3, 4)]  # pairs first: a balanced reduction
    assert tree.reduce_associative(operator.add, [], identity=0) == 0
    with pytest.raises(TypeError, match="identity"):
        tree.reduce_associative(operator.add, [])


def test_paths_match_jax():
    jax = pytest.importorskip("jax")
    value = {"b": [1.0, (2.0, 3.0)], "a": Point(4.0, None),
             "d": collections.OrderedDict(z=7.0, y=8.0)}
    ours = [(tree_util.keystr(p), x) for p, x in tree.leaves_with_path(value)]
    theirs = [(jax.tree_util.keystr(p), x) for p, x in jax.tree.leaves_with_path(value)]
    assert ours == theirs
    ours_simple = [tree_util.keystr(p, simple=True, separator=".")
                   for p, _ in tree.leaves_with_path(value)]
    theirs_simple = [jax.tree_util.keystr(p, simple=True, separator=".")
                     for p, _ in jax.tree.leaves_with_path(value)]
    assert ours_simple == theirs_simple
    for key in (tree_util.SequenceKey(2), tree_util.DictKey("k"), tree_util.GetAttrKey("n"),
                tree_util.FlattenedIndexKey(1)):
        jax_key = getattr(jax.tree_util, type(key).__name__)(*dataclasses.astuple(key))
        assert str(key) == str(jax_key)
    assert tree.transpose(tree.structure([0, 0]), None, [(1, 2), (3, 4)]) == \
        jax.tree.transpose(jax.tree.structure([0, 0]), None, [(1, 2), (3, 4)])
    full = [(3, 4), {"a": [5, 6]}, None]
    assert tree.broadcast([1, {"a": 2}, None], full) == \
        jax.tree.broadcast([1, {"a": 2}, None], full)
    for items, is_leaf in [([1, [2]], None), ([[1]], lambda x: isinstance(x, list)),
                           ([(1,), (2,)], lambda x: isinstance(x, tuple))]:
        assert tree_util.all_leaves(items, is_leaf) == jax.tree_util.all_leaves(items, is_leaf)
    assert tree.reduce_associative(operator.add, [1, (2, 3)]) == \
        jax.tree.reduce_associative(operator.add, [1, (2, 3)])
