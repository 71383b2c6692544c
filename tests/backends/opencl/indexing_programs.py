"""Programs with data-dependent indexing for the backend suites (CPU, OpenCL, CUDA): gather
(embedding lookups, take_along_axis, windows, every mode), dynamic_slice and
dynamic_update_slice, the scatters (repeated, negative and out-of-bounds indices,
overlapping windows, batching axes) and cumulative ops, over float32 / int32 / bool and
a few other dtypes, including empty shapes. Each is compared with the reference backend
(``CASES``); ``KERNEL_COUNTS`` says how many kernels (no host calls) a few take.
"""
from __future__ import annotations

import itertools

import numpy as np
from gpu_programs import Case, normal

import ember
import ember.numpy as jnp
from ember import lax

GDN, SDN = lax.GatherDimensionNumbers, lax.ScatterDimensionNumbers
MODES = ("clip", "fill", "promise_in_bounds")


def ids(rng, shape, low, high, dtype=np.int32) -> np.ndarray:
    return rng.integers(low, high, shape).astype(dtype)


def values(rng, shape, dtype) -> np.ndarray:
    """Distinct-ish values of ``dtype`` (floats with a NaN, bools mixed)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        return rng.integers(-50 if dtype.kind == "i" else 0, 50, shape).astype(dtype)
    x = normal(rng, *shape, dtype=dtype)
    if x.size > 3:
        x.reshape(-1)[3] = np.nan
    return x


# --- gather -----------------------------------------------------------------------

def _rows(mode):
    """An embedding lookup: whole rows at (negative, out-of-bounds) ids, scaled."""
    def fun(table, i):
        rows = lax.gather(table, i[..., None], GDN((i.ndim,), (0,), (0,)),
                          (1, table.shape[1]), mode=mode)
        return rows * 2 if rows.dtype != np.bool_ else ~rows
    return fun


def _windows(mode):
    """Windows of 3 x 2 at 2-d starts (clamped or filled near the edges)."""
    def fun(x, starts):
        return lax.gather(x, starts, GDN((1, 2), (), (0, 1)), (3, 2), mode=mode,
                          fill_value=-7)
    return fun


def _take_along(mode):
    def fun(x, i):
        return jnp.take_along_axis(x, i, axis=1, mode=mode)
    return fun


def _gather_cases() -> dict[str, Case]:
    cases = {}
    for mode, dtype in itertools.product(MODES, ["float32", "int32", "bool"]):
        cases[f"gather_rows_{mode}_{dtype}"] = Case(_rows(mode), lambda rng, d=dtype: (
            values(rng, (10, 6), d), ids(rng, (3, 5), -12, 12)))
        cases[f"gather_windows_{mode}_{dtype}"] = Case(_windows(mode), lambda rng, d=dtype: (
            values(rng, (7, 5), d), ids(rng, (4, 2), -2, 8)))
    for mode in MODES:
        cases[f"take_along_axis_{mode}"] = Case(_take_along(mode), lambda rng: (
            values(rng, (5, 9), "float32"), ids(rng, (5, 4), -11, 11)))
    cases.update({
        "gather_uint8_indices_float16": Case(_rows("fill"), lambda rng: (
            values(rng, (300, 4), "float16"), ids(rng, (7,), 0, 256, np.uint8))),
        "gather_computed_indices_and_operand": Case(
            lambda x, i: jnp.take(jnp.exp(x), (i * 3) % 5 - 1, axis=0) + 1.0,
            lambda rng: (values(rng, (4, 3), "float32"), ids(rng, (6,), 0, 9))),
        "gather_empty_indices": Case(_rows("fill"), lambda rng: (
            values(rng, (4, 3), "float32"), ids(rng, (0, 2), 0, 4))),
        "gather_empty_window": Case(_rows("clip"), lambda rng: (
            values(rng, (4, 0), "float32"), ids(rng, (2,), 0, 4))),
        "gather_scalar_index_vector": Case(  # one index for every output (no batch axes)
            lambda x, i: lax.gather(x, i, GDN((0,), (1,), (1,)), (6, 1), mode="fill"),
            lambda rng: (values(rng, (6, 4), "float32"), np.array([3], np.int32))),
        "gather_embedding_sum": Case(  # a reduction over gathered rows: one kernel
            lambda t, i: jnp.sum(jnp.take(t, i, axis=0), axis=1),
            lambda rng: (values(rng, (9, 32), "float32"), ids(rng, (4, 7), 0, 9))),
        "gather_x64_indices": Case(
            lambda x, i, u: (jnp.take(x, i, axis=0, mode="clip"),
                             jnp.take(x, u, axis=0, mode="fill")),
            lambda rng: (values(rng, (5, 3), "float64"),
                         np.array([-2**40, 2, 2**40, 4], np.int64),
                         np.array([2**64 - 1, 1, 2**63, 5], np.uint64)), x64=True),
    })
    return cases


# --- dynamic slices -----------------------------------------------------------------

def _dynamic_cases() -> dict[str, Case]:
    cases = {}
    starts = {"inside": (1, 2), "negative": (-2, -9), "past_the_end": (9, 3)}
    for (where, (a, b)), dtype in itertools.product(starts.items(), ["float32", "int32", "bool"]):
        cases[f"dynamic_slice_{where}_{dtype}"] = Case(
            lambda x, i, j: lax.dynamic_slice(x, (i, j), (3, 4)),
            lambda rng, d=dtype, a=a, b=b: (values(rng, (6, 7), d), np.int32(a), np.int32(b)))
        cases[f"dynamic_update_slice_{where}_{dtype}"] = Case(
            lambda x, u, i, j: lax.dynamic_update_slice(x, u, (i, j)),
            lambda rng, d=dtype, a=a, b=b: (values(rng, (6, 7), d), values(rng, (2, 5), d),
                                            np.int32(a), np.int32(b)))
    cases.update({
        "dynamic_update_slice_computed": Case(  # the operand is computed in place
            lambda x, u, i: lax.dynamic_update_slice(x * 2.0, u, (i, np.uint8(1))) + 1.0,
            lambda rng: (values(rng, (5, 6), "float32"), values(rng, (5, 2), "float32"),
                         np.int32(3))),
        "dynamic_update_slice_whole_axis": Case(  # the start along axis 0 is always 0
            lambda x, u, i: lax.dynamic_update_slice(x, u, (i, i)),
            lambda rng: (values(rng, (3, 6), "float32"), values(rng, (3, 2), "float32"),
                         np.int32(4))),
        "dynamic_update_slice_batched": Case(  # a scatter: rows at one position per batch
            ember.vmap(lambda c, u, t: lax.dynamic_update_slice(c, u, (t, 0))),
            lambda rng: (values(rng, (4, 6, 5), "float32"), values(rng, (4, 2, 5), "float32"),
                         ids(rng, (4,), -3, 8))),
        "dynamic_update_slice_empty_update": Case(
            lambda x, u, i: lax.dynamic_update_slice(x, u, (i, i)),
            lambda rng: (values(rng, (3, 4), "int32"), values(rng, (0, 2), "int32"),
                         np.int32(1))),
        "dynamic_index_in_dim": Case(  # a row at a traced index, used twice
            lambda x, k: lax.dynamic_index_in_dim(x, k, 0, keepdims=False) * x[:, 0],
            lambda rng: (values(rng, (5, 5), "float32"), np.int32(-1))),
    })
    return cases


# --- scatters -----------------------------------------------------------------------

SCATTERS = {"scatter": lax.scatter, "scatter_add": lax.scatter_add,
            "scatter_mul": lax.scatter_mul, "scatter_min": lax.scatter_min,
            "scatter_max": lax.scatter_max}


def _scatter_rows(name, mode):
    """Rows of updates into rows of the operand at repeated, negative and out-of-bounds
    ids (the gradient of an embedding lookup, for scatter_add)."""
    def fun(x, i, u):
        return SCATTERS[name](x, i[..., None], u, SDN((2,), (0,), (0,)), mode=mode)
    return fun


def _scatter_windows(name, mode):
    """Windows of 3 elements at starts that overlap each other (and the edges)."""
    def fun(x, i, u):
        return SCATTERS[name](x, i[:, None], u, SDN((1,), (), (0,)), mode=mode)
    return fun


def _scatter_apart(name, mode, windows):
    """Updates that land apart (one per row of a batching axis): computed at each
    position like a gather; windows of 3 along the indexed axis, or single elements."""
    dims = SDN((1,), (), (1,), (0,), (0,)) if windows else SDN((), (1,), (1,), (0,), (0,))

    def fun(x, i, u):
        out = SCATTERS[name](x, i, u, dims, mode=mode)
        return out * 2 if out.dtype != np.bool_ else ~out
    return fun


def _scatter_cases() -> dict[str, Case]:
    cases = {}
    for name, mode, windows in itertools.product(SCATTERS, MODES, (False, True)):
        shape = (4, 3) if windows else (4,)
        for dtype in ("float32", "int32") if windows else ("float32", "int32", "bool"):
            if dtype == "bool" and name in ("scatter_mul", "scatter_add") and mode != "clip":
                continue  # (fewer cases: bools combine like the others)
            cases[f"{name}_apart_{'windows' if windows else 'points'}_{mode}_{dtype}"] = Case(
                _scatter_apart(name, mode, windows), lambda rng, d=dtype, shape=shape: (
                    values(rng, (4, 9), d), ids(rng, (4, 1), -5, 11), values(rng, shape, d)))
    for name, mode, dtype in itertools.product(SCATTERS, MODES, ["float32", "int32"]):
        cases[f"{name}_rows_{mode}_{dtype}"] = Case(
            _scatter_rows(name, mode), lambda rng, d=dtype: (
                values(rng, (6, 5), d), ids(rng, (3, 4), -8, 8), values(rng, (3, 4, 5), d)))
    for name, mode in itertools.product(["scatter", "scatter_add"], MODES):
        cases[f"{name}_overlapping_windows_{mode}"] = Case(
            _scatter_windows(name, mode), lambda rng: (
                values(rng, (8,), "float32"), ids(rng, (6,), -2, 8), values(rng, (6, 3), "float32")))
    for name in SCATTERS:
        cases[f"{name}_bool"] = Case(_scatter_rows(name, "fill"), lambda rng: (
            values(rng, (5, 3), "bool"), ids(rng, (2, 4), -6, 6), values(rng, (2, 4, 3), "bool")))
    cases.update({
        "scatter_add_batching_axes": Case(  # take_along_axis's gradient: no repeats
            lambda x, i, g: ember.grad(lambda x: jnp.sum(
                jnp.take_along_axis(x, i, axis=1) * g))(x),
            lambda rng: (values(rng, (4, 9), "float32"), ids(rng, (4, 3), -9, 9),
                         values(rng, (4, 3), "float32"))),
        "scatter_add_embedding_gradient": Case(  # updates computed in the scatter's loops
            lambda t, i, g: ember.grad(lambda t: jnp.sum(jnp.take(t, i, axis=0) * g))(t),
            lambda rng: (values(rng, (7, 16), "float32"), ids(rng, (5, 6), -9, 9),
                         values(rng, (5, 6, 16), "float32"))),
        "scatter_add_parallel": Case(  # enough work for the CPU's threads
            _scatter_rows("scatter_add", "fill"), lambda rng: (
                normal(rng, 40, 512), ids(rng, (16, 64), -3, 43), normal(rng, 16, 64, 512))),
        "scatter_add_scalars_in_order": Case(  # every update may hit one position
            lambda x, i, u: x.at[i].add(u),
            lambda rng: (normal(rng, 5), ids(rng, (300,), -5, 5), normal(rng, 300))),
        "scatter_empty_updates": Case(_scatter_rows("scatter_add", "fill"), lambda rng: (
            values(rng, (3, 2), "float32"), ids(rng, (0, 4), 0, 3),
            values(rng, (0, 4, 2), "float32"))),
        "at_updates": Case(  # ``.at``: positions gathered from an iota (never stored)
            lambda x, i, j, u: (x.at[i, j].add(u), x.at[i].set(u[:, None] * 2.0),
                                x.at[i[::-1], 1:].max(u[:, None])),
            lambda rng: (normal(rng, 5, 4), ids(rng, (6,), -7, 7), ids(rng, (6,), -4, 5),
                         normal(rng, 6))),
        "scatter_add_float16": Case(_scatter_rows("scatter_add", "clip"), lambda rng: (
            values(rng, (4, 3), "float16"), ids(rng, (3, 2), 0, 4),
            values(rng, (3, 2, 3), "float16"))),
    })
    return cases


# --- cumulative ops --------------------------------------------------------------------

CUMULATIVE = {"cumsum": lax.cumsum, "cumprod": lax.cumprod, "cummax": lax.cummax,
              "cummin": lax.cummin}


def _scan(name, axis, reverse):
    return lambda x: CUMULATIVE[name](x, axis, reverse=reverse)


def _cumulative_cases() -> dict[str, Case]:
    cases = {}
    for name, axis, reverse in itertools.product(CUMULATIVE, (0, 1, 2), (False, True)):
        cases[f"{name}_axis{axis}_{'reverse' if reverse else 'forward'}"] = Case(
            _scan(name, axis, reverse), lambda rng: (values(rng, (3, 4, 5), "float32"),),
            tolerance=(1e-5, 1e-5))
    for name, dtype in itertools.product(CUMULATIVE, ["int32", "bool", "int8", "float16"]):
        if dtype != "bool" or name in ("cummax", "cummin"):  # (sums of bools: not accepted)
            cases[f"{name}_{dtype}"] = Case(_scan(name, 1, False),
                                            lambda rng, d=dtype: (values(rng, (4, 33), d),))
    cases.update({
        "cumsum_of_computed_values": Case(lambda x: lax.cumsum(jnp.exp(x) * 0.5, 0) - 1.0,
                                          lambda rng: (normal(rng, 6, 7),)),
        "cumsum_empty_axis": Case(_scan("cumsum", 1, False),
                                  lambda rng: (values(rng, (3, 0), "float32"),)),
        # a scanned axis of extent 1 before longer rows: every element is the first
        "cummax_unit_axis_across_rows": Case(_scan("cummax", 0, False),
                                             lambda rng: (values(rng, (1, 3), "float32"),)),
        "cumsum_parallel_rows": Case(_scan("cumsum", 1, False),
                                     lambda rng: (normal(rng, 512, 600),), tolerance=(1e-4, 1e-4)),
        # across rows: the previous row, as stored (or, for half precision sums, a
        # float32 accumulator per column)
        "cumsum_parallel_columns": Case(_scan("cumsum", 0, True), lambda rng: (
            normal(rng, 600, 512),), tolerance=(1e-4, 1e-4)),
        **{f"{name}_{dtype}_columns": Case(_scan(name, 0, False), lambda rng, d=dtype: (
            values(rng, (5, 3, 7), d),)) for name, dtype in [
                ("cumsum", "int8"), ("cumsum", "float16"), ("cummax", "float16"),
                ("cummin", "bool"), ("cumprod", "int32")]},
    })
    return cases


CASES: dict[str, Case] = {**_gather_cases(), **_dynamic_cases(), **_scatter_cases(),
                          **_cumulative_cases()}


# --- kernel counts: each is one kernel, no host call ----------------------------------

def embedding_scaled(table, i):
    return jnp.take(table, i, axis=0) * 8.0


def embedding_with_positions(table, positions, i):
    return jnp.take(table, i, axis=0) + positions[: i.shape[-1]]


def cross_entropy(log_probs, targets):
    return -jnp.mean(jnp.take_along_axis(log_probs, targets[..., None], axis=-1))


def embedding_gradient(table, i, g):
    return ember.grad(lambda t: jnp.sum(jnp.take(t, i, axis=0) * g))(table)


def _count_args(rng):
    return normal(rng, 32, 16), ids(rng, (4, 8), 0, 32)


def at_add(x, i, u):
    return x.at[i].add(u)


def take_flattened(x, i):
    """A gather from a reshape of an input: read in place, the reshape never copied."""
    return jnp.take(jnp.reshape(x, (-1,)), i) * 2.0


KERNEL_COUNTS = {
    "at_add": (at_add, lambda rng: (normal(rng, 9), ids(rng, (5,), -9, 9), normal(rng, 5))),
    "embedding_scaled": (embedding_scaled, _count_args),
    "embedding_with_positions": (embedding_with_positions, lambda rng: (
        normal(rng, 32, 16), normal(rng, 8, 16), ids(rng, (4, 8), 0, 32))),
    "cross_entropy": (cross_entropy, lambda rng: (normal(rng, 4, 8, 32), ids(rng, (4, 8), 0, 32))),
    "embedding_gradient": (embedding_gradient, lambda rng: (*_count_args(rng),
                                                            normal(rng, 4, 8, 16))),
    "take_flattened": (take_flattened, lambda rng: (normal(rng, 6, 5), ids(rng, (3, 7), 0, 30))),
}


def compiled_on(backend: str, name: str):
    """The compiled ``KERNEL_COUNTS[name]`` program on ``backend``."""
    fun, make_args = KERNEL_COUNTS[name]
    return ember.jit(fun, backend=backend).lower(*make_args(np.random.default_rng(0))).compile()


def boundaries(compiled) -> list[tuple[str, list[str]]]:
    """What each kernel of a compiled program is and computes: equal on every backend."""
    return [(k.kind, k.ops) for k in compiled.kernels]
