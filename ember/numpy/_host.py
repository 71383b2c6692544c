"""Host-side conveniences: reading and writing arrays (save, savez, load, frombuffer,
fromstring, fromfile, fromiter), text forms (array_repr, array_str) and NumPy's print
options, which Ember arrays' printing follows.

These run outside any transformation: NumPy does the work on the host and the results
become Ember arrays (64-bit data canonicalizes to 32 bits without x64, as everywhere).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.errors import EmberTypeError, EmberValueError
from ember.numpy._creation import asarray
from ember.numpy._promotion import ensure_array

__all__ = ["save", "savez", "load", "frombuffer", "fromstring", "fromfile", "fromiter",
           "array_repr", "array_str", "get_printoptions", "set_printoptions", "printoptions"]

get_printoptions = np.get_printoptions
set_printoptions = np.set_printoptions
printoptions = np.printoptions


def _host(value: Any) -> Any:
    return np.asarray(value) if hasattr(value, "__array__") else value


def save(file: Any, arr: Any, allow_pickle: bool = True) -> None:
    """Write one array to a ``.npy`` file (NumPy's format)."""
    np.save(file, _host(arr), allow_pickle=allow_pickle)


def savez(file: Any, *args: Any, **kwds: Any) -> None:
    """Write several arrays to an uncompressed ``.npz`` archive."""
    np.savez(file, *[_host(a) for a in args], **{k: _host(v) for k, v in kwds.items()})


def load(file: Any, *args: Any, **kwargs: Any) -> Any:
    """Read a ``.npy`` file as an Ember array (a ``.npz`` archive comes back as NumPy's
    lazy ``NpzFile``; pickled objects stay refused unless ``allow_pickle=True``)."""
    out = np.load(file, *args, **kwargs)
    return asarray(out) if isinstance(out, np.ndarray) and out.dtype != object else out


def frombuffer(buffer: Any, dtype: Any = float, count: int = -1, offset: int = 0):
    """An array from the raw bytes of ``buffer`` read as ``dtype``."""
    try:
        host = np.frombuffer(buffer, dtype=dtype, count=count, offset=offset)
    except TypeError as error:
        raise EmberTypeError(f"frombuffer: {error}") from None
    except ValueError as error:
        raise EmberValueError(f"frombuffer: {error}") from None
    return asarray(host)


def fromstring(string: str, dtype: Any = float, count: int = -1, *, sep: str):
    """An array from numbers in text separated by ``sep`` (binary strings: use
    ``frombuffer``)."""
    return asarray(np.fromstring(string, dtype=dtype, count=count, sep=sep))


def fromfile(*args: Any, **kwargs: Any):
    """``numpy.fromfile`` (raw or text data from a file), as an Ember array."""
    return asarray(np.fromfile(*args, **kwargs))


def fromiter(*args: Any, **kwargs: Any):
    """``numpy.fromiter`` (an array from an iterable), as an Ember array."""
    return asarray(np.fromiter(*args, **kwargs))


def array_repr(arr: Any, max_line_width: int | None = None, precision: int | None = None,
               suppress_small: bool | None = None) -> str:
    """NumPy's ``array_repr`` of the array's values."""
    return np.array_repr(np.asarray(ensure_array(arr)), max_line_width, precision,
                         suppress_small)


def array_str(a: Any, max_line_width: int | None = None, precision: int | None = None,
              suppress_small: bool | None = None) -> str:
    """NumPy's ``array_str`` of the array's values."""
    return np.array_str(np.asarray(ensure_array(a)), max_line_width, precision, suppress_small)
