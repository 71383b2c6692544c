"""``ufunc``: NumPy's universal-function objects, with the methods ``reduce``,
``accumulate``, ``reduceat``, ``outer`` and ``at`` (as ``jax.numpy.ufunc``), and
``frompyfunc`` to make one from a scalar Python function.

The binary functions of ``ember.numpy`` that JAX makes ufuncs (add, multiply, maximum,
logaddexp, ...) are instances whose methods take fast paths (``add.reduce`` is ``sum``,
``maximum.accumulate`` a ``cummax``); any other ufunc runs the generic forms: a
``lax.scan`` along the axis for ``reduce`` / ``accumulate`` (in order, so
non-associative functions give NumPy's answers), one update per index for ``at``.
"""
from __future__ import annotations

import operator
from typing import Any, Callable

from ember import lax
from ember.errors import EmberTypeError, EmberValueError, user_errors
from ember.numpy._axes import canonicalize_axes, canonicalize_axis
from ember.numpy._joining import concatenate
from ember.numpy._manipulation import moveaxis, ravel, reshape
from ember.numpy._promotion import broadcast_to_shape, concrete, ensure_array
from ember.numpy._vectorize import vectorize

__all__ = ["ufunc", "frompyfunc"]


class ufunc:  # noqa: N801 - NumPy's and JAX's name
    """A function of ``nin`` arrays to ``nout`` arrays, applied elementwise with
    broadcasting, plus the reduction methods of binary ufuncs. ``call`` (default: ``func``
    vectorized over scalars) and ``reduce`` / ``accumulate`` / ``at`` / ``reduceat``
    override the generic forms."""

    def __init__(self, func: Callable, /, nin: int, nout: int, *, name: str | None = None,
                 nargs: int | None = None, identity: Any = None, call: Callable | None = None,
                 reduce: Callable | None = None, accumulate: Callable | None = None,
                 at: Callable | None = None, reduceat: Callable | None = None):
        if not callable(func):
            raise EmberTypeError(f"ufunc needs a function, got {type(func).__name__}")
        self._func = func
        self.nin, self.nout = operator.index(nin), operator.index(nout)
        self.nargs = self.nin if nargs is None else operator.index(nargs)
        self.identity = identity
        self.__name__ = name or getattr(func, "__name__", "ufunc")
        self.__doc__ = getattr(func, "__doc__", None)
        self._call = user_errors(call or vectorize(func))
        self._reduce, self._accumulate, self._at = reduce, accumulate, at
        self._reduceat = reduceat

    def __repr__(self) -> str:
        return f"<ember.numpy.ufunc '{self.__name__}'>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(*args, **kwargs)

    def _binary(self, method: str) -> None:
        if self.nin != 2 or self.nout != 1:
            raise EmberValueError(f"{self.__name__}.{method} needs a ufunc of two inputs and one "
                                  f"output; this one has nin={self.nin}, nout={self.nout}")

    @user_errors
    def outer(self, A: Any, B: Any, /) -> Any:
        """``func(A[i, ...], B[j, ...])`` for every pair: shape ``A.shape + B.shape``."""
        self._binary("outer")
        a, b = ensure_array(A), ensure_array(B)
        return self(reshape(a, (*a.shape, *(1,) * b.ndim)), b)

    @user_errors
    def reduce(self, a: Any, axis: int | tuple[int, ...] | None = 0, dtype: Any = None,
               out: None = None, keepdims: bool = False, initial: Any = None,
               where: Any = None) -> Any:
        """``func`` applied cumulatively along ``axis`` (several axes or None: all of
        them), starting from ``initial``, or the first element (the identity for empty
        axes); ``where`` skips elements."""
        self._binary("reduce")
        _no_out(out, f"{self.__name__}.reduce")
        if self._reduce is not None:
            return self._reduce(a, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial,
                                where=where)
        return _scan_reduce(self, _as_dtype(a, dtype), axis, keepdims, initial, where)

    @user_errors
    def accumulate(self, a: Any, axis: int = 0, dtype: Any = None, out: None = None) -> Any:
        """The running results of ``reduce`` along ``axis`` (same shape as ``a``)."""
        self._binary("accumulate")
        _no_out(out, f"{self.__name__}.accumulate")
        if self._accumulate is not None:
            return self._accumulate(a, axis=axis, dtype=dtype)
        return _scan_accumulate(self, _as_dtype(a, dtype), axis)

    @user_errors
    def at(self, a: Any, indices: Any, b: Any = None, /, *, inplace: bool = True) -> Any:
        """A copy of ``a`` with ``func`` applied at ``indices`` (with the matching ``b``
        for binary ufuncs); repeated indices apply repeatedly. ``inplace=False`` is
        required (Ember arrays are immutable)."""
        if inplace:
            raise EmberValueError(f"{self.__name__}.at: Ember arrays are immutable, so it "
                                  "cannot edit in place; pass inplace=False")
        if (b is None) != (self.nin == 1):
            raise EmberValueError(f"{self.__name__}.at takes b exactly when the ufunc has two "
                                  f"inputs (nin={self.nin})")
        if self._at is not None:
            return self._at(a, indices, b)
        return _sequential_at(self, ensure_array(a), indices, b)

    @user_errors
    def reduceat(self, a: Any, indices: Any, axis: int = 0, dtype: Any = None,
                 out: None = None) -> Any:
        """``reduce`` over the slices ``indices[i]:indices[i + 1]`` along ``axis`` (the
        element at ``indices[i]`` alone where the next index is not larger; the last
        slice runs to the end). ``indices`` must be concrete."""
        self._binary("reduceat")
        _no_out(out, f"{self.__name__}.reduceat")
        if self._reduceat is not None:
            return self._reduceat(a, indices, axis=axis, dtype=dtype)
        x = _as_dtype(a, dtype)
        axis = canonicalize_axis(axis, x.ndim)
        starts = concrete(indices, f"{self.__name__}.reduceat(indices)").reshape(-1)
        n = x.shape[axis]
        if starts.size and (starts.min() < 0 or starts.max() >= n):
            raise EmberValueError(f"{self.__name__}.reduceat: indices must lie in [0, {n}), got "
                                  f"{starts.tolist()}")
        parts = []
        for i, start in enumerate(starts.tolist()):
            stop = starts[i + 1] if i + 1 < starts.size else n
            part = lax.slice_in_dim(x, start, max(stop, start + 1), axis=axis)
            parts.append(self.reduce(part, axis=axis, keepdims=True))
        return concatenate(parts, axis=axis)


