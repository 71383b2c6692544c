"""The programs of the GPU backend suites: each family the CPU backend's differential
tests cover (every elementwise primitive on edge values, views, degenerate shapes,
reductions, argmax / argmin, row-wise kernels, contractions, host calls, iota), plus
sizes that exercise the GPU mapping (more rows than blocks, rows longer than a block,
more elements than one grid pass).

The OpenCL suite runs each on PoCL against the reference backend; the CUDA suite
compiles each with NVRTC (and runs each where a GPU is present). ``CASES`` maps a name to
a ``Case``; ``Case.args()`` builds fresh inputs (deterministic); ``assert_trees_same``
compares results with a tolerance fitting the dtype.
"""
from __future__ import annotations

import contextlib
import itertools
from dataclasses import dataclass
from typing import Callable

import numpy as np

import ember
from ember import lax
from ember.core import dtypes
from ember.core.abstract import ShapedArray
from ember.errors import EmberError
from ember.ops import elementwise as ew


@dataclass(frozen=True)
class Case:
    fun: Callable
    make_args: Callable[[np.random.Generator], tuple]
    x64: bool = False
    tolerance: tuple[float, float] | None = None

    def args(self) -> tuple:
        return self.make_args(np.random.default_rng(0))


def x64_mode(enabled: bool):
    """64-bit dtypes on for an x64 case (its inputs must be made inside, too)."""
    return ember.config.override(enable_x64=True) if enabled else contextlib.nullcontext()


def normal(rng: np.random.Generator, *shape, dtype=np.float32, scale=1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(dtype)


def with_specials(x: np.ndarray) -> np.ndarray:
    """``x`` with NaN, +inf, -inf and 0 spread over it."""
    flat = x.reshape(-1).copy()
    for i, value in enumerate([np.nan, np.inf, -np.inf, 0.0][:flat.size]):
        flat[(i * 7) % flat.size] = value
    return flat.reshape(x.shape)


# --- every elementwise primitive ----------------------------------------------------

_SPECIAL_FORMS = ("select_n", "clamp", "convert_element_type", "integer_pow", "round")
_FLOATS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.75, 100.0, -100.0,
           1e-30, 7e4]
_INTS = [0, 1, -1, 2, 3, 7, 31, 32, 63, 64, -3]


def _accepts(name: str, arity: int, dtype: np.dtype) -> bool:
    try:
        ew.ELEMENTWISE[name].abstract_eval(*[ShapedArray((), dtype)] * arity)
    except (EmberError, TypeError):
        return False
    return True


