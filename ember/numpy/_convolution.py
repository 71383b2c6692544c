"""One-dimensional discrete convolution and cross-correlation: convolve, correlate.

Both are one ``lax.conv_general_dilated`` (which computes a cross-correlation) on the
two 1-D inputs seen as one-channel signals; the mode only sets the padding, so
``'valid'`` and ``'same'`` compute no more outputs than they return. As NumPy (and JAX),
the shorter input slides along the longer one whichever comes first, and
``correlate(a, v)`` conjugates ``v``.
"""
from __future__ import annotations

from typing import Any

from ember import lax
from ember.core import dtypes
from ember.errors import EmberValueError
from ember.numpy._promotion import ensure_array, result_dtype

__all__ = ["convolve", "correlate"]

_MODES = ("full", "same", "valid")


def _output_window(mode: str, n: int, m: int, reversed_: bool) -> tuple[int, int]:
    """(first index, length) of the mode's output within the 'full' correlation of a
    length-``n`` signal with a length-``m`` kernel (``n + m - 1`` outputs).

    NumPy centers 'same' by sliding the shorter input along the longer one; a correlation
    with the longer kernel is that of the swapped inputs read backwards (``reversed_``),
    which moves an even-length window's center by one."""
    if mode == "full":
        return 0, n + m - 1
    short, long = min(n, m), max(n, m)
    if mode == "same":
        before = (short - 1) // 2
        return (short - 1 - before if reversed_ else before), long
    return short - 1, long - short + 1


def _correlate(name: str, a: Any, v: Any, mode: str, flip: bool, conjugate: bool) -> Any:
    if mode not in _MODES:
        raise EmberValueError(f"{name}: mode must be one of {_MODES}, got {mode!r}")
    common = result_dtype(a, v)
    x, kernel = ensure_array(a, common), ensure_array(v, common)
    if x.ndim != 1 or kernel.ndim != 1:
        raise EmberValueError(f"{name} needs two 1-D arrays, got shapes {tuple(x.shape)} and "
                              f"{tuple(kernel.shape)}")
    n, m = x.shape[0], kernel.shape[0]
    if n == 0 or m == 0:
        raise EmberValueError(f"{name}: the inputs must not be empty, got shapes {(n,)} and "
                              f"{(m,)}")
    if flip:
        kernel = lax.rev(kernel, (0,))
    if conjugate and dtypes.is_complex(kernel.dtype):
        kernel = lax.conj(kernel)
    if dtypes.is_bool(x.dtype):  # NumPy's bool arithmetic: products are and, sums are or
        as_int = [lax.convert_element_type(t, dtypes.int32) for t in (x, kernel)]
        return lax.ne(_correlate(name, *as_int, mode, False, False), 0)
    start, length = _output_window(mode, n, m, reversed_=m > n and not flip)
    padding = [(m - 1 - start, start + length - n)]  # negative widths crop
    out = lax.conv_general_dilated(lax.reshape(x, (1, 1, n)), lax.reshape(kernel, (1, 1, m)),
                                   (1,), padding)
    return lax.reshape(out, (length,))


def convolve(a: Any, v: Any, mode: str = "full", *, precision: Any = None,
             preferred_element_type: Any = None):
    """Discrete linear convolution ``sum_k a[k] v[n - k]`` of two 1-D arrays; ``mode``
    'full' (length ``n + m - 1``), 'same' (``max(n, m)``, centered) or 'valid'
    (``max(n, m) - min(n, m) + 1``: where they overlap fully)."""
    return _convolved(_correlate("convolve", a, v, mode, True, False), preferred_element_type)


def correlate(a: Any, v: Any, mode: str = "valid", *, precision: Any = None,
              preferred_element_type: Any = None):
    """Cross-correlation ``sum_n a[n + k] conj(v[n])`` of two 1-D arrays (modes as
    ``convolve``; the default is 'valid')."""
    return _convolved(_correlate("correlate", a, v, mode, False, True), preferred_element_type)


def _convolved(out: Any, preferred_element_type: Any) -> Any:
    if preferred_element_type is None:
        return out
    return lax.convert_element_type(out, dtypes.canonicalize(preferred_element_type))
