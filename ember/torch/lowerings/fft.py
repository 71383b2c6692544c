"""Lowerings of ATen's FFTs and complex-number ops.

ATen's FFT overloads take their ``dim`` as a list and their normalization as an int code
(``fft_norm_mode``: 0 none, 1 by 1/sqrt(n), 2 by 1/n, n the signal's size over ``dim``)
which applies whatever the direction: ``torch.fft``'s ``norm`` strings are already
resolved into that code. Any padding or trimming of the signal (``torch.fft``'s ``n`` /
``s``) is done by the graph before the transform, except ``_fft_c2r``'s output length.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

import ember.numpy as jnp
from ember import dtypes, lax
from ember.torch.lowerings.table import aten, cast, lowers
from ember.torch.promotion import Kind, promote

# ``ember.numpy.fft``'s ``norm`` that leaves each direction's transform unnormalized
# (a forward transform is unscaled under 'backward', an inverse one under 'forward').
_UNSCALED_FORWARD = "backward"
_UNSCALED_INVERSE = "forward"


def _fft_dims(dim: Sequence[int], ndim: int) -> list[int]:
    """ATen's FFT dims, non-negative, in the order given (the last is a real
    transform's halved dim)."""
    return [d % ndim for d in dim]


def _normalize(x: Any, normalization: int, signal_size: int) -> Any:
    """``x`` scaled by ATen's ``normalization`` code for a signal of ``signal_size``."""
    if normalization == 1:
        return x * (1 / math.sqrt(signal_size))
    if normalization == 2:
        return x * (1 / signal_size)
    return x


def _is_complex(dtype: np.dtype) -> bool:
    return dtypes.issubdtype(dtype, np.complexfloating)


@lowers(aten._fft_r2c.default)
def _fft_r2c(x: Any, dim: Sequence[int], normalization: int, onesided: bool) -> Any:
    """Forward transform of a real signal; ``onesided`` keeps the non-negative frequencies
    (``n // 2 + 1``) of the last of ``dim``."""
    dims = _fft_dims(dim, x.ndim)
    signal_size = math.prod(x.shape[d] for d in dims)
    if onesided:
        out = jnp.fft.rfftn(x, axes=dims, norm=_UNSCALED_FORWARD)
    else:
        out = jnp.fft.fftn(x, axes=dims, norm=_UNSCALED_FORWARD)  # (in x's complex dtype)
    return _normalize(out, normalization, signal_size)


@lowers(aten._fft_c2c.default)
def _fft_c2c(x: Any, dim: Sequence[int], normalization: int, forward: bool) -> Any:
    """Forward or inverse transform of a complex signal over ``dim``."""
    dims = _fft_dims(dim, x.ndim)
    signal_size = math.prod(x.shape[d] for d in dims)
    if forward:
        out = jnp.fft.fftn(x, axes=dims, norm=_UNSCALED_FORWARD)
    else:
        out = jnp.fft.ifftn(x, axes=dims, norm=_UNSCALED_INVERSE)
    return _normalize(out, normalization, signal_size)


@lowers(aten._fft_c2r.default)
def _fft_c2r(x: Any, dim: Sequence[int], normalization: int, last_dim_size: int) -> Any:
    """Inverse transform of a Hermitian signal given by its non-negative frequencies along
    the last of ``dim``: a real signal whose last dim has ``last_dim_size`` points."""
    dims = _fft_dims(dim, x.ndim)
    sizes = [x.shape[d] for d in dims[:-1]] + [last_dim_size]
    out = jnp.fft.irfftn(x, s=sizes, axes=dims, norm=_UNSCALED_INVERSE)
    return _normalize(out, normalization, math.prod(sizes))


# --- complex numbers --------------------------------------------------------------------

@lowers(aten.view_as_real.default)
def _view_as_real(x: Any) -> Any:
    """A complex tensor's parts along a new last dim of 2 (real, imaginary)."""
    return jnp.stack([lax.real(x), lax.imag(x)], axis=-1)


@lowers(aten.view_as_complex.default)
def _view_as_complex(x: Any) -> Any:
    """The complex tensor whose parts are the last dim (of 2) of the real ``x``."""
    return lax.complex(x[..., 0], x[..., 1])


@lowers(aten.complex.default)
def _complex(real: Any, imag: Any) -> Any:
    """ATen takes two floating tensors of one dtype, broadcast together."""
    real, imag = jnp.broadcast_arrays(real, imag)
    return lax.complex(real, imag)


@lowers(aten.polar.default)
def _polar(magnitude: Any, angle: Any) -> Any:
    magnitude, angle = jnp.broadcast_arrays(magnitude, angle)
    return lax.complex(magnitude * jnp.cos(angle), magnitude * jnp.sin(angle))


@lowers(aten.angle.default)
def _angle(x: Any) -> Any:
    """A complex number's argument; of a real number, pi where it is negative, else 0
    (0 for -0.0 too, and NaN stays NaN), as ATen has it."""
    if _is_complex(x.dtype):
        return lax.atan2(lax.imag(x), lax.real(x))
    compute, result = promote(x, kind=Kind.INT_TO_FLOAT)
    x = cast(x, compute)
    zero = jnp.zeros((), x.dtype)
    out = jnp.where(x < zero, jnp.asarray(math.pi, x.dtype), zero)
    return cast(jnp.where(jnp.isnan(x), x, out), result)


@lowers(aten._conj.default, aten._conj_physical.default)
def _conj(x: Any) -> Any:
    return lax.conj(x) if _is_complex(x.dtype) else x
