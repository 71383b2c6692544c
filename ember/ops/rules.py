"""The contract between primitives and transformations, and rule makers for common cases.

Rule signatures (attach them with ``prim.def_jvp`` / ``def_transpose`` / ``def_batch``):

``jvp(primals, tangents, **params) -> (primal_out, tangent_out)``
    ``primals`` and ``tangents`` are lists, one entry per operand; for a primitive with
    ``multiple_results`` both outputs are lists. Tangents arrive as *plain arrays* of the
    primal's shape and dtype: the JVP interpreter tracks symbolic zeros itself and only
    calls a rule when at least one operand tangent is nonzero, after instantiating the
    others as zero arrays (a rule decorated with ``accepts_symbolic_zeros`` gets the
    ``Zero`` objects instead). Tangents of integer or bool operands arrive as zero arrays of
    that integer dtype: ignore them. The rule may return ``Zero(aval)`` (or ``None``) for an
    output whose tangent is known to be zero; tangents of integer/bool outputs are dropped
    (made symbolic zeros) by the interpreter, so a rule may return anything there.

``transpose(cotangent_out, *inputs, **params) -> list`` (one entry per input)
    Called only for primitives that are linear in some inputs. Linear inputs are
    ``UndefinedPrimal`` instances (test with ``is_undefined_primal``; they have ``.aval``,
    ``.shape``, ``.dtype``); the other inputs are ordinary values. ``cotangent_out`` is a
    plain array (a list of them for ``multiple_results``; zero cotangents are instantiated,
    and the rule is skipped when all of them are zero). Return the cotangent of each
    linear input, and ``None`` for non-linear inputs or a zero contribution (``Zero`` is
    accepted too). A cotangent has the input's shape and dtype.

``batch(values, batch_dims, **params) -> (outputs, out_batch_dims)``
    ``batch_dims[i]`` is the axis of ``values[i]`` being mapped over, or ``None`` when that
    operand is not batched (at least one is). Return outputs and, for each, the axis that
    holds the batch (``None`` if unbatched); lists for ``multiple_results``.

Rule makers in this module: ``defjvp`` / ``defjvp2`` (one derivative function per
operand, as ``jax.interpreters.ad.defjvp``), ``def_linear_jvp`` (the tangent of a linear
op is the op applied to the tangents), ``deflinear`` (that plus a transpose rule),
``defjvp_zero`` (piecewise-constant or integer-valued outputs), ``def_elementwise_batch``.
Primitives that hold subgraphs (control flow, checkpoint) also register partial-eval
and transpose hooks: see ``ember.transforms.partial_eval``.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ember.core.abstract import ShapedArray, aval_of
from ember.core.primitive import Primitive

__all__ = [
    "Zero", "UndefinedPrimal", "is_undefined_primal", "float0", "zeros_like_aval",
    "instantiate", "add_tangents", "accepts_symbolic_zeros", "defjvp", "defjvp2",
    "defjvp_zero", "def_linear_jvp", "deflinear", "def_elementwise_batch",
    "move_batch_axis", "batch_size",
]

# The dtype of tangents and cotangents of integer / bool values, as ``jax.dtypes.float0``:
# a zero-size element type, so such arrays carry a shape and no data.
float0 = np.dtype([("float0", np.void, 0)])


class Zero:
    """A symbolic zero tangent or cotangent of abstract value ``aval`` (never materialized
    unless a rule needs a plain array)."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray) -> None:
        self.aval = aval

    @classmethod
    def like(cls, value: Any) -> "Zero":
        return cls(aval_of(value))

    def __repr__(self) -> str:
        return f"Zero({self.aval.str_short()})"


