"""Gather and scatter against loop references written from XLA's semantics."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ember
from ember import lax
from ember.errors import EmberTypeError, EmberValueError
from ember.ops.indexing import take_along_axis
from ember.test_util import check_grads, check_vmap

GDN, SDN = lax.GatherDimensionNumbers, lax.ScatterDimensionNumbers


@st.composite
def gather_cases(draw):
    """A random operand, index array and valid dimension numbers (incl. batching axes);
    indices may be out of bounds. Returns (operand, indices, dnums, slice_sizes)."""
    shape = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    rank = len(shape)
    dims = list(range(rank))
    operand_batch = draw(st.lists(st.sampled_from(dims), max_size=1, unique=True))
    free = [d for d in dims if d not in operand_batch]
    collapsed = sorted(draw(st.lists(st.sampled_from(free), unique=True))) if free else []
    index_map = draw(st.lists(st.sampled_from(free), unique=True)) if free else []
    slice_sizes = [1 if d in collapsed or d in operand_batch else draw(st.integers(0, shape[d]))
                   for d in dims]
    batch_shape = draw(st.lists(st.integers(1, 3), max_size=2))
    indices_batch = []
    for dim in operand_batch:
        position = draw(st.integers(0, len(batch_shape)))
        batch_shape.insert(position, shape[dim])
        indices_batch = [p + (p >= position) for p in indices_batch] + [position]
    windows = rank - len(collapsed) - len(operand_batch)
    out_rank = windows + len(batch_shape)
    offset_dims = sorted(draw(st.permutations(range(out_rank)))[:windows])
    indices = np.array(draw(st.lists(st.integers(-2, 5), min_size=int(np.prod(
        batch_shape)) * len(index_map), max_size=int(np.prod(batch_shape)) * len(index_map))),
        np.int32).reshape((*batch_shape, len(index_map)))
    operand = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + 1
    dnums = GDN(tuple(offset_dims), tuple(collapsed), tuple(index_map), tuple(operand_batch),
                tuple(indices_batch))
    return operand, indices, dnums, tuple(slice_sizes)


def window_start(operand_shape, sizes, vector, batch_index, dnums, clip):
    """The operand start of one window per XLA's spec, and whether it fit unclamped."""
    start, fits = [0] * len(operand_shape), True
    for k, dim in enumerate(dnums[2]):
        upper = operand_shape[dim] - sizes[dim]
        fits &= 0 <= vector[k] <= upper
        start[dim] = min(max(int(vector[k]), 0), upper) if clip or fits else 0
    for dim, axis in zip(dnums[3], dnums[4]):
        start[dim] = batch_index[axis]
    return start, fits


def element_position(result_index, start, dnums, rank):
    """Operand position of one result element (window offset added to the start)."""
    window = [d for d in range(rank) if d not in dnums[1] and d not in dnums[3]]
    position = list(start)
    for dim, axis in zip(window, dnums[0]):
        position[dim] += result_index[axis]
    return tuple(position)


def gather_loop(operand, indices, dnums, sizes, mode, fill):
    out_shape = np.shape(lax.gather(operand, indices, dnums, sizes, mode="clip"))
    out = np.empty(out_shape, operand.dtype)
    for index in np.ndindex(*out_shape):
        batch_index = [i for p, i in enumerate(index) if p not in dnums[0]]
        vector = indices[tuple(batch_index)]
        start, fits = window_start(operand.shape, sizes, vector, batch_index, dnums,
                                   mode == "clip")
        out[index] = operand[element_position(index, start, dnums, operand.ndim)] \
            if fits or mode == "clip" else fill
    return out


@given(gather_cases(), st.sampled_from(["clip", "fill"]))
def test_gather_matches_loop(case, mode):
    operand, indices, dnums, sizes = case
    expected = gather_loop(operand, indices, dnums, sizes, mode, np.nan)
    np.testing.assert_array_equal(lax.gather(operand, indices, dnums, sizes, mode=mode),
                                  expected)


