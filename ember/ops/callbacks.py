"""Calls from a program back into Python: ``pure_callback``, ``io_callback`` and the debug
callback.

All run on the host wherever the program runs (a host call between native kernels, or
right away outside ``jit``), and hand the callback NumPy arrays.

- ``pure_callback`` computes results of declared shapes and dtypes. It is pure: an
  unused result is never computed, equal calls may be merged. Under ``vmap`` its
  ``vmap_method`` (as JAX's) says how it sees the batch.
- ``io_callback`` is ``pure_callback`` with an effect (see below): always run, once
  per batch element under ``vmap``.
- ``debug_callback`` has no results and an effect (``effectful``): every pass keeps it
  and never merges, folds or hoists it. Under ``vmap`` it runs once per batch element;
  under differentiation it sees the primal values.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from ember.core import dtypes
from ember.core.abstract import ShapedArray
from ember.core.primitive import Primitive
from ember.core.pytree import PyTreeDef, tree_flatten, tree_leaves, tree_unflatten
from ember.errors import EmberTypeError, EmberValueError
from ember.ops.rules import batch_size, move_batch_axis

VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                "legacy_vectorized")


@dataclass(frozen=True)
class FlatCallback:
    """A user callback taking flat arrays (``unflatten`` rebuilds its arguments).
    Equal for the same function and argument structure, so a retrace hits the caches."""

    function: Callable[..., Any]
    in_tree: PyTreeDef  # of (args, kwargs)

    def __call__(self, *arrays: Any) -> list[Any]:
        """The leaves of the callback's result."""
        args, kwargs = tree_unflatten(self.in_tree, arrays)
        return tree_leaves(self.function(*args, **kwargs))

    def __repr__(self) -> str:
        return getattr(self.function, "__qualname__", repr(self.function))


@dataclass(frozen=True)
class PerElement:
    """``callback`` run once per element of a batch: ``batched[i]`` says whether argument
    ``i`` has the batch on axis 0 (the others are passed whole); results are stacked."""

    callback: Callable[..., Any]
    batched: tuple[bool, ...]
    size: int

    def __call__(self, *arrays: Any) -> list[np.ndarray]:
        results = []
        for i in range(self.size):
            element = [a[i] if b else a for a, b in zip(arrays, self.batched)]
            results.append(self.callback(*element))
        if not results or not results[0]:
            return []
        return [np.stack(column) for column in zip(*results)]

    def __repr__(self) -> str:
        return f"per_element({self.callback!r})"


def _as_results(values: list, avals: Sequence[ShapedArray], callback: Any) -> list[np.ndarray]:
    if len(values) != len(avals):
        raise EmberValueError(f"pure_callback: {callback!r} returned {len(values)} arrays, "
                              f"result_shape_dtypes declares {len(avals)}")
    results = []
    for value, aval in zip(values, avals):
        array = np.asarray(value)
        if array.shape != aval.shape:
            raise EmberValueError(
                f"pure_callback: {callback!r} returned an array of shape {array.shape} where "
                f"result_shape_dtypes declares {aval.shape}; return what you declare")
        results.append(array.astype(aval.dtype, copy=False))
    return results


# --- pure_callback ----------------------------------------------------------------------

pure_callback_p = Primitive("pure_callback", multiple_results=True)


def _declared(*avals: ShapedArray, result_avals, **params) -> list[ShapedArray]:
    return list(result_avals)


def _call(*arrays, callback, result_avals, **params) -> list[np.ndarray]:
    return _as_results(callback(*arrays), result_avals, callback)


def _to_front(values: Sequence[Any], dims: Sequence[int | None]) -> tuple[int, list[Any]]:
    """The batch size, and the values with their batch axis (where they have one) first."""
    size = batch_size(values, dims)
    return size, [v if d is None else move_batch_axis(v, d, 0, size)
                  for v, d in zip(values, dims)]


pure_callback_p.def_abstract_eval(_declared)
pure_callback_p.def_impl(_call)


@pure_callback_p.def_jvp
def _pure_jvp(primals, tangents, **params):
    raise EmberValueError("pure_callback is not differentiable: Ember cannot see inside "
                          "Python code. Wrap the call in ember.custom_jvp or "
                          "ember.custom_vjp and give its derivative.")  # (JAX: ValueError)


pure_callback_p.waive("transpose", "a callback is not linear (differentiate it with "
                                   "custom_jvp / custom_vjp)")


@pure_callback_p.def_batch
def _pure_batch(values, dims, *, callback, result_avals, vmap_method):
    from ember.ops.structural import broadcast_in_dim

    size, front = _to_front(values, dims)
    batched_avals = tuple(ShapedArray((size, *a.shape), a.dtype) for a in result_avals)
    if vmap_method in ("sequential", "sequential_unrolled"):
        callback = PerElement(callback, tuple(d is not None for d in dims), size)
    elif vmap_method in ("expand_dims", "broadcast_all"):
        lead = size if vmap_method == "broadcast_all" else 1
        front = [v if d is not None else broadcast_in_dim(
                     v, (lead, *np.shape(v)), tuple(range(1, np.ndim(v) + 1)))
                 for v, d in zip(front, dims)]
    elif vmap_method != "legacy_vectorized":
        raise NotImplementedError(  # as JAX raises
            "vmap of pure_callback needs vmap_method: 'sequential' (one call per batch "
            "element), 'expand_dims' or 'broadcast_all' (one call on the whole batch), as "
            "in JAX; pass it to ember.pure_callback(..., vmap_method=...)")
    outs = pure_callback_p.bind(*front, callback=callback, result_avals=batched_avals,
                                vmap_method=vmap_method)
    return outs, [0] * len(outs)


