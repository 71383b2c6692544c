"""Samplers built on the gamma distribution: gamma, loggamma, beta, dirichlet, chisquare,
Student's t and F.

Gamma samples follow JAX's construction step by step (Marsaglia and Tsang's rejection
method, one key per element split from the key, each element's loop drawing from its
own key), so a seed gives JAX's samples up to floating-point rounding. They are
differentiable in the shape parameter by implicit reparameterization, as JAX's (through
the derivative of ``gammainc``), so beta, dirichlet, chisquare, t and F samples are too.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ember import lax
from ember import numpy as enp
from ember.core import dtypes
from ember.errors import EmberValueError
from ember.numpy._promotion import broadcast_shapes, broadcast_to_shape, ensure_array
from ember.random._distributions import _float_dtype, exponential, normal, uniform
from ember.random._keys import check_key, shape_arg, split
from ember.transforms.api import jvp, stop_gradient
from ember.transforms.custom import custom_jvp
from ember.transforms.vmap import vmap

__all__ = ["gamma", "loggamma", "beta", "dirichlet", "chisquare", "t", "f"]


def sample_shape(name: str, shape: Sequence[int] | None, *params: Any) -> tuple[int, ...]:
    """``shape``, or the parameters' broadcast shape; parameters must broadcast to it."""
    shapes = [np.shape(p) for p in params]
    if shape is None:
        return broadcast_shapes(*shapes) if shapes else ()
    shape = shape_arg(shape)
    try:
        compatible = broadcast_shapes(shape, *shapes) == shape
    except ValueError:
        compatible = False
    if not compatible:
        raise EmberValueError(f"{name} parameter shapes {shapes} must broadcast to the shape "
                         f"argument {shape} (their broadcast must equal it); pass "
                         f"shape=None for the parameters' shape")
    return shape


def _gamma_one(key: Any, alpha: Any, log_space: bool) -> Any:
    """One Gamma(alpha) sample (alpha < 1 through Gamma(alpha + 1) * U ** (1 / alpha))."""
    dtype = alpha.dtype
    boost = lax.ge(alpha, np.array(1, dtype))
    alpha_orig = alpha
    alpha = lax.select(boost, alpha, lax.add(alpha, np.array(1, dtype)))
    d = lax.sub(alpha, np.array(1 / 3, dtype))
    c = lax.div(np.array(1 / 3, dtype), lax.sqrt(d))
    zero, one = np.array(0, dtype), np.array(1, dtype)

    def rejected(state: tuple) -> Any:
        _, x2, v, u = state
        squeeze = lax.ge(u, lax.sub(one, lax.mul(np.array(0.0331, dtype), lax.mul(x2, x2))))
        log_test = lax.ge(lax.log(u), lax.add(lax.mul(x2, np.array(0.5, dtype)),
                                             lax.mul(d, lax.add(lax.sub(one, v), lax.log(v)))))
        return lax.bitwise_and(squeeze, log_test)

    def propose(state: tuple) -> tuple:
        def positive_v(kxv: tuple) -> tuple:
            k, sub = split(kxv[0])
            x = normal(sub, (), dtype)
            return k, x, lax.add(one, lax.mul(x, c))

        k, x_key, u_key = split(state[0], 3)
        _, x, v = lax.while_loop(lambda kxv: lax.le(kxv[2], zero), positive_v,
                                 (x_key, zero, np.array(-1, dtype)))
        return k, lax.mul(x, x), lax.mul(lax.mul(v, v), v), uniform(u_key, (), dtype)

    key, subkey = split(key)
    _, _, v, _ = lax.while_loop(rejected, propose, (key, zero, one, np.array(2, dtype)))
    if log_space:
        log_u = lax.neg(exponential(subkey, (), dtype))
        log_boost = lax.select(lax.bitwise_or(boost, lax.eq(log_u, zero)), zero,
                               lax.mul(log_u, lax.div(one, alpha_orig)))
        return lax.add(lax.add(lax.log(d), lax.log(v)), log_boost)
    u = lax.sub(one, uniform(subkey, (), dtype))
    return lax.mul(lax.mul(d, v), lax.select(boost, one, lax.pow(u, lax.div(one, alpha_orig))))


def _sampler(log_space: bool) -> custom_jvp:
    def sample(key: Any, a: Any) -> Any:
        keys = split(key, max(a.size, 1))[:a.size]
        flat = vmap(lambda k, x: _gamma_one(k, x, log_space))(keys, enp.ravel(a))
        return enp.reshape(flat, a.shape)

    sampler = custom_jvp(sample)

    @sampler.defjvp
    def _jvp(primals: tuple, tangents: tuple) -> tuple:
        """Implicit reparameterization: x moves with a so that P(a, x), its CDF, stays
        put, ``dx/da = -(dP/da) / p(x)``."""
        from ember.scipy._incomplete import gammainc  # (ember.scipy loads ember.nn)

        key, a = primals
        out = sampler(key, a)
        x = lax.exp(out) if log_space else out
        x = enp.maximum(x, float(dtypes.finfo(a.dtype).tiny))
        _, moved = jvp(lambda shape: gammainc(shape, x), (a,), (tangents[1],))
        density = enp.exp((a - 1) * enp.log(x) - x - lax.lgamma(a))
        dx = enp.where(density > 0, -moved / enp.where(density > 0, density, 1.0), 0.0)
        return out, dx / x if log_space else dx

    return sampler


