"""Complex division at infinities, NaNs and zeros: C99 Annex G's recovery (G.5.1), which
is what JAX answers, and the Array API's one fixed case (NaN + NaN j over NaN + NaN j)."""
import itertools
import math

import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember.test_util import check_grads

inf, nan = math.inf, math.nan
VALUES = [0.0, -0.0, 1.0, -2.5, inf, -inf, nan]
POINTS = np.array([complex(a, b) for a in VALUES for b in VALUES], np.complex64)
X1, X2 = (np.array(v, np.complex64) for v in zip(*itertools.product(POINTS, POINTS)))

# (x1, x2, expected): each recovery of C99 G.5.1 and a zero divisor's signs.
CASES = [
    (complex(nan, nan), complex(nan, nan), complex(nan, nan)),   # the standard's case
    (complex(1, 1), complex(inf, inf), complex(0, 0)),           # finite / infinite
    (complex(-2.5, 1), complex(-inf, nan), complex(0.0, -0.0)),
    (complex(inf, inf), complex(-0.0, 1), complex(inf, -inf)),   # infinite / finite
    (complex(inf, nan), complex(1, -2.5), complex(inf, inf)),
    (complex(1, 1), complex(-0.0, -0.0), complex(-inf, -inf)),   # over zero: copysign(inf, c)
    (complex(-inf, -inf), complex(-0.0, 0.0), complex(inf, inf)),
    (complex(nan, -2.5), complex(-0.0, -0.0), complex(nan, inf)),
    (complex(3, 4), complex(1, 2), complex(2.2, -0.4)),          # finite: the plain quotient
]


def _same(actual: complex, expected: complex) -> bool:
    def part(u: float, v: float) -> bool:
        if math.isnan(v):
            return math.isnan(u)
        if v == 0:
            return u == 0 and math.copysign(1, u) == math.copysign(1, v)
        return math.isclose(u, v, rel_tol=1e-6)
    return part(actual.real, expected.real) and part(actual.imag, expected.imag)


@pytest.mark.parametrize("x1,x2,expected", CASES, ids=str)
def test_c99_recovery(x1, x2, expected):
    a, b = np.array([x1], np.complex64), np.array([x2], np.complex64)
    for got in (enp.divide(a, b), ember.jit(lambda u, v: u / v)(a, b)):
        assert _same(complex(np.asarray(got)[0]), expected), (x1, x2, got)


def test_real_division_is_unchanged():
    x = np.array(VALUES, np.float32)
    with np.errstate(all="ignore"):
        want = x[:, None] / x[None, :]
    np.testing.assert_array_equal(np.asarray(enp.divide(x[:, None], x[None, :])), want)


def test_gradient_of_a_complex_quotient(x64):
    z = np.array([1 + 2j, -0.5 + 0.25j])
    w = np.array([3 - 1j, 0.5 + 2j])
    check_grads(lambda z, w: enp.real(z / w) + enp.imag(z / w) ** 2, (z, w), order=1)


def test_every_special_pair_is_classified_as_jax_does():
    """Infinite, NaN and zero operands: each part NaN, ±inf, ±0 or finite as JAX's; finite
    operands: the same quotient (up to rounding, where JAX's formula leaves a residue)."""
    jax_numpy = pytest.importorskip("jax.numpy")
    ours = np.asarray(enp.divide(X1, X2))
    theirs = np.asarray(jax_numpy.divide(X1, X2))

    def kind(parts: np.ndarray) -> np.ndarray:
        return np.where(np.isnan(parts), 0, np.where(np.isinf(parts), 1 + np.signbit(parts),
                                                    np.where(parts == 0, 3 + np.signbit(parts), 5)))
    special = ~(np.isfinite(X1) & np.isfinite(X2)) | (X2 == 0)
    assert special.sum() > 1500
    for part in (np.real, np.imag):
        assert (kind(part(ours)) != kind(part(theirs)))[special].sum() == 0
    np.testing.assert_allclose(ours[~special], theirs[~special], rtol=1e-6, atol=1e-6)
