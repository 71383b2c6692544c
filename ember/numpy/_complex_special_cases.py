"""Complex elementwise functions whose special cases (C99 Annex G, as the Array API
standard tabulates them) need more than the primitive gives.

The complex primitives compute with the host's C library, which gets most of Annex G
right; these wrappers fix what it does not: ``expm1`` (NumPy's does not follow
``exp(z) - 1`` at infinities and NaN), and ``log2`` / ``log10``, which scale both parts
by a real factor (a complex division would turn ``inf * 0`` into NaN). Real inputs go
straight to the primitive.

There is no primitive that builds a complex number from its parts, and complex
arithmetic turns ``inf * 0`` into NaN, so ``complex_from_parts`` builds one from exact steps
(the one builder of ember.numpy: complex ``round`` and ``corrcoef`` use it too).
"""
from __future__ import annotations

import math
from typing import Any

from ember import lax
from ember.core import dtypes
from ember.numpy._promotion import constant_like
from ember.ops.bitcast import sign_bit


def _select(pred: Any, on_true: Any, on_false: Any) -> Any:
    return lax.select_n(pred, on_false, on_true)


def complex_from_parts(real: Any, imag: Any, dtype: Any) -> Any:
    """``real + imag * 1j`` exactly: infinities, NaNs and signed zeros of either part kept.

    ``(real - 0j) + (-0 + imag j)`` is exact because ``x + -0 == x`` for every x; the
    second term is ``-((-imag - 0j) * 1j)``, exact for finite ``imag``; a non-finite
    imaginary part is added as a constant afterwards.
    """
    finite = lax.is_finite(imag)
    safe_imag = _select(finite, imag, constant_like(0, imag))
    real_term = lax.conj(lax.convert_element_type(real, dtype))
    negated = lax.conj(lax.convert_element_type(lax.neg(safe_imag), dtype))
    imag_term = lax.neg(lax.mul(negated, constant_like(1j, negated)))
    out = lax.add(real_term, imag_term)
    non_finite = _select(lax.ne(imag, imag), constant_like(complex(-0.0, math.nan), out),
                         _select(lax.gt(imag, constant_like(0, imag)),
                                 constant_like(complex(-0.0, math.inf), out),
                                 constant_like(complex(-0.0, -math.inf), out)))
    return _select(finite, out, lax.add(out, non_finite))


def _parts(z: Any) -> tuple[Any, Any]:
    return lax.real(z), lax.imag(z)


def expm1(z: Any) -> Any:
    """``exp(z) - 1``, accurate near 0: ``expm1(a) cos(b) - 2 sin(b/2)**2 + exp(a) sin(b) j``
    for finite z; the infinite and NaN cases are those of ``exp(z) - 1``."""
    if not dtypes.is_complex(z.dtype):
        return lax.expm1(z)
    a, b = _parts(z)
    half_sin = lax.sin(lax.mul(b, constant_like(0.5, b)))
    real = lax.sub(lax.mul(lax.expm1(a), lax.cos(b)),
                   lax.mul(constant_like(2, b), lax.mul(half_sin, half_sin)))
    imag = _select(lax.eq(b, constant_like(0, b)), b, lax.mul(lax.exp(a), lax.sin(b)))
    e_real, e_imag = _parts(lax.exp(z))
    finite = lax.bitwise_and(lax.is_finite(a), lax.is_finite(b))
    real = _select(finite, real, lax.sub(e_real, constant_like(1, e_real)))
    imag = _select(finite, imag, e_imag)
    return complex_from_parts(real, imag, z.dtype)


def log_base(z: Any, base: float) -> Any:
    """``log(z) / log(base)``, dividing each part by the real ``log(base)``."""
    log = lax.log(z)
    if not dtypes.is_complex(z.dtype):
        return lax.div(log, constant_like(math.log(base), log))
    real, imag = _parts(log)
    scale = constant_like(math.log(base), real)
    return complex_from_parts(lax.div(real, scale), lax.div(imag, scale), z.dtype)


def divide(x: Any, y: Any) -> Any:
    """``x / y``; for complex operands, a quotient that came out NaN + NaN j is recovered
    as C99 Annex G does (G.5.1) and XLA answers: an infinite over a finite is infinite, a
    finite over an infinite is zero; over zero, the parts are ``copysign(inf, c)`` times
    the numerator's."""
    quotient = lax.div(x, y)
    if not dtypes.is_complex(quotient.dtype):
        return quotient
    # The recovered values are constants (infinities, zeros): no derivative flows into
    # them, so the branches not taken cannot turn a zero cotangent into 0 * inf = NaN.
    (a, b), (c, d) = _parts(lax.stop_gradient(x)), _parts(lax.stop_gradient(y))
    real, imag = _parts(quotient)
    lost = lax.bitwise_and(lax.ne(real, real), lax.ne(imag, imag))
    finite = _both_finite
    zero, inf = constant_like(0, c), constant_like(math.inf, c)
    inf_with_sign_of_c = _select(sign_bit(c), lax.neg(inf), inf)
    by_zero = lax.bitwise_and(lax.bitwise_and(lax.eq(c, zero), lax.eq(d, zero)),
                              lax.bitwise_not(lax.bitwise_and(lax.ne(a, a), lax.ne(b, b))))
    infinite_over_finite = lax.bitwise_and(lax.bitwise_not(finite(a, b)), finite(c, d))
    infinite_over_finite = lax.bitwise_and(
        infinite_over_finite, lax.bitwise_or(_is_inf(a), _is_inf(b)))
    finite_over_infinite = lax.bitwise_and(lax.bitwise_or(_is_inf(c), _is_inf(d)), finite(a, b))

    def recovered(scale: Any, p: Any, q: Any, r: Any, s: Any) -> tuple[Any, Any]:
        """``scale * (p r + q s)``, ``scale * (q r - p s)``: the textbook formula's parts."""
        return (lax.mul(scale, lax.add(lax.mul(p, r), lax.mul(q, s))),
                lax.mul(scale, lax.sub(lax.mul(q, r), lax.mul(p, s))))

    by_zero_parts = (lax.mul(inf_with_sign_of_c, a), lax.mul(inf_with_sign_of_c, b))
    infinite_parts = recovered(inf, _unit_if_inf(a), _unit_if_inf(b), c, d)
    zero_parts = recovered(zero, a, b, _unit_if_inf(c), _unit_if_inf(d))
    for case, (r, i) in ((finite_over_infinite, zero_parts),
                         (infinite_over_finite, infinite_parts)):
        take = lax.bitwise_and(lost, case)
        real, imag = _select(take, r, real), _select(take, i, imag)
    # Over zero, XLA takes C99's infinities whether or not the quotient came out NaN.
    real, imag = _select(by_zero, by_zero_parts[0], real), _select(by_zero, by_zero_parts[1], imag)
    return complex_from_parts(real, imag, quotient.dtype)


def _is_inf(v: Any) -> Any:
    return lax.eq(lax.abs(v), constant_like(math.inf, v))


def _both_finite(p: Any, q: Any) -> Any:
    return lax.bitwise_and(lax.is_finite(p), lax.is_finite(q))


def _unit_if_inf(v: Any) -> Any:
    """``copysign(1 if v is infinite else 0, v)``: C99's step before the recovered product."""
    one = _select(_is_inf(v), constant_like(1, v), constant_like(0, v))
    return _select(sign_bit(v), lax.neg(one), one)
