"""``ember.numpy.fft``: discrete Fourier transforms (NumPy's ``numpy.fft`` and the Array
API fft extension) on the ``fft`` primitive.

Multi-dimensional transforms apply one-dimensional ones axis by axis. ``norm`` is
'backward' (the default: the inverse divides by n), 'ortho' (both by sqrt(n)) or
'forward' (the forward transform divides by n). Real input is transformed in the
default complex dtype (complex64 unless x64 is on).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ember import lax
from ember.core import dtypes
from ember.errors import EmberValueError
from ember.numpy._axes import canonicalize_axes, canonicalize_axis
from ember.numpy._manipulation import moveaxis, roll
from ember.numpy._promotion import ensure_array, inexact_dtype

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2",
           "fftn", "ifftn", "rfftn", "irfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

_NORMS = ("backward", "ortho", "forward")


def _complex_dtype(dtype: np.dtype) -> np.dtype:
    if dtypes.is_complex(dtype):
        return dtype
    return dtypes.complex128 if inexact_dtype(dtype) == dtypes.float64 else dtypes.complex64


def _real_dtype(dtype: np.dtype) -> np.dtype:
    return dtypes.float64 if dtype in (dtypes.float64, dtypes.complex128) else dtypes.float32


def _resize(x: Any, axis: int, n: int) -> Any:
    """Truncate or zero-pad ``axis`` to length ``n``."""
    size = x.shape[axis]
    if n < 1:
        raise EmberValueError(f"fft: invalid number of points n={n} (must be >= 1)")
    if n < size:
        return lax.slice_in_dim(x, 0, n, axis=axis)
    if n > size:
        config = [(0, 0, 0)] * x.ndim
        config[axis] = (0, n - size, 0)
        return lax.pad(x, np.zeros((), x.dtype), config)
    return x


def _scale(x: Any, n: int, norm: str | None, inverse: bool) -> Any:
    """Rescale the primitive's 'backward' result to ``norm``."""
    norm = "backward" if norm is None else norm
    if norm not in _NORMS:
        raise EmberValueError(f"fft: norm must be one of {_NORMS}, got {norm!r}")
    if norm == "backward":
        return x
    if norm == "ortho":
        factor = math.sqrt(n) if inverse else 1 / math.sqrt(n)
    else:  # forward
        factor = n if inverse else 1 / n
    return lax.mul(x, factor)


def _transform(a: Any, n: int | None, axis: int, norm: str | None, kind: str) -> Any:
    """One 1-D transform of ``kind`` ('FFT', 'IFFT', 'RFFT', 'IRFFT') along ``axis``."""
    x = ensure_array(a)
    axis = canonicalize_axis(axis, x.ndim)
    if kind == "RFFT":
        if dtypes.is_complex(x.dtype):
            raise EmberValueError(f"rfft needs real input, got {x.dtype}")
        x = lax.convert_element_type(x, _real_dtype(x.dtype) if dtypes.is_floating(x.dtype)
                                     else dtypes.default_float())
    else:
        x = lax.convert_element_type(x, _complex_dtype(x.dtype))
    if kind == "IRFFT":
        length = 2 * (x.shape[axis] - 1) if n is None else n
        x = _resize(x, axis, length // 2 + 1)
    else:
        length = x.shape[axis] if n is None else n
        x = _resize(x, axis, length)
    x = moveaxis(x, axis, -1)
    out = lax.fft(x, kind, (length,))
    return moveaxis(_scale(out, length, norm, kind in ("IFFT", "IRFFT")), -1, axis)


def fft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None):
    """1-D discrete Fourier transform."""
    return _transform(a, n, axis, norm, "FFT")


def ifft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None):
    """1-D inverse discrete Fourier transform."""
    return _transform(a, n, axis, norm, "IFFT")


def rfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None):
    """1-D transform of real input: the ``n // 2 + 1`` non-negative frequencies."""
    return _transform(a, n, axis, norm, "RFFT")


def irfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None):
    """Inverse of ``rfft``: a real signal of length ``n`` (default ``2 * (m - 1)``)."""
    return _transform(a, n, axis, norm, "IRFFT")


def hfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None):
    """Transform of a Hermitian-symmetric signal (given by its first half): real output."""
    from ember.numpy._ufuncs import conj

    x = ensure_array(a)
    length = 2 * (x.shape[canonicalize_axis(axis, x.ndim)] - 1) if n is None else n
    flipped = {"backward": "forward", "forward": "backward", "ortho": "ortho", None: "forward"}
    return irfft(conj(x), length, axis, flipped.get(norm, norm))


def ihfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None):
    """Inverse of ``hfft``."""
    from ember.numpy._ufuncs import conj

    flipped = {"backward": "forward", "forward": "backward", "ortho": "ortho", None: "forward"}
    return conj(rfft(a, n, axis, flipped.get(norm, norm)))


def _axes_and_sizes(x: Any, s: Sequence[int] | None, axes: Sequence[int] | None
                    ) -> tuple[tuple[int, ...], list[int | None]]:
    if axes is None:
        axes = tuple(range(x.ndim)) if s is None else tuple(range(x.ndim - len(s), x.ndim))
    axes = canonicalize_axes(tuple(axes), x.ndim)
    if s is not None and len(s) != len(axes):
        raise EmberValueError(f"fftn: s={tuple(s)} and axes={axes} differ in length")
    return axes, list(s) if s is not None else [None] * len(axes)


def fftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
         norm: str | None = None):
    """N-d transform over ``axes`` (all by default)."""
    x = ensure_array(a)
    axes, sizes = _axes_and_sizes(x, s, axes)
    for axis, n in zip(axes, sizes):
        x = fft(x, n, axis, norm)
    return x


def ifftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str | None = None):
    """N-d inverse transform over ``axes``."""
    x = ensure_array(a)
    axes, sizes = _axes_and_sizes(x, s, axes)
    for axis, n in zip(axes, sizes):
        x = ifft(x, n, axis, norm)
    return x


def rfftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str | None = None):
    """N-d transform of real input: ``rfft`` on the last axis, ``fft`` on the others."""
    x = ensure_array(a)
    axes, sizes = _axes_and_sizes(x, s, axes)
    x = rfft(x, sizes[-1], axes[-1], norm)
    for axis, n in zip(axes[:-1], sizes[:-1]):
        x = fft(x, n, axis, norm)
    return x


def irfftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
           norm: str | None = None):
    """Inverse of ``rfftn``."""
    x = ensure_array(a)
    axes, sizes = _axes_and_sizes(x, s, axes)
    for axis, n in zip(axes[:-1], sizes[:-1]):
        x = ifft(x, n, axis, norm)
    return irfft(x, sizes[-1], axes[-1], norm)


def fft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
         norm: str | None = None):
    return fftn(a, s, axes, norm)


def ifft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
          norm: str | None = None):
    return ifftn(a, s, axes, norm)


def rfft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
          norm: str | None = None):
    return rfftn(a, s, axes, norm)


def irfft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
           norm: str | None = None):
    return irfftn(a, s, axes, norm)


def fftfreq(n: int, d: float = 1.0, *, dtype: Any = None, device: Any = None):
    """Sample frequencies of an ``n``-point transform with sample spacing ``d``."""
    from ember.numpy._creation import asarray

    freqs = np.fft.fftfreq(int(n), float(d))
    return asarray(freqs, dtype or dtypes.default_float(), device=device)


def rfftfreq(n: int, d: float = 1.0, *, dtype: Any = None, device: Any = None):
    """Sample frequencies of ``rfft``: the ``n // 2 + 1`` non-negative ones."""
    from ember.numpy._creation import asarray

    freqs = np.fft.rfftfreq(int(n), float(d))
    return asarray(freqs, dtype or dtypes.default_float(), device=device)


def fftshift(x: Any, axes: int | Sequence[int] | None = None):
    """Move the zero frequency to the center."""
    v = ensure_array(x)
    axes = canonicalize_axes(axes, v.ndim)
    return roll(v, [v.shape[a] // 2 for a in axes], axes)


def ifftshift(x: Any, axes: int | Sequence[int] | None = None):
    """Inverse of ``fftshift``."""
    v = ensure_array(x)
    axes = canonicalize_axes(axes, v.ndim)
    return roll(v, [-(v.shape[a] // 2) for a in axes], axes)
