"""Count samplers: Poisson, binomial, multinomial and geometric.

Each follows JAX's construction (which follows TensorFlow's and NumPy's): Knuth's
product of uniforms for small means and Hormann's transformed rejection (PTRS, BTRS)
for large ones, whole arrays drawn per round until every element is accepted, so a
seed gives JAX's samples.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ember import lax
from ember import numpy as enp
from ember.core import dtypes
from ember.errors import EmberTypeError
from ember.numpy._promotion import broadcast_to_shape, ensure_array
from ember.random._distributions import _float_dtype, uniform
from ember.random._gamma_family import sample_shape
from ember.random._keys import check_key, shape_arg, split

__all__ = ["poisson", "binomial", "multinomial", "geometric"]


def _int_dtype(dtype: Any, name: str) -> np.dtype:
    dtype = dtypes.canonicalize(dtype) if dtype is not None else dtypes.default_int()
    if not dtypes.is_integer(dtype):
        raise EmberTypeError(f"{name}: dtype must be an integer dtype, got {dtype}")
    return dtype


def _poisson_knuth(key: Any, lam: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    """The number of uniforms whose product stays above ``exp(-lam)``."""
    def step(state: tuple) -> tuple:
        k, key, log_prod = state
        key, sub = split(key)
        k = lax.select(log_prod > -lam, k + 1, k)
        return k, key, log_prod + enp.log(uniform(sub, shape, np.float32))

    init = (enp.zeros(shape, dtype), key, enp.zeros(shape, np.float32))
    k = lax.while_loop(lambda s: enp.any(s[2] > -lam), step, init)[0]
    return (k - 1).astype(dtype)


def _poisson_rejection(key: Any, lam: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    """Hormann's PTRS: a proposal from a transformed uniform, accepted by a squeeze or
    by the log-mass test."""
    log_lam = lax.log(lam)
    b = 0.931 + 2.53 * lax.sqrt(lam)
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2)

    def step(state: tuple) -> tuple:
        k_out, accepted, key = state
        key, sub_u, sub_v = split(key, 3)
        u = uniform(sub_u, shape, lam.dtype) - 0.5
        v = uniform(sub_v, shape, lam.dtype)
        u_shifted = 0.5 - abs(u)
        k = lax.floor((2 * a / u_shifted + b) * u + lam + 0.43)
        s = lax.log(v * inv_alpha / (a / (u_shifted * u_shifted) + b))
        t = -lam + k * log_lam - lax.lgamma(k + 1)
        squeezed = (u_shifted >= 0.07) & (v <= v_r)
        rejected = (k < 0) | ((u_shifted < 0.013) & (v > u_shifted))
        accept = squeezed | (~rejected & (s <= t))
        return lax.select(accept, k, k_out), accepted | accept, key

    init = (enp.full(shape, -1, lam.dtype), enp.zeros(shape, bool), key)
    return lax.while_loop(lambda s: enp.any(~s[1]), step, init)[0].astype(dtype)


def poisson(key: Any, lam: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Poisson(lam) counts (``lam >= 0``, taken as float32 as in JAX)."""
    key = check_key(key, "poisson")
    dtype = _int_dtype(dtype, "poisson")
    shape = shape_arg(shape) if shape is not None else np.shape(lam)
    lam = broadcast_to_shape(ensure_array(lam).astype(np.float32), shape)
    small = (lam != lam) | (lam < 10)
    knuth = _poisson_knuth(key, lax.select(small, lam, enp.zeros_like(lam)), shape, dtype)
    rejection = _poisson_rejection(key, lax.select(small, enp.full_like(lam, 1e5), lam),
                                   shape, dtype)
    result = lax.select(small, knuth, rejection)
    return lax.select(lam == 0, enp.zeros_like(result), result)


_STIRLING_TAIL = np.array([0.0810614667953272, 0.0413406959554092, 0.0276779256849983,
                           0.02079067210376509, 0.0166446911898211, 0.0138761288230707,
                           0.0118967099458917, 0.0104112652619720, 0.00925546218271273,
                           0.00833056343336287])


def _stirling_tail(k: Any) -> Any:
    """``log k! - log(Stirling's approximation of k!)``: a table below 10, a series above."""
    table = enp.asarray(_STIRLING_TAIL.astype(k.dtype))
    low = k <= 9
    k = lax.clamp(np.array(0, k.dtype), k, np.array(9, k.dtype))
    kp1sq = (k + 1) * (k + 1)
    approx = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1)
    return lax.select(low, table[enp.floor(k).astype(np.int32)], approx)


def _binomial_inversion(key: Any, count: Any, prob: Any, shape: tuple[int, ...],
                        dtype: np.dtype) -> Any:
    """The number of geometric waiting times that fit in ``count`` trials."""
    log_q = enp.log1p(-prob)

    def step(state: tuple) -> tuple:
        n_geom, geom_sum, key = state
        sub, key = split(key)
        n_geom = lax.select(geom_sum <= count, n_geom + 1, n_geom)
        geom = enp.ceil(enp.log(uniform(sub, shape, prob.dtype)) / log_q)
        return n_geom, geom_sum + geom, key

    init = (enp.zeros(shape, prob.dtype), enp.zeros(shape, prob.dtype), key)
    k = lax.while_loop(lambda s: enp.any(s[1] <= count), step, init)[0]
    return (k - 1).astype(dtype)