# --- io_callback ------------------------------------------------------------------------

io_callback_p = Primitive("io_callback", multiple_results=True, effectful=True)


io_callback_p.def_abstract_eval(_declared)
io_callback_p.def_impl(_call)


@io_callback_p.def_jvp
def _io_jvp(primals, tangents, **params):
    raise EmberValueError("io_callback is not differentiable (as in JAX); give the "
                          "function that calls it a custom_jvp / custom_vjp rule")


io_callback_p.waive("transpose", "a callback is not linear")


@io_callback_p.def_batch
def _io_batch(values, dims, *, callback, result_avals, ordered):
    if ordered:
        raise EmberValueError("cannot vmap an ordered io_callback (its calls would run in "
                              "no defined order); pass ordered=False")
    size, front = _to_front(values, dims)
    outs = io_callback_p.bind(
        *front, callback=PerElement(callback, tuple(d is not None for d in dims), size),
        result_avals=tuple(ShapedArray((size, *a.shape), a.dtype) for a in result_avals),
        ordered=ordered)
    return outs, [0] * len(outs)


# --- debug_callback ---------------------------------------------------------------------

debug_callback_p = Primitive("debug_callback", multiple_results=True, effectful=True)


@debug_callback_p.def_abstract_eval
def _debug_abstract(*avals: ShapedArray, callback):
    return []


@debug_callback_p.def_impl
def _debug_impl(*arrays, callback):
    callback(*arrays)
    return []


@debug_callback_p.def_jvp
def _debug_jvp(primals, tangents, *, callback):
    debug_callback_p.bind(*primals, callback=callback)  # the values, not their tangents
    return [], []


debug_callback_p.waive("transpose", "it has no results (its operands are primal values)")


@debug_callback_p.def_batch
def _debug_batch(values, dims, *, callback):
    size, front = _to_front(values, dims)
    per_element = PerElement(callback, tuple(d is not None for d in dims), size)
    debug_callback_p.bind(*front, callback=per_element)
    return [], []


# --- binding ----------------------------------------------------------------------------

def pure_callback(callback: Callable[..., Any], result_shape_dtypes: Any, *args: Any,
                  sharding: Any = None, vmap_method: str | None = None, **kwargs: Any) -> Any:
    """Call pure Python ``callback(*args, **kwargs)`` from a program, as
    ``jax.pure_callback``: it receives NumPy arrays and returns arrays shaped as
    ``result_shape_dtypes`` (a pytree of ``ShapeDtypeStruct`` or anything with ``shape``
    and ``dtype``). Works eagerly and under ``jit`` and ``vmap`` (which needs
    ``vmap_method``); not differentiable (use ``custom_jvp`` / ``custom_vjp``)."""
    if vmap_method is not None and vmap_method not in VMAP_METHODS:
        raise EmberValueError(f"pure_callback: vmap_method must be one of {VMAP_METHODS} or "
                              f"None, got {vmap_method!r}")
    return _bind_with_results(pure_callback_p, callback, result_shape_dtypes, args, kwargs,
                              sharding, vmap_method=vmap_method)


def _bind_with_results(prim: Primitive, callback: Callable[..., Any], result_shape_dtypes: Any,
                       args: tuple, kwargs: dict, sharding: Any, **params: Any) -> Any:
    if sharding is not None:
        raise EmberValueError(f"{prim.name}: sharding= is not supported; the callback runs "
                              "on the host of the program's device")
    leaves, in_tree = tree_flatten((args, kwargs))
    specs, out_tree = tree_flatten(result_shape_dtypes)
    for spec in specs:
        if not (hasattr(spec, "shape") and hasattr(spec, "dtype")):
            raise EmberTypeError(f"{prim.name}: result_shape_dtypes leaves need .shape and "
                                 f".dtype (use ember.ShapeDtypeStruct), got "
                                 f"{type(spec).__name__}")
    result_avals = tuple(ShapedArray(s.shape, dtypes.canonicalize(s.dtype)) for s in specs)
    outs = prim.bind(*leaves, callback=FlatCallback(callback, in_tree),
                     result_avals=result_avals, **params)
    return tree_unflatten(out_tree, outs)


def io_callback(callback: Callable[..., Any], result_shape_dtypes: Any, *args: Any,
                sharding: Any = None, ordered: bool = False, **kwargs: Any) -> Any:
    """Call impure Python ``callback(*args, **kwargs)`` from a program, as
    ``jax.experimental.io_callback``: like ``pure_callback``, but it runs even when its
    results are unused and is never merged with another call. Under ``vmap`` it runs
    once per batch element (not when ``ordered``); not differentiable."""
    return _bind_with_results(io_callback_p, callback, result_shape_dtypes, args, kwargs,
                              sharding, ordered=ordered)


def debug_callback(callback: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """Call ``callback(*args, **kwargs)`` (NumPy arrays for the arrays) when the program
    runs: right away outside ``jit``, at every run of a compiled program inside it."""
    leaves, in_tree = tree_flatten((args, kwargs))
    debug_callback_p.bind(*leaves, callback=FlatCallback(callback, in_tree))


for _prim in (pure_callback_p, io_callback_p, debug_callback_p):
    _prim.waive("sharding", "a host callback sees whole arrays")