def test_gather_fill_defaults_by_dtype_and_promise_clamps():
    dnums = GDN((), (0,), (0,))
    index = np.array([[7]])
    for dtype, fill in [(np.int32, np.iinfo(np.int32).min), (np.uint8, 255), (np.bool_, True),
                        (np.float32, np.nan)]:
        np.testing.assert_array_equal(
            lax.gather(np.zeros(3, dtype), index, dnums, (1,)), np.array([fill], dtype))
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(lax.gather(x, index, dnums, (1,), fill_value=-1), [-1])
    np.testing.assert_array_equal(
        lax.gather(x, index, dnums, (1,), mode="promise_in_bounds"), [2])


SCATTERS = {
    "scatter": (lax.scatter, None),
    "scatter_add": (lax.scatter_add, np.add),
    "scatter_mul": (lax.scatter_mul, np.multiply),
    "scatter_min": (lax.scatter_min, np.minimum),
    "scatter_max": (lax.scatter_max, np.maximum),
}


def scatter_loop(operand, indices, updates, dnums, combine, clip):
    out = operand.copy()
    sizes = [1] * operand.ndim
    window = [d for d in range(operand.ndim) if d not in dnums[1] and d not in dnums[3]]
    for dim, axis in zip(window, dnums[0]):
        sizes[dim] = updates.shape[axis]
    for index in np.ndindex(*updates.shape):
        batch_index = [i for p, i in enumerate(index) if p not in dnums[0]]
        start, fits = window_start(operand.shape, sizes, indices[tuple(batch_index)],
                                   batch_index, dnums, clip)
        if fits or clip:
            position = element_position(index, start, dnums, operand.ndim)
            new = updates[index]
            out[position] = new if combine is None else combine(out[position], new)
    return out


@given(gather_cases(), st.sampled_from(sorted(SCATTERS)), st.booleans())
def test_scatter_matches_loop(case, name, clip):
    operand, indices, gather_dnums, sizes = case
    dnums = SDN(*gather_dnums)
    updates_shape = np.shape(lax.gather(operand, indices, gather_dnums, sizes, mode="clip"))
    updates = (np.arange(np.prod(updates_shape), dtype=np.float32) % 7 - 3).reshape(
        updates_shape)
    fn, combine = SCATTERS[name]
    mode = "clip" if clip else None
    expected = scatter_loop(operand, indices, updates, dnums, combine, clip)
    np.testing.assert_array_equal(fn(operand, indices, updates, dnums, mode=mode), expected)


def test_take_along_axis_matches_numpy():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    order = np.argsort(-x, axis=1)
    np.testing.assert_array_equal(take_along_axis(x, order, 1),
                                  np.take_along_axis(x, order, 1))


# --- errors ---------------------------------------------------------------------------

X, IDX = np.zeros((3, 4), np.float32), np.zeros((2, 1), np.int32)


@pytest.mark.parametrize("call, error, message", [
    (lambda: lax.gather(X, IDX.astype(np.float32), GDN((1,), (0,), (0,)), (1, 4)),
     EmberTypeError, "integer array"),
    (lambda: lax.gather(X, IDX, GDN((1,), (0,), (0, 1)), (1, 4)), EmberValueError,
     r"start_index_map=\(0, 1\) has 2 entries .* \(2, 1\)"),
    (lambda: lax.gather(X, IDX, GDN((1,), (0,), (0,)), (1, 5)), EmberValueError,
     r"slice_sizes \(1, 5\) .* operand \(3, 4\)"),
    (lambda: lax.gather(X, IDX, GDN((1,), (0,), (0,)), (2, 4)), EmberValueError,
     r"slice_sizes\[0\] is 2"),
    (lambda: lax.gather(X, IDX, GDN((), (0,), (0,)), (1, 4)), EmberValueError,
     "offset_dims=()"),
    (lambda: lax.gather(X, IDX, GDN((1, 0), (), (0,)), (1, 4)), EmberValueError,
     r"offset_dims=\(1, 0\) must be sorted"),
    (lambda: lax.gather(X, IDX, GDN((1,), (0,), (0,), (1,), (0,)), (1, 1)), EmberValueError,
     "must pair up axes"),
    (lambda: lax.gather(X, IDX, GDN((1,), (0,), (0,)), (1, 4), mode="wrap"), EmberValueError,
     "unknown gather/scatter mode 'wrap'"),
    (lambda: lax.scatter_add(X, IDX, np.zeros((2, 4), np.int32), SDN((1,), (0,), (0,))),
     EmberTypeError, "updates dtype int32"),
    (lambda: lax.scatter_add(X, IDX, np.zeros((3, 4), np.float32), SDN((1,), (0,), (0,))),
     EmberValueError, r"updates \(3, 4\) must have the batch axes of indices \(2, 1\)"),
    (lambda: lax.scatter(X, IDX, np.zeros((2, 5), np.float32), SDN((1,), (0,), (0,))),
     EmberValueError, r"windows of sizes \(1, 5\) do not fit"),
])
def test_errors_name_shapes_and_dimension_numbers(call, error, message):
    with pytest.raises(error, match=message):
        call()


