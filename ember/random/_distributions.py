"""Samplers built on ``random_bits``: uniform, normal, integers, Bernoulli, categorical,
permutations, choice and the common continuous distributions.

Each follows JAX's construction step by step (same bits, same transforms), so a seed
gives the same samples as in JAX up to floating-point rounding of the transforms.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ember import lax
from ember import numpy as enp
from ember.core import dtypes
from ember.errors import EmberTypeError, EmberValueError
from ember.numpy._axes import canonicalize_axis
from ember.numpy._math import complex_from_parts
from ember.numpy._promotion import (
    broadcast_shapes, broadcast_to_shape, broadcasts_to, concrete, ensure_array,
)
from ember.random._keys import check_key, random_bits, shape_arg, split

__all__ = [
    "uniform", "normal", "randint", "bernoulli", "categorical", "gumbel", "truncated_normal",
    "permutation", "shuffle", "choice", "exponential", "laplace", "logistic", "cauchy",
    "rademacher", "multivariate_normal",
]


def _float_dtype(dtype: Any, name: str) -> np.dtype:
    dtype = dtypes.canonicalize(dtype) if dtype is not None else dtypes.default_float()
    if not dtypes.is_floating(dtype):
        raise EmberTypeError(f"{name}: dtype must be a floating dtype, got {dtype}")
    return dtype


def _operand(value: Any, dtype: np.dtype, shape: tuple[int, ...], what: str) -> Any:
    """A parameter (minval, p, ...) of ``dtype`` broadcast to the sample ``shape``."""
    array = ensure_array(value, dtype)
    if not broadcasts_to(array.shape, shape):
        raise EmberValueError(f"{what} of shape {array.shape} does not broadcast to the sample "
                              f"shape {shape}")
    return broadcast_to_shape(array, shape)


def _unit_floats(key: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    """Uniform floats in [0, 1): the top mantissa bits of random bits, times 2**-nmant.

    Equal to JAX's bit trick (mantissa bits under the exponent of 1.0, minus 1.0).
    """
    info = dtypes.finfo(dtype)
    nbits, nmant = info.bits, info.nmant
    rng_bits = 8 if nmant < 8 else nbits
    raw = random_bits(key, rng_bits, shape)
    if rng_bits != nbits:
        raw = lax.convert_element_type(raw, np.dtype(f"uint{nbits}"))
    mantissa = lax.shift_right_logical(raw, rng_bits - nmant)
    return lax.mul(lax.convert_element_type(mantissa, dtype), 2.0 ** -nmant)


def uniform(key: Any, shape: Sequence[int] = (), dtype: Any = None, minval: Any = 0.0,
            maxval: Any = 1.0) -> Any:
    """Uniform floats in ``[minval, maxval)``."""
    key = check_key(key, "uniform")
    dtype = _float_dtype(dtype, "uniform")
    shape = shape_arg(shape)
    low = _operand(minval, dtype, shape, "minval")
    high = _operand(maxval, dtype, shape, "maxval")
    floats = _unit_floats(key, shape, dtype)
    return lax.max(low, lax.add(lax.mul(floats, lax.sub(high, low)), low))


def normal(key: Any, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Standard normal samples (complex dtypes: unit variance split over both parts)."""
    key = check_key(key, "normal")
    dtype = dtypes.canonicalize(dtype) if dtype is not None else dtypes.default_float()
    shape = shape_arg(shape)
    if dtypes.is_complex(dtype):
        real_dtype = dtypes.finfo(dtype).dtype
        real_key, imag_key = split(key)
        parts = [_normal_real(k, shape, real_dtype) for k in (real_key, imag_key)]
        return lax.mul(complex_from_parts(*parts, dtype), 1 / math.sqrt(2))
    return _normal_real(key, shape, _float_dtype(dtype, "normal"))


def _normal_real(key: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    low = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype)).item()
    u = uniform(key, shape, dtype, low, 1.0)
    return lax.mul(lax.erf_inv(u), math.sqrt(2))


def _clip_to(value: Any, dtype: np.dtype) -> Any:
    """An integer bound clipped into ``dtype``'s range, then converted to it."""
    info = dtypes.iinfo(dtype)
    array = ensure_array(value)
    if not dtypes.is_integer(array.dtype):
        array = lax.convert_element_type(array, dtypes.default_int())
    own = dtypes.iinfo(array.dtype)
    low, high = max(info.min, own.min), min(info.max, own.max)
    return lax.convert_element_type(lax.clamp(low, array, high), dtype), array


