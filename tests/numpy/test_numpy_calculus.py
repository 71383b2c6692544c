"""gradient, trapezoid and unwrap against NumPy (float64: every spacing kind and edge
order) and JAX (gradients through them, jit)."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ember
import ember.numpy as enp
from ember.errors import EmberValueError


def _close(actual, expected, rtol=1e-9):
    if isinstance(expected, (list, tuple)):
        assert isinstance(actual, list) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            _close(a, e, rtol)
        return
    actual = np.asarray(actual)
    assert actual.shape == np.shape(expected)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("edge_order", [1, 2])
@given(seed=st.integers(0, 999), rows=st.integers(3, 6), cols=st.integers(3, 5),
       spacing=st.sampled_from(["none", "scalar", "per-axis", "coordinates", "mixed"]))
def test_gradient_matches_numpy(edge_order, seed, rows, cols, spacing):
    rng = np.random.default_rng(seed)
    f = rng.normal(size=(rows, cols))
    coordinates = [np.cumsum(rng.uniform(0.5, 1.5, n)) for n in (rows, cols)]
    args = {"none": (), "scalar": (0.5,), "per-axis": (0.5, 2.0),
            "coordinates": tuple(coordinates), "mixed": (coordinates[0], 3.0)}[spacing]
    with ember.config.override(enable_x64=True):
        out = enp.gradient(f, *args, edge_order=edge_order)
        along = enp.gradient(f, coordinates[1], axis=1, edge_order=edge_order)
    _close(out, list(np.gradient(f, *args, edge_order=edge_order)))
    _close(along, np.gradient(f, coordinates[1], axis=1, edge_order=edge_order))


@given(seed=st.integers(0, 999), axis=st.sampled_from([0, 1, -1]))
def test_trapezoid_and_unwrap_match_numpy(seed, axis):
    rng = np.random.default_rng(seed)
    y = rng.normal(size=(3, 6))
    n = y.shape[axis]
    x = np.cumsum(rng.uniform(size=n))
    grid = np.cumsum(rng.uniform(size=y.shape), axis=axis)
    phases = np.cumsum(rng.uniform(-4, 4, size=(3, 6)), axis=axis)
    with ember.config.override(enable_x64=True):
        results = [enp.trapezoid(y, axis=axis), enp.trapezoid(y, x, axis=axis),
                   enp.trapezoid(y, dx=0.3, axis=axis), enp.trapezoid(y, grid, axis=axis),
                   enp.unwrap(phases, axis=axis), enp.unwrap(phases, 4.0, axis=axis),
                   enp.unwrap(phases, axis=axis, period=5.0)]
    expected = [np.trapezoid(y, axis=axis), np.trapezoid(y, x, axis=axis),
                np.trapezoid(y, dx=0.3, axis=axis), np.trapezoid(y, grid, axis=axis),
                np.unwrap(phases, axis=axis), np.unwrap(phases, 4.0, axis=axis),
                np.unwrap(phases, axis=axis, period=5.0)]
    for ours, theirs in zip(results, expected):
        _close(ours, theirs)
    half_turns = np.array([0, np.pi, 0, -np.pi, 0.0])  # exactly period / 2: kept
    _close(enp.unwrap(half_turns.astype(np.float32)), np.unwrap(half_turns), rtol=1e-6)


def test_gradients_through_them_match_jax():
    jax = pytest.importorskip("jax")
    f = np.linspace(0, 2, 7, dtype=np.float32) ** 2

    def loss(module):
        return lambda v: ((module.gradient(v, 0.5) ** 2).sum() + module.trapezoid(v, dx=0.1)
                          + module.unwrap(3 * v).sum())

    with ember.config.override(backend="reference"):
        ours = ember.jit(ember.grad(loss(enp)))(f)
    np.testing.assert_allclose(np.asarray(ours), np.asarray(jax.grad(loss(jax.numpy))(f)),
                               rtol=1e-5, atol=1e-5)


def test_errors():
    with pytest.raises(EmberValueError, match="edge_order must be 1 or 2, got 3"):
        enp.gradient(np.ones(4), edge_order=3)
    with pytest.raises(EmberValueError, match=r"needs at least edge_order \+ 1 = 3 samples"):
        enp.gradient(np.ones(2), edge_order=2)
    with pytest.raises(EmberValueError, match=r"coordinates along axis 0 must be a scalar or "
                                              r"1-D of length 4, got shape \(3,\)"):
        enp.gradient(np.ones(4), np.ones(3))
    with pytest.raises(EmberValueError, match="one per axis .2., got 3"):
        enp.gradient(np.ones((3, 3)), 1.0, 2.0, 3.0)
    with pytest.raises(EmberValueError, match="x of length 3 for 4 samples"):
        enp.trapezoid(np.ones(4), np.ones(3))
