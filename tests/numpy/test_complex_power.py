"""Complex ``**``: Ember follows NumPy, not JAX, on purpose (see README, Numerics): exact
for real integer exponents, ``0 ** z == 0`` where ``Re(z) > 0``. A Python int exponent
(``integer_pow``, repeated multiplication) agrees with JAX on finite bases."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
import ember.numpy as jnp

_SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.5, np.inf, -np.inf, np.nan]
_GRID = np.array(sorted({complex(a, b) for a in _SPECIAL for b in _SPECIAL}, key=str),
                 np.complex64)


def _same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    for part in (np.real, np.imag):
        np.testing.assert_allclose(part(got), part(want), rtol=1e-5, equal_nan=True)


def _numpy_power(x, y):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return np.power(x, y)


@pytest.mark.parametrize("jitted", [False, True])
def test_complex_power_is_numpy_s_on_every_special_value(jitted):
    x, y = np.repeat(_GRID, len(_GRID)), np.tile(_GRID, len(_GRID))
    power = ember.jit(jnp.power) if jitted else jnp.power
    _same(power(jnp.asarray(x), jnp.asarray(y)), _numpy_power(x, y))


def test_complex_power_is_exact_where_jax_rounds():
    x = np.array([-1, 1j, -1j, 2.5j, 0, 0], np.complex64)
    y = np.array([1, 1, -1, 1, 1 + 1j, 2.5 - 1j], np.complex64)
    got = np.asarray(jnp.power(jnp.asarray(x), jnp.asarray(y)))
    np.testing.assert_array_equal(got, [-1, 1j, 1j, 2.5j, 0, 0])


@pytest.mark.parametrize("exponent", [-3, -2, -1, 2, 3, 4])
def test_python_int_exponents_agree_with_jax_on_finite_bases(exponent):
    jax = pytest.importorskip("jax")
    finite = _GRID[np.isfinite(_GRID) & (_GRID != 0)]
    ours = np.asarray(jnp.asarray(finite) ** exponent)
    _same(ours, np.asarray(jax.numpy.asarray(finite) ** exponent))
    _same(ours, _numpy_power(finite, exponent))
