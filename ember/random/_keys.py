"""PRNG keys: creation, splitting, folding in data, and raw random bits.

A key is a ``uint32[2]`` array (JAX's raw key layout; ``key(seed)`` returns the same
raw form). Keys are split, never reused: every random function takes a key and returns
values that depend only on the key and the requested shape, so results are identical
eagerly, under jit, and on every backend. Counters follow JAX's partitionable
Threefry scheme, so keys, bits and samples match JAX's for the same seed.
"""
from __future__ import annotations

import math
import operator
from typing import Any, Sequence

import numpy as np

from ember import lax
from ember.config import config
from ember.core import dtypes
from ember.errors import EmberTypeError, EmberValueError
from ember.numpy._promotion import ensure_array
from ember.ops.random_bits import threefry2x32

__all__ = ["PRNGKey", "key", "split", "fold_in", "bits", "key_data", "wrap_key_data"]

_WORD = 0xFFFFFFFF


def check_key(key: Any, name: str) -> Any:
    """``key`` as an Ember array, or an error naming what a key looks like."""
    array = ensure_array(key)
    if array.shape != (2,) or array.dtype != dtypes.uint32:
        hint = (" (a batch of keys: map over it with ember.vmap)" if array.shape[-1:] == (2,)
                and array.ndim > 1 else "")
        raise EmberTypeError(
            f"{name} expects a PRNG key: a uint32 array of shape (2,) from "
            f"ember.random.key(seed) or split(key); got {array.aval.str_short()}{hint}")
    return array


def _words(key: Any) -> tuple[Any, Any]:
    return (lax.index_in_dim(key, 0, keepdims=False), lax.index_in_dim(key, 1, keepdims=False))


def _from_words(high: Any, low: Any) -> Any:
    return lax.concatenate([lax.expand_dims(high, (0,)), lax.expand_dims(low, (0,))], 0)


def PRNGKey(seed: Any) -> Any:
    """A key from an integer seed: ``[seed >> 32, seed & 0xFFFFFFFF]`` (the high word is 0
    unless x64 is on, where seeds are 64-bit). Traced seeds work too."""
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        value = int(seed)
        high = (value >> 32) & _WORD if config.enable_x64 else 0
        return ensure_array(np.array([high, value & _WORD], np.uint32))
    array = ensure_array(seed)
    if array.ndim or not dtypes.is_integer(array.dtype):
        raise EmberTypeError(f"a PRNG seed must be an integer scalar, got "
                             f"{array.aval.str_short()}")
    if array.dtype.itemsize == 8:
        high = lax.convert_element_type(lax.shift_right_logical(array, 32), dtypes.uint32)
        low = lax.convert_element_type(lax.bitwise_and(array, _WORD), dtypes.uint32)
    else:
        high = ensure_array(np.zeros((), np.uint32))
        low = lax.convert_element_type(array, dtypes.uint32)
    return _from_words(high, low)


def key(seed: Any, *, impl: Any = None) -> Any:
    """A key from an integer seed (the raw ``uint32[2]`` form; see ``PRNGKey``)."""
    if impl not in (None, "threefry2x32"):
        raise EmberValueError(f"unknown PRNG implementation {impl!r}; Ember has threefry2x32")
    return PRNGKey(seed)


def key_data(keys: Any) -> Any:
    """The raw ``uint32`` data of keys (Ember keys are raw already)."""
    return ensure_array(keys)


def wrap_key_data(key_bits_array: Any, *, impl: Any = None) -> Any:
    """Keys from raw ``uint32[..., 2]`` data (Ember keys are raw already)."""
    data = ensure_array(key_bits_array)
    if data.shape[-1:] != (2,) or data.dtype != dtypes.uint32:
        raise EmberTypeError(f"key data must be uint32 with a last axis of 2, got "
                             f"{data.aval.str_short()}")
    return data


def _counters(shape: tuple[int, ...]) -> tuple[Any, Any]:
    """High and low words of the row-major position of every element of ``shape``."""
    size = math.prod(shape)
    if size >= 2 ** 32:
        raise EmberValueError(f"cannot draw {size} random values at once (at most 2**32 - 1)")
    zeros = lax.broadcast_in_dim(np.zeros((), np.uint32), shape, ())
    low = lax.reshape(lax.iota(dtypes.uint32, size), shape) if shape else zeros
    return ensure_array(zeros), ensure_array(low)


def _hash_counters(key: Any, shape: tuple[int, ...]) -> tuple[Any, Any]:
    """Threefry of every counter of ``shape`` under ``key``: two uint32 words each."""
    k0, k1 = _words(key)
    high, low = _counters(shape)
    return threefry2x32(lax.broadcast_in_dim(k0, shape, ()), lax.broadcast_in_dim(k1, shape, ()),
                        high, low)


def split(key: Any, num: int | Sequence[int] = 2) -> Any:
    """``num`` new keys (an array of shape ``(num, 2)``, or ``(*num, 2)`` for a tuple)."""
    key = check_key(key, "split")
    shape = tuple(num) if isinstance(num, (tuple, list)) else (int(num),)
    first, second = _hash_counters(key, shape)
    last = len(shape)
    return lax.concatenate([lax.expand_dims(first, (last,)), lax.expand_dims(second, (last,))],
                           last)


def fold_in(key: Any, data: Any) -> Any:
    """A new key from ``key`` and a 32-bit integer ``data`` (e.g. a step or a device id)."""
    key = check_key(key, "fold_in")
    if isinstance(data, (int, np.integer)) and not isinstance(data, bool):
        word = ensure_array(np.asarray(int(data) & _WORD, np.uint32))
    else:
        word = lax.convert_element_type(ensure_array(data), dtypes.uint32)
        if word.ndim:
            raise EmberTypeError(f"fold_in takes scalar data, got shape {word.shape}")
    k0, k1 = _words(key)
    first, second = threefry2x32(k0, k1, ensure_array(np.zeros((), np.uint32)), word)
    return _from_words(first, second)


_UNSIGNED = {8: dtypes.uint8, 16: dtypes.uint16, 32: dtypes.uint32, 64: dtypes.uint64}


def random_bits(key: Any, bit_width: int, shape: tuple[int, ...]) -> Any:
    """Uniform random unsigned integers of ``bit_width`` bits (8, 16, 32 or 64)."""
    first, second = _hash_counters(key, shape)
    if bit_width == 64:
        wide = dtypes.uint64
        if dtypes.canonicalize(wide) != wide:
            raise EmberTypeError("64-bit random bits need ember.config.update('enable_x64', True)")
        high = lax.convert_element_type(first, wide)
        return lax.bitwise_or(lax.shift_left(high, 32), lax.convert_element_type(second, wide))
    mixed = lax.bitwise_xor(first, second)
    return mixed if bit_width == 32 else lax.convert_element_type(mixed, _UNSIGNED[bit_width])


def bits(key: Any, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Uniform random bits of an unsigned integer ``dtype`` (default uint32)."""
    key = check_key(key, "bits")
    dtype = dtypes.to_dtype(dtype) if dtype is not None else dtypes.uint32
    if not dtypes.is_unsigned(dtype):
        raise EmberTypeError(f"bits: dtype must be an unsigned integer dtype, got {dtype}")
    return random_bits(key, dtype.itemsize * 8, shape_arg(shape))


def shape_arg(shape: Any) -> tuple[int, ...]:
    """A shape argument as a tuple of ints (an int means a 1-D shape)."""
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    try:
        return tuple(operator.index(d) for d in shape)
    except TypeError:
        raise EmberTypeError(f"shape must be a tuple of integers, got {shape!r}") from None
