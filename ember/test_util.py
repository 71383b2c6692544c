"""Testing helpers: ``check_grads`` compares Ember's derivatives with finite differences
(as ``jax.test_util.check_grads``).

Derivatives are checked along random directions: forward mode against the central
difference ``(f(x + eps t) - f(x - eps t)) / 2 eps``, reverse mode through the identity
``<vjp(ct), t> == <ct, jvp(t)>``. Run it with float64 arguments (the ``x64`` test
fixture) for tight tolerances; float32 gets loose ones.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ember.core.pytree import tree_flatten, tree_unflatten

__all__ = ["check_grads", "check_jvp", "check_vjp", "check_vmap"]

_EPS = {np.dtype(np.float64): 1e-4, np.dtype(np.float32): 1e-3, np.dtype(np.float16): 1e-2}
_TOL = {np.dtype(np.float64): 1e-5, np.dtype(np.float32): 2e-2, np.dtype(np.float16): 1e-1}


def _leaves(tree: Any) -> list[np.ndarray]:
    return [np.asarray(leaf) for leaf in tree_flatten(tree)[0]]


def _inexact(array: np.ndarray) -> bool:
    return array.dtype.kind in "fc"


def _real(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.float64) if dtype.itemsize >= 8 else np.dtype(np.float32)


def _widest(trees: Sequence[Any]) -> np.dtype:
    """The float dtype that sets default eps and tolerances (the widest inexact leaf)."""
    found = [_real(leaf.dtype) for tree in trees for leaf in _leaves(tree) if _inexact(leaf)]
    return max(found, key=lambda d: d.itemsize, default=np.dtype(np.float32))


def _random_like(tree: Any, rng: np.random.Generator) -> Any:
    """A random direction: normal values for inexact leaves, zeros for the others."""
    leaves, treedef = tree_flatten(tree)
    out = []
    for leaf in leaves:
        array = np.asarray(leaf)
        if _inexact(array):
            value = rng.standard_normal(array.shape)
            if array.dtype.kind == "c":
                value = value + 1j * rng.standard_normal(array.shape)
            out.append(value.astype(array.dtype))
        else:
            out.append(np.zeros(array.shape, array.dtype))
    return tree_unflatten(treedef, out)


def _axpy(a: float, x: Any, y: Any) -> Any:
    """``y + a * x`` over pytrees (integer leaves of ``y`` are left alone)."""
    xs, ys = _leaves(x), tree_flatten(y)
    out = [np.asarray(yl) + (np.asarray(a * xl).astype(np.asarray(yl).dtype)
                             if _inexact(np.asarray(yl)) else 0)
           for xl, yl in zip(xs, ys[0])]
    return tree_unflatten(ys[1], out)


def _inner(xs: Any, ys: Any) -> float:
    """``Re(sum(x * y))``: the pairing under which Ember's (and JAX's) transposes of
    complex linear maps are transposes (cotangents are not conjugated)."""
    total = 0.0
    for x, y in zip(_leaves(xs), _leaves(ys)):
        if _inexact(x) and _inexact(y):
            total += float(np.real(np.sum(x.astype(np.complex128) * y)))
    return total


def _assert_close(actual: Any, expected: Any, atol: float, rtol: float, what: str) -> None:
    for i, (a, e) in enumerate(zip(_leaves(actual), _leaves(expected))):
        if not (_inexact(a) and _inexact(e)):
            continue
        np.testing.assert_allclose(a, e, atol=atol, rtol=rtol,
                                   err_msg=f"{what} (output leaf {i}) differs")


def numerical_jvp(f: Callable, primals: Sequence[Any], tangents: Sequence[Any],
                  eps: float) -> Any:
    """Central difference of ``f`` at ``primals`` along ``tangents``."""
    plus = _leaves(f(*_axpy(eps, tangents, primals)))
    minus = _leaves(f(*_axpy(-eps, tangents, primals)))
    out_tree = tree_flatten(f(*primals))[1]
    diffs = [(p.astype(np.result_type(p.dtype, np.float64)) - m) / (2 * eps)
             if _inexact(p) else p for p, m in zip(plus, minus)]
    return tree_unflatten(out_tree, diffs)


def check_jvp(f: Callable, f_jvp: Callable, args: Sequence[Any], atol: float | None = None,
              rtol: float | None = None, eps: float | None = None, seed: int = 0) -> None:
    """Check ``f_jvp(primals, tangents)`` (like ``ember.jvp``'s) against finite differences."""
    dtype = _widest([args])
    atol = _TOL[dtype] if atol is None else atol
    rtol = _TOL[dtype] if rtol is None else rtol
    eps = _EPS[dtype] if eps is None else eps
    tangents = _random_like(tuple(args), np.random.default_rng(seed))
    out, tangent_out = f_jvp(tuple(args), tangents)
    _assert_close(out, f(*args), atol, rtol, "jvp primal output")
    expected = numerical_jvp(f, tuple(args), tangents, eps)
    _assert_close(tangent_out, expected, atol, rtol, "jvp tangent vs finite differences")


def check_vjp(f: Callable, f_vjp: Callable, args: Sequence[Any], atol: float | None = None,
              rtol: float | None = None, eps: float | None = None, seed: int = 0) -> None:
    """Check ``f_vjp(*primals)`` (like ``ember.vjp``'s) with ``<vjp(ct), t> = <ct, J t>``."""
    dtype = _widest([args])
    atol = _TOL[dtype] if atol is None else atol
    rtol = _TOL[dtype] if rtol is None else rtol
    eps = _EPS[dtype] if eps is None else eps
    rng = np.random.default_rng(seed)
    out, vjp_fn = f_vjp(*args)
    _assert_close(out, f(*args), atol, rtol, "vjp primal output")
    tangents = _random_like(tuple(args), rng)
    cotangent = _random_like(out, rng)
    cts_in = vjp_fn(cotangent)
    expected_out = numerical_jvp(f, tuple(args), tangents, eps)
    actual = _inner(tangents, cts_in)
    expected = _inner(expected_out, cotangent)
    np.testing.assert_allclose(actual, expected, atol=atol, rtol=rtol,
                               err_msg="vjp: <vjp(ct), t> differs from <ct, finite-difference "
                                       "jvp(t)>")


def check_grads(f: Callable, args: Sequence[Any], order: int = 1,
                modes: Sequence[str] = ("fwd", "rev"), atol: float | None = None,
                rtol: float | None = None, eps: float | None = None) -> None:
    """Check derivatives of ``f`` at ``args`` up to ``order`` in the given modes
    ("fwd": ``ember.jvp``; "rev": ``ember.vjp``), against central finite differences.
    Raises AssertionError naming the mode and order that disagree."""
    from ember.transforms.api import jvp, vjp

    for mode in modes:
        if mode not in ("fwd", "rev"):
            raise ValueError(f"check_grads modes must be 'fwd' or 'rev', got {mode!r}")
    tols = dict(atol=atol, rtol=rtol, eps=eps)

    def check(fun: Callable, fun_args: tuple, level: int) -> None:
        if "fwd" in modes:
            check_jvp(fun, lambda p, t: jvp(fun, p, t), fun_args, **tols, seed=level)
            if level < order:
                check(lambda p, t: jvp(fun, p, t), (fun_args, fun_args), level + 1)
        if "rev" in modes:
            check_vjp(fun, lambda *p: vjp(fun, *p), fun_args, **tols, seed=level)
            if level < order:
                def fun_vjp(*p: Any) -> Any:
                    out, vjp_fn = vjp(fun, *p)
                    return vjp_fn(out)

                check(fun_vjp, fun_args, level + 1)

    check(f, tuple(args), 1)



def check_vmap(f: Callable, args: Sequence[Any], in_axes: int | None | Sequence[int | None] = 0,
               atol: float = 0.0, rtol: float = 0.0) -> None:
    """Check ``ember.vmap(f, in_axes)(*args)`` against a Python loop calling ``f`` on each
    slice of the mapped axes (``in_axes``: one int / None per positional argument, or one
    for all). Outputs may be pytrees; their batch axis is 0."""
    from ember.transforms.api import vmap

    axes = list(in_axes) if isinstance(in_axes, (tuple, list)) else [in_axes] * len(args)
    arrays = [np.asarray(a) for a in args]
    size = next(a.shape[ax] for a, ax in zip(arrays, axes) if ax is not None)
    rows = [_leaves(f(*[a if ax is None else np.take(a, i, ax) for a, ax in zip(arrays, axes)]))
            for i in range(size)]
    actual = _leaves(vmap(f, in_axes=tuple(axes))(*args))
    assert len(actual) == len(rows[0]), "vmap returned a different number of outputs"
    for i, got in enumerate(actual):
        np.testing.assert_allclose(got, np.stack([row[i] for row in rows]), atol=atol,
                                   rtol=rtol, err_msg=f"vmap output leaf {i} differs from "
                                                      "the loop")