class UndefinedPrimal:
    """A linear input of an equation being transposed: its value is what we solve for."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray) -> None:
        self.aval = aval

    @property
    def shape(self) -> tuple[int, ...]:
        return self.aval.shape

    @property
    def dtype(self) -> np.dtype:
        return self.aval.dtype

    @property
    def ndim(self) -> int:
        return self.aval.ndim

    def __repr__(self) -> str:
        return f"UndefinedPrimal({self.aval.str_short()})"


def is_undefined_primal(value: Any) -> bool:
    return isinstance(value, UndefinedPrimal)


def zeros_like_aval(aval: ShapedArray) -> Any:
    """A zero array of ``aval`` built from primitives (so it stages into graphs)."""
    from ember.ops.structural import broadcast_in_dim

    return broadcast_in_dim(np.zeros((), aval.dtype), aval.shape, ())


def instantiate(value: Any) -> Any:
    """Turn a symbolic ``Zero`` into a zero array; other values pass through."""
    return zeros_like_aval(value.aval) if isinstance(value, Zero) else value


def add_tangents(x: Any, y: Any) -> Any:
    """Sum of two (co)tangents, either of which may be a symbolic ``Zero`` or None."""
    from ember.ops.elementwise import ELEMENTWISE

    if x is None or isinstance(x, Zero):
        return y
    if y is None or isinstance(y, Zero):
        return x
    return ELEMENTWISE["add"].bind(x, y)


# --- jvp rule makers ------------------------------------------------------------------

def accepts_symbolic_zeros(rule: Callable) -> Callable:
    """Mark a jvp rule that handles ``Zero`` tangents itself, so the interpreter passes
    them through instead of instantiating them (saving work on zeros)."""
    rule.accepts_symbolic_zeros = True  # type: ignore[attr-defined]
    return rule


def defjvp(prim: Primitive, *derivatives: Callable | None) -> None:
    """JVP from one function per operand: ``derivatives[i](t_i, *primals, **params)`` is the
    tangent contribution of operand ``i`` (``None``: not differentiable in that operand).
    The output tangent is the sum over operands with nonzero tangents."""
    _defjvp(prim, derivatives, with_output=False)


def defjvp2(prim: Primitive, *derivatives: Callable | None) -> None:
    """As ``defjvp``, but each function also gets the primal output:
    ``derivatives[i](t_i, out, *primals, **params)`` (e.g. exp: ``t * out``)."""
    _defjvp(prim, derivatives, with_output=True)


def _defjvp(prim: Primitive, derivatives: Sequence[Callable | None], with_output: bool) -> None:
    def rule(primals: Sequence[Any], tangents: Sequence[Any], **params: Any):
        out = prim.bind(*primals, **params)
        total: Any = Zero.like(out)
        for derivative, tangent in zip(derivatives, tangents):
            if derivative is None or isinstance(tangent, Zero):
                continue
            extra = (out,) if with_output else ()
            total = add_tangents(total, derivative(tangent, *extra, *primals, **params))
        return out, total

    prim.def_jvp(accepts_symbolic_zeros(rule))


def defjvp_zero(prim: Primitive) -> None:
    """The output's tangent is always zero (floor, sign, comparisons, integer ops)."""

    def rule(primals: Sequence[Any], tangents: Sequence[Any], **params: Any):
        out = prim.bind(*primals, **params)
        if prim.multiple_results:
            return out, [Zero.like(o) for o in out]
        return out, Zero.like(out)

    prim.def_jvp(accepts_symbolic_zeros(rule))


def def_linear_jvp(prim: Primitive, linear_argnums: Sequence[int] | None = None) -> None:
    """The op is linear in the operands ``linear_argnums`` (default: all), so its tangent
    is the op applied to their tangents, with the other operands (indices, say) as they
    are. Zero tangents of linear operands are instantiated."""

    def rule(primals: Sequence[Any], tangents: Sequence[Any], **params: Any):
        linear = range(len(primals)) if linear_argnums is None else linear_argnums
        if all(isinstance(tangents[i], Zero) for i in linear):
            out = prim.bind(*primals, **params)
            zero = [Zero.like(o) for o in out] if prim.multiple_results else Zero.like(out)
            return out, zero
        args = [instantiate(tangents[i]) if i in linear else p for i, p in enumerate(primals)]
        return prim.bind(*primals, **params), prim.bind(*args, **params)

    prim.def_jvp(accepts_symbolic_zeros(rule))


def deflinear(prim: Primitive, transpose: Callable,
              linear_argnums: Sequence[int] | None = None) -> None:
    """A linear op: ``def_linear_jvp`` plus ``transpose`` as its transpose rule
    (``transpose(ct, *inputs, **params) -> list``, see the module docstring)."""
    def_linear_jvp(prim, linear_argnums)
    prim.def_transpose(transpose)


# --- batching -------------------------------------------------------------------------

def move_batch_axis(x: Any, src: int | None, dst: int, size: int) -> Any:
    """Put the batch axis of ``x`` at ``dst``; an unbatched ``x`` is broadcast to ``size``."""
    from ember.ops.structural import broadcast_in_dim, transpose

    if src is None:
        shape = list(np.shape(x))
        shape.insert(dst, size)
        kept = [i for i in range(len(shape)) if i != dst]
        return broadcast_in_dim(x, tuple(shape), tuple(kept))
    if src == dst:
        return x
    perm = [i for i in range(np.ndim(x)) if i != src]
    perm.insert(dst, src)
    return transpose(x, tuple(perm))


def batch_size(values: Sequence[Any], dims: Sequence[int | None]) -> int:
    for value, dim in zip(values, dims):
        if dim is not None:
            return np.shape(value)[dim]
    raise ValueError("no batched operand")


def def_elementwise_batch(prim: Primitive) -> None:
    """Batch by moving every batch axis to the front (broadcasting unbatched operands)."""
    from ember.ops.structural import broadcast_in_dim

    def rule(values: Sequence[Any], dims: Sequence[int | None], **params: Any):
        size = batch_size(values, dims)
        logical = [np.shape(v) if d is None else np.shape(v)[:d] + np.shape(v)[d + 1:]
                   for v, d in zip(values, dims)]
        full = max(logical, key=len)
        moved = []
        for value, dim, shape in zip(values, dims, logical):
            value = move_batch_axis(value, dim, 0, size)
            if shape != full:  # a scalar bound / predicate next to full-rank operands
                offset = len(full) - len(shape)
                value = broadcast_in_dim(value, (size, *full),
                                         (0, *range(1 + offset, 1 + len(full))))
            moved.append(value)
        out = prim.bind(*moved, **params)
        return out, ([0] * len(out) if prim.multiple_results else 0)

    prim.def_batch(rule)