def _no_out(out: Any, name: str) -> None:
    if out is not None:
        raise EmberValueError(f"{name}(out=...) is not supported: Ember arrays are immutable")


def _as_dtype(a: Any, dtype: Any) -> Any:
    from ember.core import dtypes

    x = ensure_array(a)
    return x if dtype is None else lax.convert_element_type(x, dtypes.canonicalize(dtype))


def _result_dtype(u: ufunc, items: Any) -> Any:
    """The dtype ``u`` gives for two of ``items`` (found on an empty slice of them)."""
    empty = items[:0]
    return ensure_array(u(empty, empty)).dtype


def _scan_reduce(u: ufunc, x: Any, axis: Any, keepdims: bool, initial: Any,
                 where: Any) -> Any:
    axes = canonicalize_axes(axis, x.ndim)
    kept = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    target = tuple(range(len(kept), x.ndim))

    def flattened(v: Any) -> Any:  # the reduced axes as one leading axis
        v = reshape(moveaxis(v, axes, target), (*kept, -1))
        return moveaxis(v, -1, 0)

    items = flattened(x)
    mask = None if where is None else flattened(broadcast_to_shape(ensure_array(where),
                                                                   x.shape))
    dtype = _result_dtype(u, items)
    start = initial if initial is not None else u.identity
    if start is None:
        if mask is not None or items.shape[0] == 0:
            what = "with where=" if mask is not None else "of an empty selection"
            raise EmberValueError(f"{u.__name__}.reduce {what} needs initial= (this ufunc has "
                                  "no identity)")
        carry, items = lax.convert_element_type(items[0], dtype), items[1:]
        mask = None
    else:
        carry = broadcast_to_shape(ensure_array(start, dtype), kept)

    def step(total: Any, item: Any) -> tuple[Any, None]:
        value, keep = item
        combined = ensure_array(u(total, value), total.dtype)
        return (combined if keep is None else
                lax.select_n(keep, total, combined)), None

    total, _ = lax.scan(step, carry, (items, mask))  # mask may be None: no masking
    if keepdims:
        total = reshape(total, tuple(1 if i in axes else d for i, d in enumerate(x.shape)))
    return total