_GAMMA = {False: _sampler(False), True: _sampler(True)}


def _gamma(key: Any, a: Any, shape: Sequence[int] | None, dtype: Any, log_space: bool,
           name: str) -> Any:
    key = check_key(key, name)
    dtype = _float_dtype(dtype, name)
    a = ensure_array(a, dtype)
    shape = sample_shape(name, shape, a)
    a = broadcast_to_shape(a, shape)
    return _GAMMA[log_space](key, a)


def gamma(key: Any, a: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Gamma(a) samples of unit scale (divide by a rate for Gamma(a, rate))."""
    return _gamma(key, a, shape, dtype, False, "gamma")


def loggamma(key: Any, a: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """The logarithm of Gamma(a) samples, computed in log space (accurate for small a)."""
    return _gamma(key, a, shape, dtype, True, "loggamma")


def beta(key: Any, a: Any, b: Any, shape: Sequence[int] | None = None,
         dtype: Any = None) -> Any:
    """Beta(a, b) samples: ``Ga / (Ga + Gb)`` from log-gamma samples scaled by their max."""
    key = check_key(key, "beta")
    dtype = _float_dtype(dtype, "beta")
    a, b = ensure_array(a, dtype), ensure_array(b, dtype)
    shape = sample_shape("beta", shape, a, b)
    key_a, key_b = split(key)
    log_a = loggamma(key_a, broadcast_to_shape(a, shape), shape, dtype)
    log_b = loggamma(key_b, broadcast_to_shape(b, shape), shape, dtype)
    top = lax.max(log_a, log_b)
    scaled_a, scaled_b = enp.exp(log_a - top), enp.exp(log_b - top)
    return scaled_a / (scaled_a + scaled_b)


def dirichlet(key: Any, alpha: Any, shape: Sequence[int] | None = None,
              dtype: Any = None) -> Any:
    """Dirichlet(alpha) samples over the last axis of ``alpha`` (``shape`` is the batch
    shape): the softmax of log-gamma samples."""
    key = check_key(key, "dirichlet")
    dtype = _float_dtype(dtype, "dirichlet")
    alpha = ensure_array(alpha, dtype)
    if alpha.ndim < 1:
        raise EmberValueError(f"dirichlet requires alpha.ndim >= 1, got alpha.ndim == {alpha.ndim}")
    batch = sample_shape("dirichlet", shape, np.empty(alpha.shape[:-1]))
    logs = loggamma(key, alpha, batch + alpha.shape[-1:], dtype)
    unnormalized = enp.exp(logs - stop_gradient(enp.max(logs, axis=-1, keepdims=True)))
    return unnormalized / enp.sum(unnormalized, axis=-1, keepdims=True)


def chisquare(key: Any, df: Any, shape: Sequence[int] | None = None,
              dtype: Any = None) -> Any:
    """Chi-square samples with ``df`` degrees of freedom: ``2 Gamma(df / 2)``."""
    key = check_key(key, "chisquare")
    dtype = _float_dtype(dtype, "chisquare")
    half = ensure_array(df, dtype) / 2
    shape = sample_shape("chisquare", shape, half)
    return enp.exp(loggamma(key, half, shape, dtype)) * 2


def t(key: Any, df: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Student's t samples: ``N / sqrt(Gamma(df / 2) / (df / 2))``."""
    key = check_key(key, "t")
    dtype = _float_dtype(dtype, "t")
    df = ensure_array(df, dtype)
    shape = sample_shape("t", shape, df)
    key_n, key_g = split(key)
    n = normal(key_n, shape, dtype)
    half = df / 2
    return n * enp.sqrt(half / gamma(key_g, half, shape, dtype))


def f(key: Any, dfnum: Any, dfden: Any, shape: Sequence[int] | None = None,
      dtype: Any = None) -> Any:
    """F(dfnum, dfden) samples: a ratio of chi-squares, each over its degrees."""
    key = check_key(key, "f")
    dtype = _float_dtype(dtype, "f")
    dfnum, dfden = ensure_array(dfnum, dtype), ensure_array(dfden, dtype)
    shape = sample_shape("f", shape, dfnum, dfden)
    key_den, key_num = split(key)
    num = chisquare(key_num, dfnum, shape, dtype) / dfnum
    return num / (chisquare(key_den, dfden, shape, dtype) / dfden)