def _edge_pairs(dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """Every pair (x, y) of the dtype's edge values, as two flat arrays."""
    if dtype == np.bool_:
        values = [False, True]
    elif dtypes.is_integer(dtype):
        info = np.iinfo(dtype)
        values = sorted({info.min, info.max, info.min + 1, info.max - 1}
                        | {v for v in _INTS if info.min <= v <= info.max})
    else:
        values = _FLOATS
    with np.errstate(over="ignore"):
        values = np.array(values, dtype=dtype)
    x, y = zip(*itertools.product(values, values))
    return np.array(x, dtype=dtype), np.array(y, dtype=dtype)


def every_elementwise_op(dtype: np.dtype) -> Callable:
    names = [n for n in ew.ELEMENTWISE if n not in _SPECIAL_FORMS]
    unary = [n for n in names if _accepts(n, 1, dtype)]
    binary = [n for n in names if _accepts(n, 2, dtype)]
    targets = [np.bool_, np.int8, np.uint8, np.int32, np.uint32, np.float16, np.float32]
    if dtypes.bfloat16 is not None:
        targets.append(dtypes.bfloat16)

    def fun(x, y):
        outs = {name: ew.ELEMENTWISE[name].bind(x) for name in unary}
        outs.update({f"{name}(x, y)": ew.ELEMENTWISE[name].bind(x, y) for name in binary})
        if dtype != np.bool_:
            outs["select"] = ew.select_n(ew.lt(x, y), x, y)
            outs["clamp"] = ew.clamp(y, x, y + y)
            outs.update({f"x**{p}": ew.integer_pow(x, p) for p in (0, 1, 2, 3, 5)})
        if dtypes.is_floating(dtype):
            outs["x**-2"] = ew.integer_pow(x, -2)
            outs["round_even"] = ew.round(x, 1)
            outs["round_away"] = ew.round(x, 0)
        wide = [np.int64, np.uint64, np.float64] if ember.config.enable_x64 else []
        for target in [*targets, *wide]:
            outs[f"to_{np.dtype(target).name}"] = ew.convert_element_type(x, np.dtype(target))
        return outs

    return fun


ELEMENTWISE_DTYPES = ["bool", "int8", "int16", "int32", "uint8", "uint16", "uint32", "float16",
                      "float32", *(["bfloat16"] if dtypes.bfloat16 is not None else [])]
ELEMENTWISE_X64_DTYPES = ["int64", "uint64", "float64"]


def _elementwise_case(name: str, x64: bool) -> Case:
    dtype = dtypes.to_dtype(name)
    return Case(every_elementwise_op(dtype), lambda rng: _edge_pairs(dtype), x64=x64)


# --- structure: views, shapes, reductions, contractions, host calls -----------------

def _views(x):
    t = lax.transpose(x, (2, 0, 1))
    s = lax.slice(t, (1, 0, 1), (5, 4, 6), (2, 1, 2))
    r = lax.rev(s, (0, 2))
    m = lax.reshape(r, (2, 12))
    b = lax.broadcast_in_dim(lax.reduce_sum(m, (1,)), (3, 2, 12), (1,))
    return lax.squeeze(lax.reshape(m, (1, 2, 12)), (0,)) * 2.0 + b, lax.reshape(x, (20, 6))


def _degenerate(x):
    axes = tuple(range(x.ndim))
    y = lax.exp(x) * 3.0 + x
    return y, lax.reduce_sum(y, axes), lax.reduce_max(x, axes[-1:]), lax.transpose(x, axes[::-1])


def _reductions(name: str, dtype: str) -> Case:
    reduce = getattr(lax, name)
    dtype = dtypes.to_dtype(dtype)

    def make(rng):
        x = normal(rng, 3, 4, 5, scale=3.0)
        if dtypes.is_floating(dtype):
            x = x * 0.3 + 1 if name == "reduce_prod" else with_specials(x)
        return (x.astype(dtype),)

    def fun(x):
        return [reduce(x, axes) for axes in [(0,), (1,), (2,), (0, 2), (1, 2), (0, 1, 2)]]

    tolerance = (2e-2, 1e-2) if dtype == np.float16 else (1e-4, 1e-5)
    return Case(fun, make, tolerance=tolerance)


def _bitwise(x):
    return [lax.reduce_and(x, (1,)), lax.reduce_or(x, (0,)), lax.reduce_xor(x, (0, 1)),
            lax.reduce_max(x, (1,))]


def _arg_reductions(x, ints):
    return [lax.argmax(x, 1, np.int32), lax.argmin(x, 1, np.int32), lax.argmax(x, 0, np.int32),
            lax.argmin(ints, 1, np.int32), lax.argmax(ints, 0, np.int32)]


def _arg_inputs(rng):
    x = np.array([[1, 3, 3, 0], [np.nan, 2, np.nan, 9], [-np.inf] * 4, [5, 5, 5, 5]],
                 np.float32)
    return x, np.array([[4, 1, 4, 1], [0, 0, 0, 0]], np.int32)


def _long_argmax(x):
    """Rows longer than a block: ties and NaN across threads' partial results."""
    return lax.argmax(x, 1, np.int32), lax.argmin(x, 1, np.int32)


def _long_arg_inputs(rng):
    x = np.round(normal(rng, 5, 1000, scale=2.0))  # many ties
    x[1, 700] = np.nan
    x[1, 300] = np.nan
    x[2, :] = 7.0
    x[3, 999] = 100.0
    return (x,)


def _empty_reductions(x):
    return [lax.reduce_sum(x, (1,)), lax.reduce_max(x, (1,)), lax.reduce_min(x, (1,)),
            lax.reduce_prod(x, (1,))]


def _row_kernels(x):
    m = lax.reduce_max(x, (1,))
    e = lax.exp(x - lax.broadcast_in_dim(m, x.shape, (0,)))
    s = lax.reduce_sum(e, (1,))
    mean = lax.reduce_sum(x, (1,)) / float(x.shape[1])
    return e / lax.broadcast_in_dim(s, x.shape, (0,)), m, mean


def softmax(x):
    m = lax.reduce_max(x, (x.ndim - 1,))
    e = lax.exp(x - lax.broadcast_in_dim(m, x.shape, tuple(range(x.ndim - 1))))
    s = lax.reduce_sum(e, (x.ndim - 1,))
    return e / lax.broadcast_in_dim(s, x.shape, tuple(range(x.ndim - 1)))


def layernorm(x, gamma, beta):
    axis, n = x.ndim - 1, x.shape[-1]
    keep = tuple(range(x.ndim - 1))
    mean = lax.broadcast_in_dim(lax.reduce_sum(x, (axis,)) / n, x.shape, keep)
    centered = x - mean
    var = lax.broadcast_in_dim(lax.reduce_sum(centered * centered, (axis,)) / n, x.shape, keep)
    return centered * lax.rsqrt(var + 1e-5) * gamma + beta


def gelu(x):
    return 0.5 * x * (1.0 + lax.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def chain30(x):
    for step in range(10):
        x = lax.sin(x) * 1.01 + float(step)
    return x


def transpose_scale(x):
    return x.T * 2 + 1


def _dot(dims):
    return lambda a, b: lax.dot_general(a, b, dims)


_DOTS = {
    "gemm": ((64, 48), (48, 40), (((1,), (0,)), ((), ()))),
    "gemm_lhs_t": ((48, 64), (48, 40), (((0,), (0,)), ((), ()))),
    "gemm_rhs_t": ((64, 48), (40, 48), (((1,), (1,)), ((), ()))),
    "gemm_batched": ((3, 20, 30), (3, 30, 25), (((2,), (1,)), ((0,), (0,)))),
    "gemm_strided_batch": ((20, 3, 30), (30, 25, 3), (((2,), (0,)), ((1,), (2,)))),
    "gemm_two_contracting": ((4, 5, 6), (6, 5, 7), (((1, 2), (1, 0)), ((), ()))),
    "gemm_ragged_tiles": ((130, 77), (77, 150), (((1,), (0,)), ((), ()))),
    "dot_small": ((3, 5), (5, 2), (((1,), (0,)), ((), ()))),
    "dot_empty_rows": ((0, 5), (5, 4), (((1,), (0,)), ((), ()))),
    "dot_empty_k": ((30, 0), (0, 40), (((1,), (0,)), ((), ()))),
}


def _dot_case(shapes, dtype: str) -> Case:
    lhs, rhs, dims = shapes
    return Case(_dot(dims), lambda rng: (normal(rng, *lhs, scale=4.0).astype(dtype),
                                         normal(rng, *rhs, scale=4.0).astype(dtype)),
                tolerance=(1e-4, 1e-4))


def _matmul_epilogue(a, b, bias):
    return lax.max(lax.dot_general(a, b, (((1,), (0,)), ((), ()))) + bias, 0.0)


def _heads_into_rows(p, v):
    """Products written through their consumer's transpose (no copy kernel): row-major
    with the consumer's leading dimension, and with the matrices transposed."""
    b, h, s, d = v.shape
    rows = ember.numpy.transpose(p @ v, (0, 2, 1, 3)).reshape(b, s, h * d)
    columns = ember.numpy.transpose(ember.numpy.swapaxes(v, -1, -2) @ p, (0, 3, 1, 2))
    return rows, columns


def _host_calls(x):
    # cumlogsumexp runs on the host on every backend (cumsum is native everywhere).
    return lax.tanh(lax.cumlogsumexp(x, 1)) * 2.0, lax.cumsum(x, 1)


def _dropout(key, x):
    # random bits as uint32 arithmetic (passes/threefry.py), fused with the mask
    keep = ember.random.bernoulli(key, 0.75, x.shape)
    return ember.numpy.where(keep, x / 0.75, 0.0)


def _iota(x):
    i = lax.broadcasted_iota(np.int32, (4, 6), 1)
    j = lax.broadcasted_iota(np.float32, (4, 6), 0)
    return x * j + lax.convert_element_type(i * 3 % 4, np.float32)


def _column_and_total(x):
    return lax.reduce_sum(x, (0,)), lax.reduce_max(x, (0, 1)), lax.reduce_sum(x * x, (0, 1))


def _one_element_reductions(x, y):
    """Reductions over one element have no loop: each thread's result is already whole."""
    self_dot = ember.grad(lambda v: lax.dot_general(v, v, (((0,), (0,)), ((), ()))))(y)
    return lax.reduce_sum(x, (1,)) * 2.0, lax.argmax(x, 1, np.int32), self_dot


def _constant(x):
    return x * np.arange(7, dtype=np.float32) + 1.0


def _scalar_output(x):
    return lax.reduce_sum(x, (0,)) * 2.0, x[0] + 1.0


CASES: dict[str, Case] = {
    **{f"elementwise_{n}": _elementwise_case(n, False) for n in ELEMENTWISE_DTYPES},
    **{f"elementwise_{n}": _elementwise_case(n, True) for n in ELEMENTWISE_X64_DTYPES},
    "views": Case(_views, lambda rng: (normal(rng, 4, 6, 5),)),
    **{f"degenerate_{'x'.join(map(str, s)) or 'scalar'}": Case(
        _degenerate, lambda rng, s=s: (normal(rng, *s),))
       for s in [(0, 3), (3, 0), (1, 1), (1, 5), (5, 1), ()]},
    # (sum and max on every dtype; prod and min share their code paths, so fewer)
    **{f"{name}_{dtype}": _reductions(name, dtype)
       for name, dtypes_ in [("reduce_sum", ["float32", "float16", "int32", "uint8"]),
                             ("reduce_max", ["float32", "float16", "int32", "uint8"]),
                             ("reduce_prod", ["float32", "int32"]),
                             ("reduce_min", ["float16", "uint8"])]
       for dtype in dtypes_},
    **{f"bitwise_{d}": Case(_bitwise, lambda rng, d=d: (rng.integers(0, 4, (5, 6)).astype(d),))
       for d in ["bool", "int16"]},
    "argmax_argmin": Case(_arg_reductions, _arg_inputs),
    "argmax_long_rows": Case(_long_argmax, _long_arg_inputs),
    "empty_reductions": Case(_empty_reductions, lambda rng: (np.zeros((3, 0), np.float32),)),
    "row_kernels": Case(_row_kernels, lambda rng: (with_specials(normal(rng, 6, 33)),)),
    "softmax_many_long_rows": Case(softmax, lambda rng: (normal(rng, 1500, 700),),
                                   tolerance=(1e-5, 1e-7)),
    "layernorm": Case(layernorm, lambda rng: (normal(rng, 64, 300), normal(rng, 300),
                                              normal(rng, 300)), tolerance=(1e-4, 1e-5)),
    "gelu_more_than_one_grid_pass": Case(gelu, lambda rng: (normal(rng, 600, 700),),
                                         tolerance=(1e-5, 1e-6)),
    "chain30": Case(chain30, lambda rng: (normal(rng, 40, 50),), tolerance=(1e-5, 1e-5)),
    "transpose_scale": Case(transpose_scale, lambda rng: (normal(rng, 37, 53),)),
    "column_and_total_reductions": Case(_column_and_total, lambda rng: (normal(rng, 300, 900),),
                                        tolerance=(1e-4, 1e-4)),
    **{f"{name}_{dtype}": _dot_case(shapes, dtype)
       for name, shapes in _DOTS.items() for dtype in ["float32", "int32"]},
    "gemm_float64": Case(_dot(_DOTS["gemm"][2]), lambda rng: (
        normal(rng, 64, 48, dtype=np.float64), normal(rng, 48, 40, dtype=np.float64)),
        x64=True, tolerance=(1e-12, 1e-12)),
    "gemm_epilogue": Case(_matmul_epilogue, lambda rng: (
        normal(rng, 70, 90), normal(rng, 90, 33), normal(rng, 33)), tolerance=(1e-4, 1e-4)),
    "half_contraction": Case(_dot(_DOTS["gemm"][2]), lambda rng: (
        normal(rng, 16, 300, dtype=np.float16), normal(rng, 300, 8, dtype=np.float16)),
        tolerance=(2e-2, 2e-2)),
    "gemm_through_views": Case(_heads_into_rows, lambda rng: (
        normal(rng, 2, 3, 70, 70), normal(rng, 2, 3, 70, 20)), tolerance=(1e-4, 1e-4)),
    "host_calls": Case(_host_calls, lambda rng: (normal(rng, 5, 7),)),
    "iota": Case(_iota, lambda rng: (normal(rng, 4, 6),)),
    "dropout": Case(_dropout, lambda rng: (np.array([0, 42], np.uint32), normal(rng, 33, 65))),
    "one_element_reductions": Case(_one_element_reductions, lambda rng: (
        normal(rng, 300, 1), normal(rng, 2))),
    "constant_operand": Case(_constant, lambda rng: (normal(rng, 3, 7),)),
    "scalar_outputs": Case(_scalar_output, lambda rng: (normal(rng, 9),)),
}

# Programs whose kernel counts must be the same on every backend (one fusion decision).
FUSION_CASES = ["softmax_many_long_rows", "layernorm", "gelu_more_than_one_grid_pass",
                "chain30", "transpose_scale", "gemm_epilogue", "row_kernels", "host_calls"]


# --- comparing results ------------------------------------------------------------

# (rtol, atol): OpenCL's float32 built-ins are allowed a few ulp (PoCL uses SLEEF);
# half precision is computed in float32 and rounded once, where NumPy rounds every op.
TOLERANCE = {"float16": (4e-3, 1e-3), "bfloat16": (2e-2, 1e-2), "float32": (2e-5, 1e-6),
             "float64": (1e-12, 1e-14)}


def assert_same(got, want, tolerance=None, what: str = "") -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    if dtypes.is_floating(want.dtype):
        rtol, atol = tolerance or TOLERANCE[want.dtype.name]
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=rtol, atol=atol, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def assert_trees_same(got, want, tolerance=None) -> None:
    got_leaves, got_tree = ember.tree_util.tree_flatten(got)
    want_leaves, want_tree = ember.tree_util.tree_flatten(want)
    assert got_tree == want_tree
    paths = [str(i) for i in range(len(want_leaves))]
    if isinstance(want, dict):
        paths = sorted(want)  # dict leaves flatten in sorted key order
    for path, g, w in zip(paths, got_leaves, want_leaves):
        assert_same(g, w, tolerance, what=f"output {path}")