def _btrs(key: Any, count: Any, prob: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    """Hormann's BTRS: transformed rejection with a Stirling-corrected bound."""
    stddev = enp.sqrt(count * prob * (1 - prob))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = count * prob + 0.5
    v_r = 0.92 - 4.2 / b
    r = prob / (1 - prob)
    alpha = (2.83 + 5.1 / b) * stddev
    m = enp.floor((count + 1) * prob)

    def step(state: tuple) -> tuple:
        k_out, accepted, key = state
        key, sub_u, sub_v = split(key, 3)
        u = uniform(sub_u, shape, prob.dtype) - 0.5
        v = uniform(sub_v, shape, prob.dtype)
        us = 0.5 - enp.abs(u)
        squeezed = (us >= 0.07) & (v <= v_r)
        k = enp.floor((2 * a / us + b) * u + c)
        rejected = (k < 0) | (k > count)
        v = enp.log(v * alpha / (a / (us * us) + b))
        bound = ((m + 0.5) * enp.log((m + 1) / (r * (count - m + 1)))
                 + (count + 1) * enp.log((count - m + 1) / (count - k + 1))
                 + (k + 0.5) * enp.log(r * (count - k + 1) / (k + 1))
                 + _stirling_tail(m) + _stirling_tail(count - m)
                 - _stirling_tail(k) - _stirling_tail(count - k))
        accept = squeezed | (~rejected & (v <= bound))
        return lax.select(accept, k, k_out), accepted | accept, key

    init = (enp.full(shape, -1, prob.dtype), enp.zeros(shape, bool), key)
    return lax.while_loop(lambda s: enp.any(~s[1]), step, init)[0].astype(dtype)


def binomial(key: Any, n: Any, p: Any, shape: Sequence[int] | None = None,
             dtype: Any = None) -> Any:
    """Binomial(n, p) counts, as floats of ``dtype`` (NaN for an invalid n or p; inf for
    an infinite n), as JAX's."""
    key = check_key(key, "binomial")
    dtype = _float_dtype(dtype, "binomial")
    shape = sample_shape("binomial", shape, n, p)
    prob = ensure_array(p)
    if not dtypes.is_floating(prob.dtype):
        prob = prob.astype(dtypes.default_float())
    count = broadcast_to_shape(ensure_array(n).astype(prob.dtype), shape)
    prob = broadcast_to_shape(prob, shape)
    below_half = prob < 0.5
    q = lax.select(below_half, prob, 1.0 - prob)
    bad_count = (count != count) | (count < 0.0)
    infinite = enp.isinf(count)
    bad_q = (q != q) | (q < 0.0)
    q = lax.select(bad_q, enp.full_like(q, 0.01), q)
    invert = bad_count | (count * q <= 10.0)
    count = enp.floor(count)
    inverted = _binomial_inversion(key, lax.select(invert, count, enp.zeros_like(count)), q,
                                   shape, dtype)
    rejected = _btrs(key, lax.select(invert, enp.full_like(count, 1e4), count),
                     lax.select(invert, enp.full_like(q, 0.5), q), shape, dtype)
    samples = lax.select(invert, inverted, rejected)
    invalid = bad_q | bad_count
    samples = lax.select(invalid, enp.full_like(samples, np.nan), samples)
    samples = lax.select(infinite & ~invalid, enp.full_like(samples, np.inf), samples)
    return lax.select(below_half | bad_count | (q != q) | infinite, samples,
                      count.astype(dtype) - samples)


def multinomial(key: Any, n: Any, p: Any, *, shape: Sequence[int] | None = None,
                dtype: Any = None, unroll: int | bool = 1) -> Any:
    """Counts of ``n`` draws over the categories of ``p``'s last axis (``shape``, if given,
    includes that axis): one binomial per category, of what the others left."""
    key = check_key(key, "multinomial")
    n, p = ensure_array(n), ensure_array(p)
    float_dtype = enp.result_type(n.dtype, p.dtype, dtypes.default_float()) \
        if not (dtypes.is_floating(n.dtype) or dtypes.is_floating(p.dtype)) else \
        enp.result_type(n.dtype, p.dtype)
    n, p = n.astype(float_dtype), p.astype(float_dtype)
    shape = p.shape if shape is None else shape_arg(shape)
    n = broadcast_to_shape(n, shape[:-1])
    p = enp.moveaxis(broadcast_to_shape(p, shape), -1, 0)
    remaining = enp.cumsum(p[::-1], axis=0)[::-1]
    ratios = p / enp.where(remaining == 0, 1, remaining)

    def draw(remainder: Any, ratio_key: tuple) -> tuple:
        ratio, sub = ratio_key
        count = binomial(sub, remainder, enp.clip(ratio, 0, 1), dtype=remainder.dtype)
        return remainder - count, count

    _, counts = lax.scan(draw, n, (ratios, split(key, ratios.shape[0])), unroll=unroll)
    out_dtype = _float_dtype(None, "multinomial") if dtype is None else \
        dtypes.canonicalize(dtype)
    return enp.moveaxis(counts, 0, -1).astype(out_dtype)


def geometric(key: Any, p: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """The number of Bernoulli(p) trials up to the first success (1, 2, ...)."""
    key = check_key(key, "geometric")
    dtype = _int_dtype(dtype, "geometric")
    p = ensure_array(p)
    if not dtypes.is_floating(p.dtype):
        p = p.astype(dtypes.default_float())
    shape = sample_shape("geometric", shape, p)
    u = uniform(key, shape, p.dtype)
    log_u = enp.log(enp.where(u == 0, 1, u))
    return (lax.floor(log_u / broadcast_to_shape(enp.log1p(-p), shape)) + 1).astype(dtype)
