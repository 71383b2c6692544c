"""Elementwise functions that map onto one lax primitive after promotion.

Each is a row of a table: the NumPy (and Array API) names, the lax function and how the
operands are promoted: ``_same`` keeps the promoted dtype, ``_inexact`` sends integers
and bools to the default float dtype (as ``jnp.sin(int)``), ``_boolean`` converts to
bool first (the logical functions). Composite functions (floor_divide, hypot, ...) are
in ``_math.py``.
"""
from __future__ import annotations

import inspect
from typing import Any, Callable

import numpy as np

from ember import lax
from ember.core import dtypes
from ember.numpy import _complex_special_cases as annex_g
from ember.numpy._promotion import ensure_array, promote_args, promote_args_inexact
from ember.numpy._ufunc_objects import builtin, monoid, reduction, running, scatter
from ember.ops.elementwise import ELEMENTWISE_OPS

__all__ = [
    "exp", "exp2", "expm1", "log", "log1p", "sqrt", "cbrt", "sin", "cos", "tan", "arcsin",
    "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "asin", "acos",
    "atan", "asinh", "acosh", "atanh", "negative", "square", "conjugate", "conj", "absolute",
    "abs", "add", "subtract", "multiply", "maximum", "minimum", "bitwise_and", "bitwise_or",
    "bitwise_xor", "left_shift", "right_shift", "bitwise_left_shift", "bitwise_right_shift",
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and",
    "logical_or", "logical_xor", "logical_not", "arctan2", "atan2", "nextafter", "invert",
    "bitwise_not", "bitwise_invert", "bitwise_count",
]


def _same(*args: Any) -> list[Any]:
    return promote_args(*args)


def _inexact(*args: Any) -> list[Any]:
    return promote_args_inexact(*args)


def _boolean(*args: Any) -> list[Any]:
    return promote_args(*args, dtype=dtypes.bool_)


def _ufunc(name: str, lax_fn: Callable, promote: Callable[..., list[Any]]) -> Callable:
    # Positional-only parameters named as the Array API names them.
    if len(inspect.signature(lax_fn).parameters) == 1:
        def fn(x: Any, /):
            return ensure_array(lax_fn(*promote(x)))
    else:
        def fn(x1: Any, x2: Any, /):
            return ensure_array(lax_fn(*promote(x1, x2)))

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"Elementwise ``{name}`` as NumPy's, after broadcasting and type promotion "
                  f"(lax: ``{getattr(lax_fn, '__name__', name)}``).")
    return fn


_PROMOTIONS = {"same": _same, "inexact": _inexact}


def row_ufunc(name: str) -> Callable:
    """The ufunc of the elementwise op ``name`` as its row says (``ElementwiseOp``: its
    first numpy name, its lax function, its promotion)."""
    op = ELEMENTWISE_OPS[name]
    return _ufunc(op.numpy[0], getattr(lax, op.lax_function_name), _PROMOTIONS[op.promote])


def _bool_as(bool_fn: Callable, number_fn: Callable) -> Callable:
    """NumPy's arithmetic on bools is logic: add is or, multiply is and."""
    def fn(x, y):
        return bool_fn(x, y) if dtypes.is_bool(x.dtype) else number_fn(x, y)

    fn.__name__ = number_fn.__name__
    return fn


def _right_shift(x, y):
    if dtypes.is_signed(x.dtype):
        return lax.shift_right_arithmetic(x, y)
    return lax.shift_right_logical(x, y)


# The ufuncs an op's row names (``ElementwiseOp.numpy``, first name; aliases below).
(exp, exp2, log, log1p, sqrt, cbrt, sin, cos, tan, arcsin, arccos, arctan, sinh, cosh,
 tanh, arcsinh, arccosh, arctanh, arctan2, nextafter, square, invert, left_shift) = map(
    row_ufunc, ("exp", "exp2", "log", "log1p", "sqrt", "cbrt", "sin", "cos", "tan",
                "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh",
                "atan2", "nextafter", "square", "not", "shift_left"))