def randint(key: Any, shape: Sequence[int], minval: Any, maxval: Any, dtype: Any = None) -> Any:
    """Uniform integers in ``[minval, maxval)`` (``minval`` alone if the range is empty).

    Two words of random bits per sample keep the modulo bias negligible.
    """
    key = check_key(key, "randint")
    dtype = dtypes.canonicalize(dtype) if dtype is not None else dtypes.default_int()
    if not dtypes.is_integer(dtype):
        raise EmberTypeError(f"randint: dtype must be an integer dtype, got {dtype}")
    shape = shape_arg(shape)
    nbits = dtypes.iinfo(dtype).bits
    low, _ = _clip_to(minval, dtype)
    high, wide_high = _clip_to(maxval, dtype)
    high_out_of_range = lax.gt(wide_high, min(dtypes.iinfo(dtype).max,
                                              dtypes.iinfo(wide_high.dtype).max))
    low, high = (_operand(v, dtype, shape, name) for v, name in ((low, "minval"),
                                                                (high, "maxval")))
    high_out_of_range = broadcast_to_shape(high_out_of_range, shape)
    first_key, second_key = split(key)
    higher, lower = random_bits(first_key, nbits, shape), random_bits(second_key, nbits, shape)
    unsigned = higher.dtype
    span = lax.convert_element_type(lax.sub(high, low), unsigned)
    empty = lax.le(high, low)
    span = lax.select_n(empty, span, lax.broadcast_in_dim(np.ones((), unsigned), shape, ()))
    # maxval beyond the dtype: the span is one more than maxval - minval can express.
    span = lax.select_n(lax.bitwise_and(high_out_of_range, lax.bitwise_not(empty)), span,
                        lax.add(span, 1))
    multiplier = lax.rem(lax.broadcast_in_dim(np.asarray(2 ** (nbits // 2), unsigned), shape,
                                              ()), span)
    multiplier = lax.rem(lax.mul(multiplier, multiplier), span)
    offset = lax.add(lax.mul(lax.rem(higher, span), multiplier), lax.rem(lower, span))
    offset = lax.rem(offset, span)
    return lax.add(low, lax.convert_element_type(offset, dtype))


def bernoulli(key: Any, p: Any = 0.5, shape: Sequence[int] | None = None) -> Any:
    """Booleans that are True with probability ``p``."""
    key = check_key(key, "bernoulli")
    p = ensure_array(p)
    if not dtypes.is_floating(p.dtype):
        p = lax.convert_element_type(p, dtypes.default_float())
    shape = p.shape if shape is None else shape_arg(shape)
    return lax.lt(uniform(key, shape, p.dtype), _operand(p, p.dtype, shape, "p"))


def gumbel(key: Any, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Standard Gumbel samples: ``-log(-log(u))``."""
    key = check_key(key, "gumbel")
    dtype = _float_dtype(dtype, "gumbel")
    u = uniform(key, shape, dtype, float(dtypes.finfo(dtype).tiny), 1.0)
    return lax.neg(lax.log(lax.neg(lax.log(u))))


def categorical(key: Any, logits: Any, axis: int = -1,
                shape: Sequence[int] | None = None) -> Any:
    """Category indices drawn with probabilities ``softmax(logits)`` along ``axis``
    (the Gumbel-max trick)."""
    key = check_key(key, "categorical")
    logits = ensure_array(logits)
    if not dtypes.is_floating(logits.dtype):
        logits = lax.convert_element_type(logits, dtypes.default_float())
    if not -logits.ndim <= axis < logits.ndim:
        raise EmberValueError(f"categorical: axis {axis} is out of range for logits of shape "
                              f"{logits.shape}")
    axis = axis - logits.ndim if axis >= 0 else axis
    batch_shape = tuple(np.delete(logits.shape, axis))
    shape = batch_shape if shape is None else shape_arg(shape)
    if shape[len(shape) - len(batch_shape):] != batch_shape:
        raise EmberValueError(f"categorical: shape {shape} must end with the batch shape "
                              f"{batch_shape} of the logits")
    prefix = shape[:len(shape) - len(batch_shape)]
    sample_shape = list(shape[len(shape) - len(batch_shape):])
    sample_shape.insert(axis % logits.ndim, logits.shape[axis])
    noise = gumbel(key, (*prefix, *sample_shape), logits.dtype)
    expanded = lax.expand_dims(logits, tuple(range(len(prefix))))
    return enp.argmax(enp.add(noise, expanded), axis=axis)


def truncated_normal(key: Any, lower: Any, upper: Any, shape: Sequence[int] | None = None,
                     dtype: Any = None) -> Any:
    """Normal samples conditioned on ``lower < x < upper`` (inverse CDF)."""
    key = check_key(key, "truncated_normal")
    dtype = _float_dtype(dtype, "truncated_normal")
    low, high = ensure_array(lower, dtype), ensure_array(upper, dtype)
    shape = broadcast_shapes(low.shape, high.shape) if shape is None else shape_arg(shape)
    a = lax.erf(lax.mul(low, 1 / math.sqrt(2)))
    b = lax.erf(lax.mul(high, 1 / math.sqrt(2)))
    u = uniform(key, shape, dtype, a, b)
    out = lax.mul(lax.erf_inv(u), math.sqrt(2))
    # Rounding (or u == a) may land on a bound: clamp into the open interval.
    inside_low = lax.nextafter(low, lax.broadcast_in_dim(np.asarray(np.inf, dtype), low.shape, ()))
    inside_high = lax.nextafter(high, lax.broadcast_in_dim(np.asarray(-np.inf, dtype), high.shape,
                                                           ()))
    return enp.clip(out, inside_low, inside_high)


def _shuffle(key: Any, x: Any, axis: int) -> Any:
    """Sort by random keys, in enough rounds that ties are unlikely (as JAX)."""
    rounds = math.ceil(3 * math.log(max(1, x.size)) / math.log(np.iinfo(np.uint32).max))
    for _ in range(rounds):
        key, subkey = split(key)
        sort_keys = random_bits(subkey, 32, x.shape)
        _, x = lax.sort((sort_keys, x), axis, is_stable=True, num_keys=1)
    return x


def permutation(key: Any, x: Any, axis: int = 0, independent: bool = False) -> Any:
    """A random permutation of ``range(x)`` (integer ``x``) or of ``x`` along ``axis``
    (each slice on its own with ``independent=True``)."""
    key = check_key(key, "permutation")
    array = ensure_array(x)
    if array.ndim == 0:
        if not dtypes.is_integer(array.dtype):
            raise EmberTypeError(f"permutation of a scalar needs an integer, got {array.dtype}")
        return _shuffle(key, enp.arange(int(concrete(x, "permutation(n)"))), 0)
    axis = canonicalize_axis(axis, array.ndim)
    if independent or array.ndim == 1:
        return _shuffle(key, array, axis)
    order = _shuffle(key, enp.arange(array.shape[axis]), 0)
    return enp.take(array, order, axis=axis, mode="clip")


def shuffle(key: Any, x: Any, axis: int = 0) -> Any:
    """``x`` shuffled independently along ``axis`` (prefer ``permutation``)."""
    key = check_key(key, "shuffle")
    array = ensure_array(x)
    return _shuffle(key, array, canonicalize_axis(axis, array.ndim))


def choice(key: Any, a: Any, shape: Sequence[int] = (), replace: bool = True, p: Any = None,
           axis: int = 0) -> Any:
    """Random samples from ``range(a)`` (integer ``a``) or from ``a`` along ``axis``, with
    or without replacement, uniformly or with probabilities ``p``."""
    key = check_key(key, "choice")
    shape = shape_arg(shape)
    array = ensure_array(a)
    if array.ndim == 0:
        n_inputs = int(concrete(a, "choice(a) with an integer a"))
    else:
        axis = canonicalize_axis(axis, array.ndim)
        n_inputs = array.shape[axis]
    n_draws = math.prod(shape)
    if n_draws == 0:
        return enp.zeros(shape, array.dtype)
    if n_inputs <= 0:
        raise EmberValueError("choice: a must be positive unless no samples are taken")
    if not replace and n_draws > n_inputs:
        raise EmberValueError(f"choice: cannot take a larger sample (size {n_draws}) than the "
                              f"population (size {n_inputs}) with replace=False")
    if p is None:
        if replace:
            picked = randint(key, shape, 0, n_inputs)
        else:
            picked = permutation(key, n_inputs)[:n_draws]
    else:
        probabilities = ensure_array(p)
        if not dtypes.is_floating(probabilities.dtype):
            probabilities = lax.convert_element_type(probabilities, dtypes.default_float())
        if probabilities.shape != (n_inputs,):
            raise EmberValueError(f"choice: p of shape {probabilities.shape} must have shape "
                                  f"({n_inputs},)")
        if replace:
            cumulative = enp.cumsum(probabilities)
            r = enp.multiply(cumulative[-1], enp.subtract(1, uniform(key, shape, cumulative.dtype)))
            picked = enp.searchsorted(cumulative, r)
        else:
            scores = enp.add(gumbel(key, (n_inputs,), probabilities.dtype),
                             enp.log(probabilities))
            picked = lax.top_k(scores, n_draws)[1]
    picked = lax.convert_element_type(picked, dtypes.default_int())
    if array.ndim == 0:
        return enp.reshape(picked, shape)
    result = enp.take(array, enp.ravel(picked), axis=axis, mode="clip")
    return enp.reshape(result, array.shape[:axis] + shape + array.shape[axis + 1:])


def exponential(key: Any, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Exponential samples with rate 1: ``-log1p(-u)``."""
    key = check_key(key, "exponential")
    u = uniform(key, shape, _float_dtype(dtype, "exponential"))
    return lax.neg(lax.log1p(lax.neg(u)))


def laplace(key: Any, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Laplace samples with scale 1."""
    key = check_key(key, "laplace")
    dtype = _float_dtype(dtype, "laplace")
    u = uniform(key, shape, dtype, -1.0 + float(dtypes.finfo(dtype).epsneg), 1.0)
    return lax.mul(lax.sign(u), lax.log1p(lax.neg(lax.abs(u))))


def logistic(key: Any, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Standard logistic samples: ``log(u / (1 - u))``."""
    key = check_key(key, "logistic")
    dtype = _float_dtype(dtype, "logistic")
    u = uniform(key, shape, dtype, float(dtypes.finfo(dtype).tiny), 1.0)
    return lax.log(lax.div(u, lax.sub(1.0, u)))


def cauchy(key: Any, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Standard Cauchy samples: ``tan(pi (u - 1/2))``."""
    key = check_key(key, "cauchy")
    dtype = _float_dtype(dtype, "cauchy")
    u = uniform(key, shape, dtype, float(dtypes.finfo(dtype).eps), 1.0)
    return lax.tan(lax.mul(lax.sub(u, 0.5), math.pi))


def rademacher(key: Any, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Random signs: -1 or +1 with equal probability."""
    key = check_key(key, "rademacher")
    dtype = dtypes.canonicalize(dtype) if dtype is not None else dtypes.default_int()
    samples = lax.convert_element_type(bernoulli(key, 0.5, shape_arg(shape)), dtype)
    return lax.sub(lax.mul(samples, 2), 1)


def multivariate_normal(key: Any, mean: Any, cov: Any, shape: Sequence[int] | None = None,
                        dtype: Any = None, method: str = "cholesky") -> Any:
    """Samples of ``N(mean, cov)`` (``cov`` factored by Cholesky, or 'eigh')."""
    key = check_key(key, "multivariate_normal")
    dtype = _float_dtype(dtype, "multivariate_normal")
    mean, cov = ensure_array(mean, dtype), ensure_array(cov, dtype)
    if method not in ("cholesky", "eigh"):
        raise EmberValueError(f"multivariate_normal: method must be 'cholesky' or 'eigh', got "
                              f"{method!r}")
    if mean.ndim < 1 or cov.shape[-2:] != (mean.shape[-1],) * 2:
        raise EmberValueError(f"multivariate_normal: mean of shape {mean.shape} needs cov of "
                              f"shape (..., {mean.shape[-1:]}, {mean.shape[-1:]}), got {cov.shape}")
    batch = broadcast_shapes(mean.shape[:-1], cov.shape[:-2])
    shape = batch if shape is None else shape_arg(shape)
    if method == "cholesky":
        factor = enp.linalg.cholesky(cov)
    else:
        w, v = enp.linalg.eigh(cov)
        factor = enp.multiply(v, enp.sqrt(enp.maximum(w, 0))[..., None, :])
    noise = normal(key, shape + mean.shape[-1:], dtype)
    return enp.add(mean, enp.einsum("...ij,...j->...i", factor, noise))
