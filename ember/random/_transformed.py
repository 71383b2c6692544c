"""Samplers that transform a few basic draws (uniform, normal, exponential, gamma):
orthogonal matrices, Pareto, Weibull, Rayleigh, Maxwell, Wald, triangular, log-normal,
generalized normal and points in an Lp ball, each JAX's construction (so a seed gives
JAX's samples)."""
from __future__ import annotations

from typing import Any, Sequence

from ember import lax
from ember import numpy as enp
from ember.errors import EmberValueError
from ember.numpy._promotion import broadcast_to_shape, concrete, ensure_array
from ember.random._distributions import _float_dtype, exponential, normal, rademacher, uniform
from ember.random._gamma_family import gamma, sample_shape
from ember.random._keys import check_key, shape_arg, split

__all__ = ["orthogonal", "pareto", "weibull_min", "rayleigh", "maxwell",
           "double_sided_maxwell", "wald", "triangular", "lognormal", "generalized_normal",
           "ball"]


def orthogonal(key: Any, n: int, shape: Sequence[int] = (), dtype: Any = None,
               m: int | None = None) -> Any:
    """Haar-distributed orthogonal (complex dtype: unitary) ``n x m`` matrices, batched
    by ``shape``: Q of a Gaussian matrix's QR, its columns signed by R's diagonal
    (semi-orthogonal when ``n != m``)."""
    key = check_key(key, "orthogonal")
    n = int(concrete(n, "orthogonal's n"))
    m = n if m is None else int(concrete(m, "orthogonal's m"))
    if n < 0 or m < 0:
        raise EmberValueError(f"orthogonal: n and m must be non-negative, got {n}, {m}")
    z = normal(key, (*shape_arg(shape), max(n, m), min(n, m)), dtype)
    q, r = enp.linalg.qr(z)
    d = enp.diagonal(r, axis1=-2, axis2=-1)
    x = q * enp.expand_dims(enp.sign(d), -2)
    return enp.swapaxes(x, -1, -2) if n < m else x


def _params(name: str, shape: Any, dtype: Any, *params: Any) -> tuple:
    dtype = _float_dtype(dtype, name)
    arrays = [ensure_array(p, dtype) for p in params]
    return (sample_shape(name, shape, *arrays), dtype, *arrays)


def pareto(key: Any, b: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Pareto samples of shape ``b`` on ``[1, inf)``: ``exp(E / b)``."""
    key = check_key(key, "pareto")
    shape, dtype, b = _params("pareto", shape, dtype, b)
    return lax.exp(exponential(key, shape, dtype) / b)


def weibull_min(key: Any, scale: Any, concentration: Any, shape: Sequence[int] = (),
                dtype: Any = None) -> Any:
    """Weibull samples: the inverse CDF at a uniform."""
    key = check_key(key, "weibull_min")
    dtype = _float_dtype(dtype, "weibull_min")
    u = uniform(key, shape_arg(shape), dtype)
    scale, concentration = ensure_array(scale, dtype), ensure_array(concentration, dtype)
    return enp.power(-enp.log1p(-u), 1.0 / concentration) * scale


def rayleigh(key: Any, scale: Any, shape: Sequence[int] | None = None,
             dtype: Any = None) -> Any:
    """Rayleigh samples: ``scale * sqrt(-2 log u)``."""
    key = check_key(key, "rayleigh")
    shape, dtype, scale = _params("rayleigh", shape, dtype, scale)
    u = uniform(key, shape, dtype)
    return broadcast_to_shape(scale, shape) * lax.sqrt(lax.log(u) * -2)


def maxwell(key: Any, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """One-sided Maxwell samples: the norm of a 3-vector of standard normals."""
    key = check_key(key, "maxwell")
    dtype = _float_dtype(dtype, "maxwell")
    return enp.linalg.norm(normal(key, (*shape_arg(shape), 3), dtype), axis=-1)


def double_sided_maxwell(key: Any, loc: Any, scale: Any, shape: Sequence[int] = (),
                         dtype: Any = None) -> Any:
    """Maxwell samples with a random sign, scaled and shifted; the result's shape is
    ``shape`` (empty: the parameters' broadcast shape) followed by the parameters'
    broadcast shape, as JAX's."""
    key = check_key(key, "double_sided_maxwell")
    dtype = _float_dtype(dtype, "double_sided_maxwell")
    loc, scale = ensure_array(loc, dtype), ensure_array(scale, dtype)
    params = sample_shape("double_sided_maxwell", None, loc, scale)
    shape = (shape_arg(shape) or params) + params  # (JAX's: () means the parameters')
    maxwell_key, sign_key = split(key)
    return rademacher(sign_key, shape, dtype) * maxwell(maxwell_key, shape, dtype) * scale + loc


def wald(key: Any, mean: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Wald (inverse Gaussian) samples of unit shape: Michael, Schucany and Haas's
    transformation of a normal with a uniform choice between its two roots."""
    key = check_key(key, "wald")
    shape, dtype, mean = _params("wald", shape, dtype, mean)
    k1, k2 = split(key, 2)
    mean = broadcast_to_shape(mean, shape)
    y = lax.integer_pow(normal(k1, shape, dtype), 2)
    z = uniform(k2, shape, dtype)
    mean_sq = lax.integer_pow(mean, 2)
    root = lax.sqrt(4 * mean * y + mean_sq * lax.integer_pow(y, 2))
    x = mean + mean_sq * y / 2 - mean / 2 * root
    return lax.select(lax.le(z, mean / (mean + x)), x, mean_sq / x)


def triangular(key: Any, left: Any, mode: Any, right: Any,
               shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Triangular samples on ``[left, right]`` peaking at ``mode``: the inverse CDF."""
    key = check_key(key, "triangular")
    shape, dtype, left, mode, right = _params("triangular", shape, dtype, left, mode, right)
    left, mode, right = (broadcast_to_shape(v, shape) for v in (left, mode, right))
    u = uniform(key, shape, dtype)
    below = left + lax.sqrt(u * (right - left) * (mode - left))
    above = right - lax.sqrt((1 - u) * (right - left) * (right - mode))
    return lax.select(u < (mode - left) / (right - left), below, above)


def lognormal(key: Any, sigma: Any = 1.0, shape: Sequence[int] | None = None,
              dtype: Any = None) -> Any:
    """Log-normal samples: ``exp(sigma N)``."""
    key = check_key(key, "lognormal")
    shape, dtype, sigma = _params("lognormal", shape, dtype, sigma)
    return lax.exp(normal(key, shape, dtype) * sigma)


def generalized_normal(key: Any, p: float, shape: Sequence[int] = (),
                       dtype: Any = None) -> Any:
    """Generalized normal samples, density proportional to ``exp(-|x| ** p)``."""
    key = check_key(key, "generalized_normal")
    dtype = _float_dtype(dtype, "generalized_normal")
    shape = shape_arg(shape)
    keys = split(key)
    g = gamma(keys[0], 1 / p, shape, dtype)
    return rademacher(keys[1], shape, dtype) * g ** (1 / p)


def ball(key: Any, d: int, p: float = 2, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Points uniform in the ``d``-dimensional unit Lp ball (Barthe et al.)."""
    key = check_key(key, "ball")
    dtype = _float_dtype(dtype, "ball")
    shape = shape_arg(shape)
    k1, k2 = split(key)
    g = generalized_normal(k1, p, (*shape, int(concrete(d, "ball's d"))), dtype)
    e = exponential(k2, shape, dtype)
    return g / (((enp.abs(g) ** p).sum(-1) + e) ** (1 / p))[..., None]