# --- jit against eager ----------------------------------------------------------------

def test_jit_matches_eager():
    operand = np.arange(12, dtype=np.float32).reshape(3, 4)
    indices = np.array([[2], [0], [7]], np.int32)

    def f(x, i):
        g = lax.gather(x, i, GDN((1,), (0,), (0,)), (1, 4))
        s = lax.scatter_max(x, i, lax.neg(g), SDN((1,), (0,), (0,)), mode="clip")
        return g, s

    with ember.config.override(backend="reference"):
        for got, want in zip(ember.jit(f)(operand, indices), f(operand, indices)):
            np.testing.assert_array_equal(got, want)


# --- transformation rules -------------------------------------------------------------

RNG = np.random.default_rng(0)
X34 = RNG.standard_normal((3, 4))
ROWS = GDN((1,), (0,), (0,))
ROW_UPDATES = SDN((1,), (0,), (0,))
REPEATED = np.array([[0], [2], [5], [0]], np.int32)  # a repeat and an out-of-bounds row
UNIQUE = np.array([[1], [2], [0], [5]], np.int32)
U44 = RNG.standard_normal((4, 4))


@pytest.mark.parametrize("mode", ["clip", "fill", "promise_in_bounds"])
def test_gather_gradients(mode, x64):
    # fill_value=0 keeps finite differences finite where a window is out of bounds.
    check_grads(lambda x: lax.gather(x, REPEATED, ROWS, (1, 3), mode=mode, fill_value=0.0),
                (X34,), order=2)


def test_gather_gradient_with_batching_dims(x64):
    indices = np.array([[[2], [0]], [[1], [1]], [[0], [3]]], np.int32)  # (3, 2, 1)
    dnums = GDN((2,), (), (1,), (0,), (0,))
    check_grads(lambda x: lax.gather(x, indices, dnums, (1, 2), mode="clip"), (X34,), order=2)


@pytest.mark.parametrize("mode", ["clip", "fill"])
@pytest.mark.parametrize("name", ["scatter_add", "scatter_min", "scatter_max", "scatter"])
def test_scatter_gradients(name, mode, x64):
    fn = getattr(lax, name)
    check_grads(lambda x, u: fn(x, REPEATED, u, ROW_UPDATES, mode=mode), (X34, U44),
                order=1 if name in ("scatter_min", "scatter_max") else 2)


def test_unique_scatter_gradients_use_its_transpose(x64):
    check_grads(lambda x, u: lax.scatter(x, UNIQUE, u, ROW_UPDATES, unique_indices=True),
                (X34, U44), order=2)


def test_scatter_mul_gradients(x64):
    check_grads(lambda x: lax.scatter_mul(x, REPEATED, U44, ROW_UPDATES), (X34,), order=2)
    check_grads(lambda x, u: lax.scatter_mul(x, UNIQUE, u, ROW_UPDATES, unique_indices=True),
                (X34, U44), order=1)
    with pytest.raises(EmberValueError, match="unique_indices=True"):
        ember.grad(lambda u: lax.reduce_sum(lax.scatter_mul(X34, REPEATED, u, ROW_UPDATES),
                                            (0, 1)))(U44)


