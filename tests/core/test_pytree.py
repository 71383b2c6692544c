import collections
import dataclasses

import pytest

from ember import tree_util


Point = collections.namedtuple("Point", "x y")


def test_flatten_roundtrip_nested():
    tree = {"b": [1, (2, 3)], "a": None, "c": Point(4, {"z": 5})}
    leaves, treedef = tree_util.tree_flatten(tree)
    assert leaves == [1, 2, 3, 4, 5]  # dict keys sorted: a (None: no leaves), b, c
    assert tree_util.tree_unflatten(treedef, leaves) == tree


def test_treedef_equality_and_hash():
    a = tree_util.tree_structure({"x": 1, "y": (2, 3)})
    b = tree_util.tree_structure({"y": (7, 8), "x": 9})
    c = tree_util.tree_structure({"x": 1, "y": [2, 3]})
    assert a == b and hash(a) == hash(b)
    assert a != c


def test_tree_map_multiple_trees():
    out = tree_util.tree_map(lambda a, b: a + b, {"p": 1, "q": [2]}, {"p": 10, "q": [20]})
    assert out == {"p": 11, "q": [22]}


def test_tree_map_structure_mismatch_is_clear():
    with pytest.raises(ValueError, match="tree structures differ"):
        tree_util.tree_map(lambda a, b: a, [1, 2], (1, 2))


def test_register_dataclass():
    @tree_util.register_dataclass
    @dataclasses.dataclass
    class Layer:
        w: object
        b: object
        name: str = dataclasses.field(default="dense", metadata={"static": True})

    layer = Layer(1, 2, "fc")
    leaves, treedef = tree_util.tree_flatten(layer)
    assert leaves == [1, 2]
    rebuilt = tree_util.tree_unflatten(treedef, [10, 20])
    assert (rebuilt.w, rebuilt.b, rebuilt.name) == (10, 20, "fc")


def test_register_pytree_node_class():
    @tree_util.register_pytree_node_class
    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b

        def tree_flatten(self):
            return (self.a, self.b), None

        @classmethod
        def tree_unflatten(cls, aux, children):
            return cls(*children)

    leaves = tree_util.tree_leaves([Pair(1, 2), 3])
    assert leaves == [1, 2, 3]


def test_unflatten_wrong_leaf_count():
    treedef = tree_util.tree_structure((1, 2))
    with pytest.raises(ValueError, match="2 leaves"):
        tree_util.tree_unflatten(treedef, [1])
