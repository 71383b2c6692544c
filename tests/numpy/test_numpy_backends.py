"""ember.numpy programs compiled by every backend present agree with eager evaluation."""
import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.numpy as enp
import ember.random as jr


def _elementwise(x, y):
    return (enp.floor_divide(x, y), enp.remainder(x, y), enp.logaddexp(x, y), enp.hypot(x, y),
            enp.round(x, 2), enp.where(x > y, x, y), enp.isclose(x, y), enp.clip(x, -1, 1))


def _shapes_and_indexing(x, y):
    return (x[1:, ::-2], x[np.array([2, 0]), 1], x.at[0, 1:].add(y[0, :3]), enp.roll(x, 2, 1),
            enp.pad(x, 1, mode="reflect"), enp.tile(x[0], 2), enp.concatenate([x, y[:, :4]], 1),
            enp.take_along_axis(x, enp.argsort(x, axis=1), axis=1))


def _reductions(x, y):
    return (enp.sum(x, 0), enp.mean(x), enp.var(x, 1, ddof=1), enp.max(x, 1), enp.cumsum(x, 1),
            enp.argmax(x, 1), enp.sort(x, 0), enp.nonzero(x > 0, size=4))


def _linear_algebra(x, y):
    square = x[:, :3] @ x[:, :3].T + 3 * enp.eye(3)
    return (x.T @ y, enp.einsum("ij,kj->ik", x, y[:, :4]), enp.linalg.solve(square, x),
            enp.linalg.det(square), enp.linalg.norm(x), enp.fft.rfft(x))


def _nn_and_random(x, y):
    key = jr.PRNGKey(3)
    return (nn.softmax(x), nn.gelu(y), nn.logsumexp(x, 1), jr.normal(key, (2, 3)),
            jr.randint(key, (4,), 0, 7), nn.one_hot(enp.argmin(x, 1), 4))


PROGRAMS = [_elementwise, _shapes_and_indexing, _reductions, _linear_algebra, _nn_and_random]


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.__name__ for p in PROGRAMS])
def test_compiled_programs_match_eager(backend, program):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 4)).astype(np.float32)
    y = rng.normal(size=(3, 5)).astype(np.float32) + 2
    y4 = y[:, :4] if program is _elementwise else y
    compiled = ember.jit(program)(x, y4)
    with ember.config.override(backend="reference"):
        eager = program(enp.asarray(x), enp.asarray(y4))
    for got, want in zip(ember.tree_util.tree_leaves(compiled), ember.tree_util.tree_leaves(eager)):
        assert np.shape(got) == np.shape(want)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-5, atol=2e-5)