def _scan_accumulate(u: ufunc, x: Any, axis: int) -> Any:
    axis = canonicalize_axis(axis, x.ndim)
    items = moveaxis(x, axis, 0)
    if items.shape[0] == 0:
        return x

    def step(total: Any, value: Any) -> tuple[Any, Any]:
        combined = ensure_array(u(total, value), total.dtype)
        return combined, combined

    first = lax.convert_element_type(items[0], _result_dtype(u, items))
    _, rest = lax.scan(step, first, items[1:])
    return moveaxis(concatenate([first[None], rest]), 0, axis)


def _sequential_at(u: ufunc, x: Any, indices: Any, b: Any) -> Any:
    """``x[i] = u(x[i], b)`` for each selected position in turn (repeats included)."""
    from ember.core import dtypes

    positions = ravel(reshape(lax.iota(dtypes.default_int(), x.size), x.shape)[indices])
    items = (positions,)
    if u.nin == 2:  # each position with its operand
        items += (ravel(broadcast_to_shape(ensure_array(b, x.dtype), positions.shape)),)

    def step(current: Any, item: tuple) -> tuple[Any, None]:
        position, *operand = item
        new = u(current[position], *operand)
        return current.at[position].set(ensure_array(new, current.dtype)), None

    flat, _ = lax.scan(step, ravel(x), items)
    return reshape(flat, x.shape)


def frompyfunc(func: Callable, /, nin: int, nout: int, *, identity: Any = None) -> ufunc:
    """A ufunc from a Python function of scalars (vectorized over arrays with ``vmap``)."""
    if not callable(func):
        raise EmberTypeError(f"frompyfunc needs a function, got {type(func).__name__}")
    return ufunc(func, nin, nout, identity=identity)


# --- the built-in ufuncs' fast paths ------------------------------------------------------

def builtin(func: Callable, nin: int, identity: Any = None, **methods: Callable) -> ufunc:
    """An ``ember.numpy`` function (it broadcasts itself) as a ufunc with fast methods."""
    return ufunc(func, nin, 1, name=func.__name__, identity=identity, call=func, **methods)


def reduction(name: str) -> Callable:
    """``reduce`` as the ``ember.numpy`` reduction ``name`` (sum, prod, max, min)."""

    def reduce(a: Any, *, axis: Any, dtype: Any, keepdims: bool, initial: Any,
               where: Any) -> Any:
        from ember.numpy import _reductions

        if name in ("max", "min"):  # no dtype argument
            return getattr(_reductions, name)(_as_dtype(a, dtype), axis=axis,
                                              keepdims=keepdims, initial=initial, where=where)
        return getattr(_reductions, name)(a, axis=axis, dtype=dtype, keepdims=keepdims,
                                          initial=initial, where=where)

    return reduce


def monoid(reducer: Callable, combine: Callable, identity: Any, boolean: bool) -> Callable:
    """``reduce`` as one lax reduction (and, or, xor), on booleans for the logical ones."""

    def reduce(a: Any, *, axis: Any, dtype: Any, keepdims: bool, initial: Any,
               where: Any) -> Any:
        from ember.core import dtypes

        x = _as_dtype(a, dtypes.bool_ if boolean else dtype)
        axes = canonicalize_axes(axis, x.ndim)
        if where is not None:
            fill = broadcast_to_shape(ensure_array(identity, x.dtype), x.shape)
            x = lax.select_n(broadcast_to_shape(ensure_array(where, dtypes.bool_), x.shape),
                             fill, x)
        out = reducer(x, axes)
        if initial is not None:
            out = combine(out, broadcast_to_shape(ensure_array(initial, x.dtype), out.shape))
        if keepdims:
            out = reshape(out, tuple(1 if i in axes else d for i, d in enumerate(x.shape)))
        return out

    return reduce


def running(name: str) -> Callable:
    """``accumulate`` as a running lax scan (cumsum, cumprod, cummax, cummin)."""

    def accumulate(a: Any, *, axis: int, dtype: Any) -> Any:
        from ember.numpy._reductions import _accumulation_dtype

        x = _as_dtype(a, dtype)
        if name in ("cumsum", "cumprod") and dtype is None:
            x = lax.convert_element_type(x, _accumulation_dtype(x.dtype))
        return getattr(lax, name)(x, canonicalize_axis(axis, x.ndim))

    return accumulate


def scatter(method: str, transform: Callable | None = None) -> Callable:
    """``at`` as the ``x.at[indices].<method>(b)`` update (``transform`` maps ``b``)."""

    def at(a: Any, indices: Any, b: Any) -> Any:
        values = b if transform is None else transform(b)
        return getattr(ensure_array(a).at[indices], method)(values)

    return at
