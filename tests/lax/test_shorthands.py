"""lax shorthands (broadcast, full, select, split, stack, ...) against JAX, NumPy and
numerical gradients."""
import inspect

import numpy as np
import pytest

import ember
from ember import lax
from ember.errors import EmberValueError
from ember.test_util import check_grads, check_vmap

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 3, 4)).astype(np.float32)
Y = RNG.standard_normal((2, 3, 4)).astype(np.float32)

CASES = {  # name -> call on a lax module
    "broadcast": lambda l: l.broadcast(X, (5,)),
    "broadcast_to_rank": lambda l: l.broadcast_to_rank(X[0], 4),
    "full": lambda l: l.full((2, 3), 1.5),
    "full_int": lambda l: l.full((2,), 7, np.int32),
    "full_like": lambda l: l.full_like(X, 2.0),
    "full_like_shape": lambda l: l.full_like(X, 3, np.int32, (4,)),
    "select": lambda l: l.select(X > 0, X, Y),
    "select_scalar": lambda l: l.select(np.bool_(False), X, Y),
    "reciprocal": lambda l: l.reciprocal(X),
    "complex": lambda l: l.complex(X, Y),
    "tile": lambda l: l.tile(X, (2, 1, 3)),
    "split": lambda l: l.split(X, (1, 3), axis=2),
    "collapse": lambda l: l.collapse(X, 1),
    "collapse_range": lambda l: l.collapse(X, 0, 2),
    "stack": lambda l: l.stack([X, Y, X], axis=1),
    "stack_last": lambda l: l.stack([X, Y], axis=-1),
    "unstack": lambda l: l.unstack(X, axis=1),
    "optimization_barrier": lambda l: l.optimization_barrier((X, {"y": Y})),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_jax(name):
    jax = pytest.importorskip("jax")
    ours = ember.tree_util.tree_leaves(CASES[name](lax))
    theirs = jax.tree.leaves(CASES[name](jax.lax))
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape and np.dtype(a.dtype) == np.dtype(b.dtype), name
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)


@pytest.mark.parametrize("name", ["broadcast", "broadcast_to_rank", "full", "full_like",
                                  "select", "reciprocal", "complex", "tile", "split",
                                  "collapse", "stack", "unstack", "optimization_barrier",
                                  "empty"])
def test_signature_matches_jax(name):
    jax = pytest.importorskip("jax")

    def parameters(fn):
        return [(p.name, p.default) for p in inspect.signature(fn).parameters.values()
                if p.name not in ("out_sharding", "sharding")]

    assert parameters(getattr(lax, name)) == parameters(getattr(jax.lax, name))


def test_against_numpy():
    np.testing.assert_array_equal(np.asarray(lax.tile(X, (2, 1, 3))), np.tile(X, (2, 1, 3)))
    np.testing.assert_array_equal(np.asarray(lax.stack([X, Y], 2)), np.stack([X, Y], 2))
    for piece, expected in zip(lax.split(X, (1, 3), 2), np.split(X, [1], 2)):
        np.testing.assert_array_equal(np.asarray(piece), expected)
    np.testing.assert_array_equal(np.asarray(lax.collapse(X, 1)), X.reshape(2, 12))
    np.testing.assert_array_equal(np.asarray(lax.empty((2, 3), np.float32)).shape, (2, 3))


def test_gradients(x64):
    x, y = X.astype(np.float64), Y.astype(np.float64)
    check_grads(lambda a, b: lax.stack([a, b * a], 1), (x, y), order=2)
    check_grads(lambda a: lax.split(a, (3, 1), axis=2)[0] * lax.tile(a, (1, 1, 1))[..., :3],
                (x,), order=1)
    check_grads(lambda a, b: lax.complex(a, b) * lax.complex(b, a), (x, y), order=1)
    check_grads(lambda a: lax.reciprocal(a + 3.0), (x,), order=2)
    check_vmap(lambda a: lax.collapse(lax.broadcast(a, (2,)), 0, 2), (x,))


def test_errors():
    with pytest.raises(EmberValueError, match="add up to 3"):
        lax.split(X, (1, 2), axis=2)
    with pytest.raises(EmberValueError, match="one entry per axis"):
        lax.tile(X, (2,))
    with pytest.raises(EmberValueError, match="fill_value must be a scalar"):
        lax.full((2,), np.ones(2))
