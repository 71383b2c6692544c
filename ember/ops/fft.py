"""The ``fft`` primitive: complex and real discrete Fourier transforms over the trailing
one to three dimensions (XLA's Fft), with NumPy's unnormalized forward convention."""
from __future__ import annotations

import enum
from typing import Any, Sequence

import numpy as np

from ember.core import dtypes
from ember.core.abstract import ShapedArray
from ember.core.primitive import Primitive
from ember.errors import EmberTypeError, EmberValueError
from ember.ops.elementwise import conj, mul, real
from ember.ops.rules import UndefinedPrimal, deflinear, move_batch_axis
from ember.ops.structural import broadcast_in_dim, pad

__all__ = ["fft", "FftType"]


class FftType(enum.IntEnum):
    """Which transform: complex forward / inverse, real forward / inverse (as jax.lax)."""

    FFT = 0
    IFFT = 1
    RFFT = 2
    IRFFT = 3


_COMPLEX_OF = {dtypes.float32: dtypes.complex64, dtypes.float64: dtypes.complex128}
_REAL_OF = {c: r for r, c in _COMPLEX_OF.items()}


def _half_spectrum(fft_lengths: tuple[int, ...]) -> tuple[int, ...]:
    """Trailing shape of a real transform's output: the last length becomes n // 2 + 1."""
    return (*fft_lengths[:-1], fft_lengths[-1] // 2 + 1)


def _expected_input(fft_type: str, fft_lengths: tuple[int, ...]) -> tuple[int, ...]:
    return _half_spectrum(fft_lengths) if fft_type == "IRFFT" else fft_lengths


def _output_dtype(fft_type: str, dtype: np.dtype) -> np.dtype:
    if fft_type == "RFFT":
        if dtype not in _COMPLEX_OF:
            raise EmberTypeError(f"fft: RFFT takes float32 or float64 input, got {dtype}")
        return _COMPLEX_OF[dtype]
    if not dtypes.is_complex(dtype):
        raise EmberTypeError(f"fft: {fft_type} takes complex input, got {dtype} (use RFFT "
                             "for real input, or convert to complex)")
    return _REAL_OF[dtype] if fft_type == "IRFFT" else dtype


fft_p = Primitive("fft")


@fft_p.def_abstract_eval
def _fft_abstract(x: ShapedArray, *, fft_type: str, fft_lengths: tuple[int, ...]) -> ShapedArray:
    dtype = _output_dtype(fft_type, x.dtype)
    if not 1 <= len(fft_lengths) <= min(3, x.ndim):
        raise EmberValueError(f"fft: fft_lengths {fft_lengths} must name 1 to 3 trailing "
                              f"dimensions of the operand of shape {x.shape}")
    expected = _expected_input(fft_type, fft_lengths)
    trailing = x.shape[x.ndim - len(fft_lengths):]
    if trailing != expected:
        raise EmberValueError(f"fft: {fft_type} with fft_lengths {fft_lengths} needs trailing "
                              f"dimensions {expected}, but the operand has shape {x.shape}")
    out_trailing = _half_spectrum(fft_lengths) if fft_type == "RFFT" else fft_lengths
    return ShapedArray(x.shape[:x.ndim - len(fft_lengths)] + out_trailing, dtype)


_NUMPY_FFT = {"FFT": np.fft.fftn, "IFFT": np.fft.ifftn, "RFFT": np.fft.rfftn,
              "IRFFT": np.fft.irfftn}


@fft_p.def_impl
def _fft_impl(x: np.ndarray, *, fft_type: str, fft_lengths: tuple[int, ...]) -> np.ndarray:
    x = np.asarray(x)
    axes = tuple(range(x.ndim - len(fft_lengths), x.ndim))
    out = _NUMPY_FFT[fft_type](x, s=fft_lengths, axes=axes)
    return out.astype(_output_dtype(fft_type, x.dtype))


def _fft_type_name(fft_type: Any) -> str:
    if isinstance(fft_type, FftType):
        return fft_type.name
    name = str(fft_type).upper().removeprefix("FFTTYPE.")
    if name not in FftType.__members__:
        raise EmberValueError(f"unknown fft_type {fft_type!r}; use one of "
                              f"{', '.join(FftType.__members__)}")
    return name


def fft(x: Any, fft_type: FftType | str, fft_lengths: Sequence[int]) -> Any:
    """Discrete Fourier transform over the trailing ``len(fft_lengths)`` dimensions.

    FFT / IFFT map complex to complex (IFFT divides by the transform size), RFFT maps
    real to the non-redundant half spectrum (last length ``n // 2 + 1``), IRFFT inverts it.
    """
    return fft_p.bind(x, fft_type=_fft_type_name(fft_type),
                      fft_lengths=tuple(int(n) for n in fft_lengths))


# --- transformation rules ------------------------------------------------------------------

def _irfft_weights(fft_lengths: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """How often each stored frequency appears in the full spectrum (interior ones twice,
    by Hermitian symmetry), over the transform size."""
    n = fft_lengths[-1]
    weights = np.full(n // 2 + 1, 2.0)
    weights[0] = 1.0
    if n % 2 == 0:
        weights[-1] = 1.0
    return (weights / np.prod(fft_lengths)).astype(dtype)


def _fft_transpose(ct: Any, x: UndefinedPrimal, *, fft_type: str,
                   fft_lengths: tuple[int, ...]) -> list:
    """The DFT matrix is symmetric, so FFT and IFFT transpose to themselves; RFFT is FFT of
    a real input keeping the first n // 2 + 1 outputs; IRFFT is a real-linear map whose
    transpose is the conjugated, weighted RFFT."""
    if fft_type in ("FFT", "IFFT"):
        return [fft_p.bind(ct, fft_type=fft_type, fft_lengths=fft_lengths)]
    if fft_type == "RFFT":
        missing = fft_lengths[-1] - np.shape(ct)[-1]
        config = [(0, 0, 0)] * (np.ndim(ct) - 1) + [(0, missing, 0)]
        full = pad(ct, np.zeros((), ct.dtype), config)
        return [real(fft_p.bind(full, fft_type="FFT", fft_lengths=fft_lengths))]
    spectrum = fft_p.bind(ct, fft_type="RFFT", fft_lengths=fft_lengths)
    weights = broadcast_in_dim(_irfft_weights(fft_lengths, spectrum.dtype), spectrum.shape,
                               (np.ndim(spectrum) - 1,))
    return [conj(mul(spectrum, weights))]


def _fft_batch(values: Sequence[Any], dims: Sequence[int | None], **params: Any):
    (x,), (d,) = values, dims
    return fft_p.bind(move_batch_axis(x, d, 0, np.shape(x)[d]), **params), 0


deflinear(fft_p, _fft_transpose)
fft_p.def_batch(_fft_batch)
fft_p.waive("sharding", "not split yet: computed on whole operands")
