"""Python operators and array methods shared by concrete Arrays and tracers.

Both ``ember.Array`` and every ``Tracer`` inherit this mixin, so user code behaves the
same eagerly and under transformations. Each method forwards to ``ember.numpy``.
"""
from __future__ import annotations

from typing import Any


def _np():
    import ember.numpy as enp  # deferred: ember.numpy imports this module's users

    return enp


def _binary(name: str, reflected: bool = False):
    def method(self, other):
        if not _is_operand(other):
            return NotImplemented
        fn = getattr(_np(), name)
        return fn(other, self) if reflected else fn(self, other)

    method.__name__ = f"__{'r' if reflected else ''}{name}__"
    return method


def _is_operand(value: Any) -> bool:
    import numpy as np

    return isinstance(value, (ArrayOps, int, float, complex, bool, np.ndarray, np.generic))


class ArrayOps:
    __slots__ = ()
    __hash__ = None  # arrays are mutable-looking values, as NumPy's; use static args for keys

    # --- metadata -------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self.aval.shape

    @property
    def dtype(self):
        return self.aval.dtype

    @property
    def ndim(self) -> int:
        return self.aval.ndim

    @property
    def size(self) -> int:
        return self.aval.size

    @property
    def itemsize(self) -> int:
        return self.aval.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.aval.nbytes

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self.shape[0]))

    def __array_namespace__(self, api_version: str | None = None):
        if api_version not in (None, "2023.12", "2024.12"):
            raise ValueError(f"ember.numpy implements Array API 2023.12 and 2024.12, not {api_version}")
        return _np()

    # --- arithmetic -----------------------------------------------------------------
    __add__ = _binary("add")
    __radd__ = _binary("add", True)
    __sub__ = _binary("subtract")
    __rsub__ = _binary("subtract", True)
    __mul__ = _binary("multiply")
    __rmul__ = _binary("multiply", True)
    __truediv__ = _binary("true_divide")
    __rtruediv__ = _binary("true_divide", True)
    __floordiv__ = _binary("floor_divide")
    __rfloordiv__ = _binary("floor_divide", True)
    __mod__ = _binary("remainder")
    __rmod__ = _binary("remainder", True)
    __pow__ = _binary("power")
    __rpow__ = _binary("power", True)
    __matmul__ = _binary("matmul")
    __rmatmul__ = _binary("matmul", True)
    __and__ = _binary("bitwise_and")
    __rand__ = _binary("bitwise_and", True)
    __or__ = _binary("bitwise_or")
    __ror__ = _binary("bitwise_or", True)
    __xor__ = _binary("bitwise_xor")
    __rxor__ = _binary("bitwise_xor", True)
    __lshift__ = _binary("left_shift")
    __rlshift__ = _binary("left_shift", True)
    __rshift__ = _binary("right_shift")
    __rrshift__ = _binary("right_shift", True)
    __lt__ = _binary("less")
    __le__ = _binary("less_equal")
    __gt__ = _binary("greater")
    __ge__ = _binary("greater_equal")
    __eq__ = _binary("equal")  # type: ignore[assignment]
    __ne__ = _binary("not_equal")  # type: ignore[assignment]

    def __neg__(self):
        return _np().negative(self)

    def __pos__(self):
        return self

    def __abs__(self):
        return _np().abs(self)

    def __invert__(self):
        return _np().invert(self)

    def __divmod__(self, other):
        return _np().floor_divide(self, other), _np().remainder(self, other)

    # --- Python conversions need concrete values ------------------------------------
    def _concrete(self):
        raise NotImplementedError

    def __bool__(self) -> bool:
        return bool(self._concrete())

    def __int__(self) -> int:
        return int(self._concrete())

    def __float__(self) -> float:
        return float(self._concrete())

    def __complex__(self) -> complex:
        return complex(self._concrete())

    def __index__(self) -> int:
        import numpy as np

        value = self._concrete()
        if not np.issubdtype(np.asarray(value).dtype, np.integer):
            raise TypeError(f"only integer arrays can be used as an index, not {self.dtype}")
        return int(value)

    def item(self):
        return self._concrete().item()

    def tolist(self):
        return self._concrete().tolist()

    # --- indexing -------------------------------------------------------------------
    def __getitem__(self, index):
        from ember.numpy.indexing import getitem

        return getitem(self, index)

    def __setitem__(self, index, value):
        raise TypeError(
            "Ember arrays are immutable; instead of x[idx] = y use x = x.at[idx].set(y)"
        )

    @property
    def at(self):
        from ember.numpy.indexing import IndexUpdateHelper

        return IndexUpdateHelper(self)

    # --- methods mirroring NumPy ----------------------------------------------------
    @property
    def T(self):
        return _np().transpose(self)

    @property
    def mT(self):
        return _np().matrix_transpose(self)

    @property
    def real(self):
        return _np().real(self)

    @property
    def imag(self):
        return _np().imag(self)

    def conj(self):
        return _np().conj(self)

    def reshape(self, *shape, order: str = "C"):
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = tuple(shape[0])
        return _np().reshape(self, shape, order=order)

    def transpose(self, *axes):
        if len(axes) == 1 and not isinstance(axes[0], int):
            axes = () if axes[0] is None else tuple(axes[0])
        return _np().transpose(self, axes or None)

    def astype(self, dtype, copy: bool = True):
        return _np().astype(self, dtype)

    def ravel(self):
        return _np().ravel(self)

    def flatten(self):
        return _np().ravel(self)

    def squeeze(self, axis=None):
        return _np().squeeze(self, axis)

    def swapaxes(self, a: int, b: int):
        return _np().swapaxes(self, a, b)

    def dot(self, other):
        return _np().dot(self, other)

    def clip(self, min=None, max=None):
        return _np().clip(self, min, max)

    def round(self, decimals: int = 0, out=None):
        return _np().round(self, decimals, out)

    # The reductions take NumPy's method signatures, out= included (None only, as JAX):
    # np.sum(x), np.mean(x, axis=0, keepdims=True), ... call these methods with them.
    def sum(self, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None,
            promote_integers=True):
        return _np().sum(self, axis, dtype, out, keepdims, initial, where, promote_integers)

    def prod(self, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None,
             promote_integers=True):
        return _np().prod(self, axis, dtype, out, keepdims, initial, where, promote_integers)

    def mean(self, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
        return _np().mean(self, axis, dtype, out, keepdims, where=where)

    def var(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
            correction=None):
        return _np().var(self, axis, dtype, out, ddof, keepdims, where=where,
                         correction=correction)

    def std(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
            correction=None):
        return _np().std(self, axis, dtype, out, ddof, keepdims, where=where,
                         correction=correction)

    def max(self, axis=None, out=None, keepdims=False, initial=None, where=None):
        return _np().max(self, axis, out, keepdims, initial, where)

    def min(self, axis=None, out=None, keepdims=False, initial=None, where=None):
        return _np().min(self, axis, out, keepdims, initial, where)

    def ptp(self, axis=None, out=None, keepdims=False):
        return _np().ptp(self, axis, out, keepdims)

    def argmax(self, axis=None, out=None, keepdims=None):
        return _np().argmax(self, axis, out, bool(keepdims))

    def argmin(self, axis=None, out=None, keepdims=None):
        return _np().argmin(self, axis, out, bool(keepdims))

    def any(self, axis=None, out=None, keepdims=False, *, where=None):
        return _np().any(self, axis, out, keepdims, where=where)

    def all(self, axis=None, out=None, keepdims=False, *, where=None):
        return _np().all(self, axis, out, keepdims, where=where)

    def cumsum(self, axis=None, dtype=None, out=None):
        return _np().cumsum(self, axis, dtype, out)

    def cumprod(self, axis=None, dtype=None, out=None):
        return _np().cumprod(self, axis, dtype, out)

    def trace(self, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype=None, out=None):
        return _np().trace(self, offset, axis1, axis2, dtype, out)

    # Sorting returns a new array (Ember arrays are immutable), as JAX's methods do.
    def sort(self, axis=-1, *, kind=None, order=None, stable: bool = True,
             descending: bool = False):
        return _np().sort(self, axis, kind, order, stable=stable, descending=descending)

    def argsort(self, axis=-1, *, kind=None, order=None, stable: bool = True,
                descending: bool = False):
        return _np().argsort(self, axis, kind, order, stable=stable, descending=descending)

    def argpartition(self, kth: int, axis: int = -1):
        return _np().argpartition(self, kth, axis)

    def searchsorted(self, v, side: str = "left", sorter=None, *, method: str = "scan"):
        return _np().searchsorted(self, v, side, sorter, method=method)

    # --- selection ------------------------------------------------------------------
    def take(self, indices, axis=None, out=None, mode=None, unique_indices: bool = False,
             indices_are_sorted: bool = False, fill_value=None):
        return _np().take(self, indices, axis, out, mode, unique_indices,
                          indices_are_sorted, fill_value)

    def repeat(self, repeats, axis=None, *, total_repeat_length=None):
        return _np().repeat(self, repeats, axis, total_repeat_length=total_repeat_length)

    def diagonal(self, offset: int = 0, axis1: int = 0, axis2: int = 1):
        return _np().diagonal(self, offset, axis1, axis2)

    def nonzero(self, *, size=None, fill_value=None):
        return _np().nonzero(self, size=size, fill_value=fill_value)

    def compress(self, condition, axis=None, *, size=None, fill_value=0, out=None):
        return _np().compress(condition, self, axis, size=size, fill_value=fill_value, out=out)

    def choose(self, choices, out=None, mode: str = "raise"):
        return _np().choose(self, choices, out, mode)

    def conjugate(self):
        return _np().conj(self)

    def view(self, dtype=None, type=None):
        """The bits as ``dtype`` (NumPy's ``view``; ``type=`` subclasses do not exist here)."""
        from ember.numpy._bits import view

        if type is not None:
            raise TypeError("Array.view(type=...) is not supported: Ember has one array type")
        return self if dtype is None else view(self, dtype)
