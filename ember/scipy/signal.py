"""``ember.scipy.signal``: N-dimensional convolution and cross-correlation (as
``jax.scipy.signal``), each one ``lax.conv_general_dilated`` on the two inputs seen as
single-channel signals.

As SciPy, the output of mode 'same' has ``in1``'s shape, centered on the 'full' one. As
JAX, the larger input slides over the smaller one whichever comes first (so one must be
at least as large as the other along every axis), and only the direct method exists:
'auto' means 'direct'.
"""
from __future__ import annotations

from typing import Any

from ember import lax
from ember import numpy as jnp
from ember.errors import EmberValueError
from ember.numpy._promotion import inexact_dtype, result_dtype

__all__ = ["convolve", "correlate"]

_MODES = ("full", "same", "valid")
_METHODS = ("auto", "direct")


def _padding(mode: str, signal_shape: tuple[int, ...], kernel_shape: tuple[int, ...],
             out_shape: tuple[int, ...], flipped: bool) -> list[tuple[int, int]]:
    """Padding of the signal whose correlation with the kernel gives the mode's output:
    the 'full' output (``n + k - 1`` long along an axis), all of it, only the part where
    the two overlap fully ('valid'), or its centered ``out_shape`` ('same'). When the
    result will be flipped, the window is mirrored first."""
    if mode == "valid":
        return [(0, 0)] * len(kernel_shape)
    if mode == "full":
        return [(k - 1, k - 1) for k in kernel_shape]
    pads = []
    for n, k, n_out in zip(signal_shape, kernel_shape, out_shape):
        full = n + k - 1
        start = (full - n_out) // 2
        if flipped:
            start = full - start - n_out
        pads.append((k - 1 - start, n_out - n + start))
    return pads


def _check(name: str, in1: Any, in2: Any, mode: str, method: str) -> tuple[Any, Any]:
    if mode not in _MODES:
        raise EmberValueError(f"{name}: mode must be one of {_MODES}, got {mode!r}")
    if method == "fft":
        raise NotImplementedError(f"{name}: method='fft' is not supported; use 'direct'")
    if method not in _METHODS:
        raise EmberValueError(f"{name}: method must be one of {_METHODS}, got {method!r}")
    dtype = inexact_dtype(result_dtype(in1, in2))
    in1, in2 = jnp.asarray(in1, dtype), jnp.asarray(in2, dtype)
    if in1.ndim != in2.ndim:
        raise EmberValueError(f"{name}: in1 and in2 must have the same number of dimensions, "
                              f"got shapes {tuple(in1.shape)} and {tuple(in2.shape)}")
    if in1.size == 0 or in2.size == 0:
        raise EmberValueError(f"{name}: the inputs must not be empty, got shapes "
                              f"{tuple(in1.shape)} and {tuple(in2.shape)}")
    return in1, in2


def _correlate(in1: Any, in2: Any, mode: str, precision: Any) -> Any:
    """The cross-correlation of the two inputs (the larger one as the signal)."""
    shape1, shape2 = tuple(in1.shape), tuple(in2.shape)
    if all(a >= b for a, b in zip(shape1, shape2)):
        signal, kernel, flipped = in1, in2, False
    elif all(a <= b for a, b in zip(shape1, shape2)):
        # corr(a, b)[k] = corr(b, a)[-k]: correlate the other way round, then flip back.
        signal, kernel, flipped = in2, in1, True
    else:
        raise EmberValueError(f"one input must be at least as large as the other along every "
                              f"axis, got shapes {shape1} and {shape2}")
    padding = _padding(mode, tuple(signal.shape), tuple(kernel.shape), shape1, flipped)
    strides = (1,) * signal.ndim
    out = lax.conv_general_dilated(signal[None, None], kernel[None, None], strides, padding,
                                   precision=precision)[0, 0]
    return jnp.flip(out) if flipped else out


def convolve(in1: Any, in2: Any, mode: str = "full", method: str = "auto",
             precision: Any = None) -> Any:
    """The N-dimensional convolution of ``in1`` and ``in2``."""
    in1, in2 = _check("convolve", in1, in2, mode, method)
    return _correlate(in1, jnp.flip(in2), mode, precision)


def correlate(in1: Any, in2: Any, mode: str = "full", method: str = "auto",
              precision: Any = None) -> Any:
    """The N-dimensional cross-correlation ``sum_n in1[n + k] * conj(in2[n])``."""
    in1, in2 = _check("correlate", in1, in2, mode, method)
    return _correlate(in1, jnp.conj(in2), mode, precision)


# Errors raised anywhere below a public function name the user's line.
from ember.errors import wrap_public_functions as _wrap  # noqa: E402

_wrap(globals())