def test_scatter_max_ties_share_the_tangent(x64):
    def f(x, u):
        return lax.scatter_max(x, np.array([[0], [0]], np.int32), u, SDN((), (0,), (0,)))

    _, tangent = ember.jvp(f, (np.ones(1), np.ones(2)), (np.array([3.0]), np.array([6.0, 0.0])))
    np.testing.assert_allclose(tangent, [3.0])  # (3 + 6 + 0) / 3 winners


OPERAND = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
BATCHED_ROWS = np.array([[[0], [2]], [[1], [9]], [[2], [2]]], np.int32)  # (3, 2, 1)


def gather_rows(x, i):
    return lax.gather(x, i, GDN((1,), (0,), (0,)), (1, 4))


@pytest.mark.parametrize("args, in_axes", [
    ((OPERAND, BATCHED_ROWS[0]), (1, None)),
    ((OPERAND[0], BATCHED_ROWS), (None, 0)),
    ((OPERAND, BATCHED_ROWS), (1, 0)),
], ids=["operand", "indices", "both"])
def test_gather_vmap(args, in_axes):
    check_vmap(gather_rows, args, in_axes)


def test_nested_vmap_of_gather_uses_batching_dims():
    operand = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    indices = np.array([[[1], [2], [5]], [[0], [0], [3]]], np.int32)  # (2, 3, 1)
    inner = ember.vmap(lambda x, i: lax.gather(x, i, GDN((), (0,), (0,)), (1,)))
    np.testing.assert_array_equal(
        ember.vmap(inner)(operand, indices),
        np.stack([np.stack([np.asarray(lax.gather(operand[a, b], indices[a, b],
                                                  GDN((), (0,), (0,)), (1,)))
                            for b in range(3)]) for a in range(2)]))


UPDATES = -np.arange(24, dtype=np.float32).reshape(2, 3, 4)


@pytest.mark.parametrize("name", sorted(SCATTERS))
@pytest.mark.parametrize("args, in_axes", [
    ((OPERAND, BATCHED_ROWS, UPDATES), (1, 0, 1)),
    ((OPERAND, BATCHED_ROWS[0], UPDATES[:, 0]), (1, None, None)),
    ((OPERAND[0], BATCHED_ROWS, UPDATES), (None, 0, 1)),
    ((OPERAND[0], BATCHED_ROWS[0], UPDATES), (None, None, 1)),
], ids=["all", "operand", "indices_updates", "updates"])
def test_scatter_vmap(name, args, in_axes):
    fn = SCATTERS[name][0]
    check_vmap(lambda x, i, u: fn(x, i, u, ROW_UPDATES), args, in_axes)


def test_params_print_and_parse_back():
    """Dimension-number records, modes, fill values and the structural/sorting params of
    this area survive the IR text round trip."""
    from ember.ir.interpreter import eval_graph
    from ember.ir.parser import parse_graph
    from ember.ir.printer import print_graph

    def f(x, i, j):
        g = lax.gather(x, i, ROWS, (1, 4), fill_value=-1.0)
        s = lax.scatter_mul(x, i, g, ROW_UPDATES, mode="clip")
        p = lax.pad(x, np.float32(np.nan), [(1, -1, 1), (0, 0, 0)])
        d = lax.dynamic_update_slice(x, lax.dynamic_slice(x, (j, j), (2, 2)), (j, 1))
        return (g, s, p, d, *lax.sort((x, s), num_keys=2), *lax.top_k(x, 2),
                lax.broadcasted_iota(np.int32, (2, 3), 1), lax.concatenate([x, x], 0))

    args = [np.arange(12, dtype=np.float32).reshape(3, 4), np.array([[0], [9]], np.int32),
            np.int32(1)]
    graph = ember.make_graph(f)(*args)
    parsed = parse_graph(print_graph(graph))
    assert print_graph(parsed) == print_graph(graph)
    for got, want in zip(eval_graph(parsed, args), eval_graph(graph, args)):
        np.testing.assert_array_equal(got, want)
