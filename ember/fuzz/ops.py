"""Operation families: each writes one line of Ember code around a chosen operand.

A family proposes an expression template (``{0}`` is the operand, further ``{i}`` are
values it picks or new inputs it creates) and hands it to ``Builder.emit``, which keeps
it only if Ember type-checks it. Templates are filtered the same way before a pick, so
a family offers exactly the operations that accept the operand's dtype.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ember.core import dtypes
from ember.core.abstract import ShapedArray
from ember.fuzz.choices import chance, permutation, pick, subset
from ember.fuzz.generate import DTYPES, Builder, typecheck
from ember.fuzz.program import dtype_source
from ember.ops.elementwise import ELEMENTWISE_OPS


def _fuzzed(nargs: int) -> list[str]:
    """The lax names of the elementwise ops of ``nargs`` operands the fuzzer draws (each
    op's row says whether it is drawn), in the rows' order."""
    return [op.lax_function_name for op in ELEMENTWISE_OPS.values()
            if op.fuzzed and op.nargs == nargs]


def unary_templates() -> tuple[str, ...]:
    return (*(f"lax.{name}({{0}})" for name in _fuzzed(1)),
            "lax.integer_pow({0}, 2)", "lax.integer_pow({0}, 3)", "lax.integer_pow({0}, -1)",
            "lax.round({0}, 1)", "lax.clamp(-2, {0}, 3)", "lax.mul({0}, 2)", "lax.add({0}, -1)")


def binary_templates() -> tuple[str, ...]:
    return tuple(f"lax.{name}({{0}}, {{1}})" for name in _fuzzed(2))


def accepted(templates: Sequence[str], avals: Sequence[ShapedArray],
             same_type: bool = False) -> list[str]:
    """The templates Ember accepts for ``avals`` (with ``same_type``: only those whose
    result has the type of the first operand)."""
    avals = tuple(avals)
    return [t for t in templates if (out := typecheck(t, avals)) is not None
            and (not same_type or out == avals[0])]


def shape_text(shape: Sequence[int]) -> str:
    return repr(tuple(int(d) for d in shape))


def scalar_text(value: float, dtype: np.dtype) -> str:
    return f"np.array({value!r}, dtype={dtype_source(dtype)})"


def broadcast_text(slot: str, shape: tuple[int, ...], to: tuple[int, ...]) -> str:
    """``slot`` broadcast NumPy-style from ``shape`` to ``to`` (trailing axes aligned)."""
    if shape == to:
        return slot
    dims = tuple(range(len(to) - len(shape), len(to)))
    return f"lax.broadcast_in_dim({slot}, {shape_text(to)}, {shape_text(dims)})"


def body_text(b: Builder, aval: ShapedArray, var: str, captured: str | None) -> str:
    """A shape- and dtype-preserving expression of ``var`` (for loop and branch bodies),
    possibly combining it with the closed-over value ``captured``."""
    if captured is not None and chance(b.choices, 50):
        options = accepted(binary_templates(), (aval, aval), same_type=True)
        if options:
            return pick(b.choices, options).format(var, captured)
    options = accepted(unary_templates(), (aval,), same_type=True) or ["{0}"]
    return pick(b.choices, options).format(var)


# --- families -------------------------------------------------------------------------

@dataclass(frozen=True)
class Family:
    name: str
    weight: int
    build: Callable[[Builder, str], str | None]
    accepts: Callable[[ShapedArray], bool] = lambda aval: True


def _ranked(aval: ShapedArray) -> bool:
    return aval.ndim >= 1


def _numeric(aval: ShapedArray) -> bool:
    return not dtypes.is_bool(aval.dtype)


def unary(b: Builder, x: str) -> str | None:
    options = accepted(unary_templates(), (b.aval(x),))
    return b.emit(pick(b.choices, options), (x,)) if options else None


def _partner_shape(b: Builder, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts against ``shape`` (size-1 axes on either side)."""
    drop = b.choices.integer(0, len(shape)) if chance(b.choices, 25) else 0
    out = []
    for d in shape[drop:]:
        if d == 1 and chance(b.choices, 25):
            out.append(b.choices.integer(1, b.limits.max_dim))
        else:
            out.append(1 if chance(b.choices, 25) else d)
    return tuple(out)


def _broadcastable(a: tuple[int, ...], c: tuple[int, ...]) -> bool:
    try:
        np.broadcast_shapes(a, c)
        return True
    except ValueError:
        return False


def binary(b: Builder, x: str) -> str | None:
    aval = b.aval(x)
    known = b.names(lambda a: a.dtype == aval.dtype and _broadcastable(a.shape, aval.shape))
    if known and chance(b.choices, 50):
        y = pick(b.choices, known)
    else:
        y = b.new_input(ShapedArray(_partner_shape(b, aval.shape), aval.dtype))
    if chance(b.choices, 30):
        x, y = y, x
    sx, sy = b.aval(x).shape, b.aval(y).shape
    out = tuple(np.broadcast_shapes(sx, sy))
    options = accepted(binary_templates(), (b.aval(x).update(shape=out), b.aval(y).update(shape=out)))
    if not options:
        return None
    template = pick(b.choices, options)
    return b.emit(template.format(broadcast_text("{0}", sx, out), broadcast_text("{1}", sy, out)),
                  (x, y))


def select(b: Builder, x: str) -> str | None:
    aval = b.aval(x)
    pred_aval = ShapedArray(aval.shape if chance(b.choices, 70) else (), dtypes.bool_)
    pred = b.value_of(pred_aval)
    other = b.value_of(aval)
    return b.emit("lax.select_n({2}, {0}, {1})", (x, other, pred))


def convert(b: Builder, x: str) -> str | None:
    targets = [d for d in DTYPES if d != b.aval(x).dtype]
    return b.emit(f"lax.convert_element_type({{0}}, {dtype_source(pick(b.choices, targets))})",
                  (x,))


def reduce(b: Builder, x: str) -> str | None:
    aval = b.aval(x)
    axes = shape_text(subset(b.choices, range(aval.ndim)))
    templates = [f"lax.reduce_{op}({{0}}, {axes})"
                 for op in ("sum", "max", "min", "prod", "and", "or", "xor")]
    if aval.ndim:
        axis = b.choices.integer(0, aval.ndim - 1)
        reverse = chance(b.choices, 30)
        templates += [f"lax.{op}({{0}}, {axis}, np.int32)" for op in ("argmax", "argmin")]
        templates += [f"lax.{op}({{0}}, axis={axis}, reverse={reverse})"
                      for op in ("cumsum", "cummax", "cummin", "cumprod", "cumlogsumexp")]
    options = accepted(templates, (aval,))
    return b.emit(pick(b.choices, options), (x,)) if options else None


def _reshaped(b: Builder, shape: tuple[int, ...]) -> tuple[int, ...]:
    size = math.prod(shape)
    rank = b.choices.integer(0, b.limits.max_rank)
    if size == 0:
        dims = [b.choices.integer(0, 3) for _ in range(max(rank, 1))]
        dims[b.choices.integer(0, len(dims) - 1)] = 0
        return tuple(dims)
    dims = []
    remaining = size
    for _ in range(rank - 1):
        divisors = [d for d in range(1, remaining + 1) if remaining % d == 0]
        dims.append(pick(b.choices, divisors))
        remaining //= dims[-1]
    return tuple(dims + [remaining]) if rank or remaining != 1 else ()


def layout(b: Builder, x: str) -> str | None:
    aval = b.aval(x)
    shape, ndim = aval.shape, aval.ndim
    kind = pick(b.choices, ("reshape", "transpose", "broadcast", "rev", "expand", "squeeze"))
    if kind == "reshape":
        return b.emit(f"lax.reshape({{0}}, {shape_text(_reshaped(b, shape))})", (x,))
    if kind == "transpose":
        return b.emit(f"lax.transpose({{0}}, {shape_text(permutation(b.choices, ndim))})", (x,))
    if kind == "rev":
        return b.emit(f"lax.rev({{0}}, {shape_text(subset(b.choices, range(ndim)))})", (x,))
    if kind == "expand":
        return b.emit(f"lax.expand_dims({{0}}, ({b.choices.integer(0, ndim)},))", (x,))
    if kind == "squeeze":
        ones = [i for i, d in enumerate(shape) if d == 1]
        return b.emit(f"lax.squeeze({{0}}, {shape_text(subset(b.choices, ones))})", (x,))
    out, dims = [], []
    for d in shape:
        while chance(b.choices, 25):
            out.append(b.dim())
        dims.append(len(out))
        out.append(b.choices.integer(1, b.limits.max_dim) if d == 1 and chance(b.choices, 50) else d)
    return b.emit(f"lax.broadcast_in_dim({{0}}, {shape_text(out)}, {shape_text(dims)})", (x,))


def slicing(b: Builder, x: str) -> str | None:
    aval = b.aval(x)
    shape = aval.shape
    kind = pick(b.choices, ("slice", "pad", "concatenate"))
    if kind == "slice":
        starts = [b.choices.integer(0, d) for d in shape]
        limits = [b.choices.integer(s, d) for s, d in zip(starts, shape)]
        strides = [b.choices.integer(1, 3) for _ in shape]
        return b.emit(f"lax.slice({{0}}, {shape_text(starts)}, {shape_text(limits)}, "
                      f"{shape_text(strides)})", (x,))
    if kind == "pad":
        config = tuple((b.choices.integer(-1, 2), b.choices.integer(-1, 2),
                        b.choices.integer(0, 1)) for _ in shape)
        value = scalar_text(pick(b.choices, (0.0, 1.5, -2.0)), aval.dtype)
        return b.emit(f"lax.pad({{0}}, {value}, {config!r})", (x,))
    if not shape:
        return None
    axis = b.choices.integer(0, len(shape) - 1)
    other_shape = list(shape)
    other_shape[axis] = b.dim()
    other = b.value_of(aval.update(shape=tuple(other_shape)))
    return b.emit(f"lax.concatenate(({{0}}, {{1}}), {axis})", (x, other))


def constant(b: Builder, x: str) -> str | None:
    aval = b.aval(x)
    dt, shape = dtype_source(aval.dtype), shape_text(aval.shape)
    value = scalar_text(pick(b.choices, (2.0, -0.5, 0.0)), aval.dtype)
    templates = [f"lax.mul({{0}}, lax.broadcast_in_dim({value}, {shape}, ()))",
                 f"lax.max({{0}}, lax.broadcast_in_dim({value}, {shape}, ()))"]
    if aval.ndim:
        iota = f"lax.broadcasted_iota({dt}, {shape}, {b.choices.integer(0, aval.ndim - 1)})"
        templates += [f"lax.add({{0}}, {iota})", f"lax.sub({iota}, {{0}})"]
    options = accepted(templates, (aval,))
    return b.emit(pick(b.choices, options), (x,)) if options else None


def _start_indices(b: Builder, shape: tuple[int, ...]) -> list[str]:
    """Scalar int32 inputs, one per axis, that may lie outside ``[0, d]``."""
    return [b.index_input((), -d - 2, d + 2) for d in shape]


def dynamic(b: Builder, x: str) -> str | None:
    aval = b.aval(x)
    starts = _start_indices(b, aval.shape)
    slots = "".join(f"{{{i + 1}}}, " for i in range(len(starts)))
    sizes = tuple(b.choices.integer(0, d) for d in aval.shape)
    if chance(b.choices, 50):
        return b.emit(f"lax.dynamic_slice({{0}}, ({slots}), {shape_text(sizes)})", (x, *starts))
    update = b.value_of(aval.update(shape=sizes))
    slots = "".join(f"{{{i + 2}}}, " for i in range(len(starts)))
    return b.emit(f"lax.dynamic_update_slice({{0}}, {{1}}, ({slots}))", (x, update, *starts))


def _index_range(b: Builder, size: int, window: int, mode: str) -> tuple[int, int]:
    if mode == "promise_in_bounds":
        return 0, size - window
    return -2, size + 1


def gather(b: Builder, x: str) -> str | None:
    aval = b.aval(x)
    axis = b.choices.integer(0, aval.ndim - 1)
    size = aval.shape[axis]
    window = b.choices.integer(1, max(size, 1)) if chance(b.choices, 30) else 1
    collapsed = window == 1 and not chance(b.choices, 20)
    mode = pick(b.choices, ("fill", "clip", "promise_in_bounds"))
    if size - window < 0 and mode == "promise_in_bounds":
        mode = "clip"
    low, high = _index_range(b, size, window, mode)
    indices = b.index_input((b.choices.integer(0, 4), 1), low, high)
    slice_sizes = tuple(window if i == axis else d for i, d in enumerate(aval.shape))
    n_offset = aval.ndim - 1 if collapsed else aval.ndim
    numbers = (f"lax.GatherDimensionNumbers(offset_dims={shape_text(range(1, n_offset + 1))}, "
               f"collapsed_slice_dims={shape_text((axis,) if collapsed else ())}, "
               f"start_index_map=({axis},))")
    fill = ""
    if mode == "fill" and chance(b.choices, 30):
        fill = f", fill_value={scalar_text(-1.0, aval.dtype)}"
    return b.emit(f"lax.gather({{0}}, {{1}}, {numbers}, slice_sizes={shape_text(slice_sizes)}, "
                  f"mode={mode!r}{fill})", (x, indices))


def scatter(b: Builder, x: str) -> str | None:
    aval = b.aval(x)
    axis = b.choices.integer(0, aval.ndim - 1)
    op = pick(b.choices, ("scatter_add", "scatter_max", "scatter_min", "scatter_mul", "scatter"))
    count = 1 if op == "scatter" else b.choices.integer(0, 4)  # one winner per position
    mode = pick(b.choices, ("fill", "clip", "promise_in_bounds"))
    if aval.shape[axis] == 0 and mode == "promise_in_bounds":
        mode = "clip"
    low, high = _index_range(b, aval.shape[axis], 1, mode)
    indices = b.index_input((count, 1), low, high)
    rest = tuple(d for i, d in enumerate(aval.shape) if i != axis)
    updates = b.value_of(aval.update(shape=(count, *rest)))
    numbers = (f"lax.ScatterDimensionNumbers(update_window_dims={shape_text(range(1, aval.ndim))}, "
               f"inserted_window_dims=({axis},), scatter_dims_to_operand_dims=({axis},))")
    return b.emit(f"lax.{op}({{0}}, {{1}}, {{2}}, {numbers}, mode={mode!r})",
                  (x, indices, updates))


def dot(b: Builder, x: str) -> str | None:
    aval = b.aval(x)
    contract = b.choices.integer(0, aval.ndim - 1)
    others = [i for i in range(aval.ndim) if i != contract]
    batch = [pick(b.choices, others)] if others and chance(b.choices, 40) else []
    roles = ["c", *("b" * len(batch)), *("f" * b.choices.integer(0, 2))]
    order = [roles[i] for i in permutation(b.choices, len(roles))]
    sizes = {"c": aval.shape[contract], "b": aval.shape[batch[0]] if batch else 0}
    rhs_shape = tuple(sizes[r] if r in sizes else b.dim() for r in order)
    rhs = b.value_of(aval.update(shape=rhs_shape))
    rhs_batch = (order.index("b"),) if batch else ()
    numbers = (f"((({contract},), ({order.index('c')},)), "
               f"({shape_text(batch)}, {shape_text(rhs_batch)}))")
    preferred = ", preferred_element_type=np.float32" if chance(b.choices, 20) else ""
    return b.emit(f"lax.dot_general({{0}}, {{1}}, {numbers}{preferred})", (x, rhs))


def sort(b: Builder, x: str) -> str | None:
    aval = b.aval(x)
    dim = b.choices.integer(0, aval.ndim - 1)
    if chance(b.choices, 30):
        k = b.choices.integer(0, aval.shape[-1])
        return b.emit(f"lax.top_k({{0}}, {k})[{b.choices.integer(0, 1)}]", (x,))
    if chance(b.choices, 30):
        payload = b.value_of(aval.update(dtype=b.dtype()))
        return b.emit(f"lax.sort(({{0}}, {{1}}), dimension={dim}, num_keys=1)"
                      f"[{b.choices.integer(0, 1)}]", (x, payload))
    return b.emit(f"lax.sort({{0}}, dimension={dim})", (x,))


def _captured(b: Builder, aval: ShapedArray, slot: int) -> tuple[str | None, tuple[str, ...]]:
    """Maybe a value a body closes over: its template slot and the step argument."""
    if chance(b.choices, 50):
        return f"{{{slot}}}", (b.value_of(aval),)
    return None, ()


def cond(b: Builder, x: str) -> str | None:
    aval = b.aval(x)
    if chance(b.choices, 30):
        index = b.index_input((), -1, 3)
        slot, captured = _captured(b, aval, 2)
        branches = ", ".join(f"lambda a: {body_text(b, aval, 'a', slot)}" for _ in range(3))
        return b.emit(f"lax.switch({{1}}, [{branches}], {{0}})", (x, index, *captured))
    pred = b.value_of(ShapedArray((), dtypes.bool_), fresh_percent=80)
    slot, captured = _captured(b, aval, 2)
    true_body, false_body = (body_text(b, aval, "a", slot) for _ in range(2))
    return b.emit(f"lax.cond({{1}}, lambda a: {true_body}, lambda a: {false_body}, {{0}})",
                  (x, pred, *captured))


def scan(b: Builder, x: str) -> str | None:
    aval = b.aval(x)
    carry_aval = aval.update(shape=aval.shape[1:])
    init = b.value_of(carry_aval)
    carry_options = accepted(binary_templates(), (carry_aval, carry_aval), same_type=True)
    if not carry_options:
        return None
    carry = pick(b.choices, carry_options).format("c", "a")
    slot, captured = _captured(b, carry_aval, 2)
    y = body_text(b, carry_aval, pick(b.choices, ("a", "c")), slot)
    reverse = chance(b.choices, 30)
    return b.emit(f"lax.scan(lambda c, a: ({carry}, {y}), {{1}}, {{0}}, reverse={reverse})"
                  f"[{b.choices.integer(0, 1)}]", (x, init, *captured))


def loop(b: Builder, x: str) -> str | None:
    aval = b.aval(x)
    if chance(b.choices, 50):
        slot, captured = _captured(b, aval, 1)
        trips = b.choices.integer(0, 3)
        return b.emit(f"lax.fori_loop(0, {trips}, lambda i, c: {body_text(b, aval, 'c', slot)}, "
                      "{0})", (x, *captured))
    trips = b.index_input((), -1, 3)
    slot, captured = _captured(b, aval, 2)
    body = body_text(b, aval, "s[1]", slot)
    return b.emit("lax.while_loop(lambda s: lax.lt(s[0], {1}), lambda s: (lax.add(s[0], "
                  f"np.int32(1)), {body}), (np.int32(0), {{0}}))[1]", (x, trips, *captured),
                  tags=frozenset({"while"}))


FAMILIES: tuple[Family, ...] = (
    Family("unary", 4, unary),
    Family("binary", 5, binary),
    Family("select", 1, select),
    Family("convert", 2, convert),
    Family("reduce", 3, reduce),
    Family("layout", 3, layout),
    Family("slicing", 2, slicing),
    Family("constant", 1, constant),
    Family("dynamic", 2, dynamic),
    Family("gather", 2, gather, _ranked),
    Family("scatter", 2, scatter, _ranked),
    Family("dot", 2, dot, lambda a: _ranked(a) and _numeric(a)),
    Family("sort", 1, sort, _ranked),
    Family("cond", 2, cond),
    Family("scan", 2, scan, _ranked),
    Family("loop", 2, loop),
)