asin, acos, atan, asinh, acosh, atanh = arcsin, arccos, arctan, arcsinh, arccosh, arctanh
atan2, bitwise_not, bitwise_invert, bitwise_left_shift = arctan2, invert, invert, left_shift
# Complex expm1 keeps the standard's special cases at infinities and NaN (Annex G).
expm1 = _ufunc("expm1", annex_g.expm1, _inexact)

negative = builtin(_ufunc("negative", lax.neg, _same), 1)
conjugate = conj = _ufunc("conjugate", lambda x: lax.conj(x) if dtypes.is_complex(x.dtype)
                          else x, _same)
absolute = abs = _ufunc("absolute", lambda x: x if dtypes.is_unsigned(x.dtype)
                        or dtypes.is_bool(x.dtype) else lax.abs(x), _same)
bitwise_count = _ufunc("bitwise_count", lambda x: lax.convert_element_type(
    lax.population_count(lax.abs(x) if dtypes.is_signed(x.dtype) else x), np.uint8), _same)

# The binary functions JAX makes ufunc objects, with their methods' fast paths.
add = builtin(_ufunc("add", _bool_as(lax.bitwise_or, lax.add), _same), 2, 0,
              reduce=reduction("sum"), accumulate=running("cumsum"), at=scatter("add"))
subtract = builtin(_ufunc("subtract", lax.sub, _same), 2,
                   at=scatter("add", lambda b: negative(b)))
multiply = builtin(_ufunc("multiply", _bool_as(lax.bitwise_and, lax.mul), _same), 2, 1,
                   reduce=reduction("prod"), accumulate=running("cumprod"),
                   at=scatter("multiply"))
maximum = builtin(_ufunc("maximum", lax.max, _same), 2, reduce=reduction("max"),
                  accumulate=running("cummax"), at=scatter("max"))
minimum = builtin(_ufunc("minimum", lax.min, _same), 2, reduce=reduction("min"),
                  accumulate=running("cummin"), at=scatter("min"))
bitwise_and = builtin(_ufunc("bitwise_and", lax.bitwise_and, _same), 2, -1,
                      reduce=monoid(lax.reduce_and, lax.bitwise_and, -1, boolean=False))
bitwise_or = builtin(_ufunc("bitwise_or", lax.bitwise_or, _same), 2, 0,
                     reduce=monoid(lax.reduce_or, lax.bitwise_or, 0, boolean=False))
bitwise_xor = builtin(_ufunc("bitwise_xor", lax.bitwise_xor, _same), 2, 0,
                      reduce=monoid(lax.reduce_xor, lax.bitwise_xor, 0, boolean=False))
right_shift = bitwise_right_shift = _ufunc("right_shift", _right_shift, _same)
equal = _ufunc("equal", lax.eq, _same)
not_equal = _ufunc("not_equal", lax.ne, _same)
less = _ufunc("less", lax.lt, _same)
less_equal = _ufunc("less_equal", lax.le, _same)
greater = _ufunc("greater", lax.gt, _same)
greater_equal = _ufunc("greater_equal", lax.ge, _same)

logical_and = builtin(_ufunc("logical_and", lax.bitwise_and, _boolean), 2, True,
                      reduce=monoid(lax.reduce_and, lax.bitwise_and, True, boolean=True))
logical_or = builtin(_ufunc("logical_or", lax.bitwise_or, _boolean), 2, False,
                     reduce=monoid(lax.reduce_or, lax.bitwise_or, False, boolean=True))
logical_xor = builtin(_ufunc("logical_xor", lax.bitwise_xor, _boolean), 2, False,
                      reduce=monoid(lax.reduce_xor, lax.bitwise_xor, False, boolean=True))
logical_not = _ufunc("logical_not", lax.bitwise_not, _boolean)
