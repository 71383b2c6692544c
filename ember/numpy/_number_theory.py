"""Greatest common divisor and least common multiple of integers: gcd, lcm.

``gcd`` runs Euclid's algorithm elementwise in a ``lax.while_loop`` until every
remainder is zero (at most ~1.44 log2 of the largest value rounds), so it works under
jit and vmap; integers have no gradient.
"""
from __future__ import annotations

from typing import Any

from ember import lax
from ember.core import dtypes
from ember.errors import EmberTypeError
from ember.numpy._math import where
from ember.numpy._promotion import constant_like, promote_args

__all__ = ["gcd", "lcm"]


def _integers(name: str, x1: Any, x2: Any) -> tuple[Any, Any]:
    x, y = promote_args(x1, x2)
    if not dtypes.is_integer(x.dtype):
        raise EmberTypeError(f"{name} needs integer arguments, got {x.dtype}")
    return x, y


def _abs(x: Any) -> Any:
    return x if dtypes.is_unsigned(x.dtype) else lax.abs(x)


def _euclid(a: Any, b: Any) -> Any:
    """gcd of non-negative ``a`` and ``b``."""
    zero = constant_like(0, b)

    def remainders_left(state: tuple[Any, Any]) -> Any:
        return lax.reduce_or(lax.ne(state[1], zero), tuple(range(state[1].ndim)))

    def step(state: tuple[Any, Any]) -> tuple[Any, Any]:
        a, b = state
        done = lax.eq(b, zero)
        safe = where(done, constant_like(1, b), b)
        return where(done, a, b), where(done, zero, lax.rem(a, safe))

    return lax.while_loop(remainders_left, step, (a, b))[0]


def gcd(x1: Any, x2: Any, /):
    """The greatest common divisor of ``|x1|`` and ``|x2|`` (0 for two zeros)."""
    x, y = _integers("gcd", x1, x2)
    return _euclid(_abs(x), _abs(y))


def lcm(x1: Any, x2: Any, /):
    """The least common multiple of ``|x1|`` and ``|x2|`` (0 if either is 0)."""
    x, y = _integers("lcm", x1, x2)
    x, y = _abs(x), _abs(y)
    divisor = _euclid(x, y)
    zero = lax.eq(divisor, constant_like(0, divisor))
    safe = where(zero, constant_like(1, divisor), divisor)
    return where(zero, constant_like(0, x), lax.mul(lax.div(x, safe), y))
