"""Structural primitives against NumPy, their errors, and jit against eager."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember
from ember import lax
from ember.errors import EmberIndexError, EmberTypeError, EmberValueError
from ember.test_util import check_grads, check_vmap

shapes = hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=4)


def arange(shape, dtype=np.float32) -> np.ndarray:
    return np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)


def check(actual, expected) -> None:
    actual = np.asarray(actual)
    assert actual.shape == expected.shape
    assert actual.dtype == expected.dtype
    np.testing.assert_array_equal(actual, expected)


# --- against NumPy on generated shapes ------------------------------------------------

@given(shapes, st.data())
def test_broadcast_in_dim(shape, data):
    out_ndim = len(shape) + data.draw(st.integers(0, 2))
    dims = sorted(data.draw(st.permutations(range(out_ndim)))[:len(shape)])
    out_shape = [data.draw(st.integers(1, 3)) for _ in range(out_ndim)]
    x = arange([1 if data.draw(st.booleans()) else s for s in shape])
    for axis, dim in enumerate(dims):
        out_shape[dim] = x.shape[axis] if x.shape[axis] != 1 else out_shape[dim]
    expanded = x.reshape([x.shape[dims.index(d)] if d in dims else 1 for d in range(out_ndim)])
    check(lax.broadcast_in_dim(x, out_shape, dims), np.broadcast_to(expanded, out_shape))


@given(shapes, st.data())
def test_reshape_and_transpose(shape, data):
    x = arange(shape)
    perm = data.draw(st.permutations(range(len(shape))))
    check(lax.transpose(x, perm), np.transpose(x, perm))
    expected = np.transpose(x, perm).reshape(shape[::-1])
    check(lax.reshape(x, shape[::-1], dimensions=perm), expected)
    check(lax.reshape(x, (x.size,)), x.ravel())


@given(shapes, st.data())
def test_squeeze_expand_dims_rev(shape, data):
    x = arange(shape)
    ones = [d for d, s in enumerate(shape) if s == 1]
    squeezed = data.draw(st.lists(st.sampled_from(ones), unique=True)) if ones else []
    check(lax.squeeze(x, squeezed), np.squeeze(x, tuple(squeezed)))
    out_ndim = len(shape) + data.draw(st.integers(0, 2))
    new = data.draw(st.lists(st.integers(-out_ndim, out_ndim - 1), min_size=out_ndim - len(shape),
                             max_size=out_ndim - len(shape), unique_by=lambda d: d % out_ndim))
    check(lax.expand_dims(x, new), np.expand_dims(x, tuple(new)))
    flipped = data.draw(st.lists(st.integers(0, len(shape) - 1), unique=True))
    check(lax.rev(x, flipped), np.flip(x, tuple(flipped)))


def pad_loop(x: np.ndarray, value, config) -> np.ndarray:
    """Pad by asking, for every output position, which input element (if any) lands there."""
    out_shape = [lo + hi + s + max(s - 1, 0) * i for s, (lo, hi, i) in zip(x.shape, config)]
    out = np.full(out_shape, value, x.dtype)
    for position in np.ndindex(*out_shape):
        source = []
        for o, s, (lo, _, interior) in zip(position, x.shape, config):
            step, offset = divmod(o - lo, interior + 1)
            source.append(step if offset == 0 and 0 <= step < s else None)
        if None not in source:
            out[position] = x[tuple(source)]
    return out


@given(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4), st.data())
def test_pad_with_negative_and_interior(shape, data):
    x = arange(shape) + 1
    config = []
    for size in shape:
        interior = data.draw(st.integers(0, 2))
        full = size + max(size - 1, 0) * interior
        lo = data.draw(st.integers(-full, 3))
        hi = data.draw(st.integers(-(full + lo) if full + lo > 0 else 0, 3))
        config.append((lo, hi, interior))
    check(lax.pad(x, np.float32(-7), config), pad_loop(x, -7, config))


@given(shapes, st.data())
def test_concatenate(shape, data):
    axis = data.draw(st.integers(0, len(shape) - 1))
    pieces = []
    for extra in data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=3)):
        piece_shape = list(shape)
        piece_shape[axis] = extra
        pieces.append(arange(piece_shape) + len(pieces))
    check(lax.concatenate(pieces, axis), np.concatenate(pieces, axis))


@given(shapes, st.data())
def test_iota(shape, data):
    axis = data.draw(st.integers(0, len(shape) - 1))
    expected = np.broadcast_to(np.arange(shape[axis], dtype=np.int32).reshape(
        [-1 if d == axis else 1 for d in range(len(shape))]), shape)
    check(lax.broadcasted_iota(np.int32, shape, axis), expected)
    check(lax.iota(np.float32, shape[0]), np.arange(shape[0], dtype=np.float32))


@given(shapes, st.data())
def test_slice(shape, data):
    x = arange(shape)
    starts, limits, strides = [], [], []
    for size in shape:
        start = data.draw(st.integers(0, size))
        starts.append(start)
        limits.append(data.draw(st.integers(start, size)))
        strides.append(data.draw(st.integers(1, 3)))
    expected = x[tuple(slice(a, b, s) for a, b, s in zip(starts, limits, strides))]
    check(lax.slice(x, starts, limits, strides), expected)


def clamped(index: int, size: int, window: int) -> int:
    index = index + size if index < 0 else index
    return min(max(index, 0), size - window)


@given(shapes, st.data())
def test_dynamic_slice_and_update_clamp(shape, data):
    x = arange(shape)
    sizes = [data.draw(st.integers(0, s)) for s in shape]
    starts = [data.draw(st.integers(-s - 2, s + 2)) for s in shape]
    window = tuple(slice(clamped(i, s, w), clamped(i, s, w) + w)
                   for i, s, w in zip(starts, shape, sizes))
    traced_starts = [np.int32(i) for i in starts]
    check(lax.dynamic_slice(x, traced_starts, sizes), x[window])
    update = -arange(sizes) - 1
    expected = x.copy()
    expected[window] = update
    check(lax.dynamic_update_slice(x, update, traced_starts), expected)


def test_slice_helpers():
    x = arange((4, 5))
    check(lax.slice_in_dim(x, 1, -1, 2, axis=1), x[:, 1:-1:2])
    check(lax.slice_in_dim(x, None, None, axis=0), x)
    check(lax.index_in_dim(x, -1, axis=0), x[-1:])
    check(lax.index_in_dim(x, 2, axis=1, keepdims=False), x[:, 2])
    check(lax.dynamic_slice_in_dim(x, np.int32(3), 2, axis=1), x[:, 3:5])
    check(lax.dynamic_slice_in_dim(x, 9, 2), x[2:4])  # clamped
    check(lax.dynamic_index_in_dim(x, np.int32(-1), axis=1, keepdims=False), x[:, 4])
    row = np.full((5,), -1, np.float32)
    expected = x.copy()
    expected[2] = row
    check(lax.dynamic_update_index_in_dim(x, row, np.int32(2), 0), expected)
    expected = x.copy()
    expected[:, 3:] = 0
    check(lax.dynamic_update_slice_in_dim(x, np.zeros((4, 2), np.float32), 4, axis=1), expected)


def test_negative_indices_may_clamp_instead_of_wrap():
    x = arange((5,))
    check(lax.dynamic_slice(x, [np.int32(-2)], [2]), x[3:])
    check(lax.dynamic_slice(x, [np.int32(-2)], [2], allow_negative_indices=False), x[:2])


# --- errors ---------------------------------------------------------------------------

@pytest.mark.parametrize("call, error, message", [
    (lambda x: lax.broadcast_in_dim(x, (3, 5), (0, 1)), EmberValueError, r"\(2, 3\).*\(3, 5\)"),
    (lambda x: lax.broadcast_in_dim(x, (3, 2), (1, 0)), EmberValueError, "strictly increasing"),
    (lambda x: lax.reshape(x, (4, 2)), EmberValueError, r"\(2, 3\).*\(4, 2\)"),
    (lambda x: lax.transpose(x, (0, 0)), EmberValueError, "not a permutation"),
    (lambda x: lax.squeeze(x, (0,)), EmberValueError, "axis 0 of shape \\(2, 3\\)"),
    (lambda x: lax.squeeze(x, (2,)), EmberIndexError, "axis 2 is out of bounds"),
    (lambda x: lax.rev(x, (0, 0)), EmberValueError, "repeated axis"),
    (lambda x: lax.pad(x, np.int32(0), [(0, 0, 0)] * 2), EmberTypeError, "int32 differs"),
    (lambda x: lax.pad(x, np.float32(0), [(0, 0, -1)] * 2), EmberValueError, "interior"),
    (lambda x: lax.pad(x, np.float32(0), [(-3, 0, 0)] * 2), EmberValueError, "axis 0"),
    (lambda x: lax.pad(x, np.float32(0), [(0, 0, 0)]), EmberValueError, "one \\(lo, hi"),
    (lambda x: lax.concatenate([x, x.T], 0), EmberValueError, r"\(2, 3\) and \(3, 2\)"),
    (lambda x: lax.concatenate([x, x.astype(np.int32)], 0), EmberTypeError, "int32"),
    (lambda x: lax.concatenate([x], 2), EmberIndexError, "axis 2"),
    (lambda x: lax.slice(x, (0, 0), (3, 1)), EmberIndexError, r"\[0:3:1\] on axis 0"),
    (lambda x: lax.slice(x, (0,), (1,)), EmberValueError, "needs 2 start"),
    (lambda x: lax.dynamic_slice(x, (0,), (1, 1)), EmberValueError, "needs 2 start"),
    (lambda x: lax.dynamic_slice(x, (0, 0), (3, 1)), EmberValueError, "slice_sizes"),
    (lambda x: lax.dynamic_slice(x, (0.5, 0), (1, 1)), EmberTypeError, "integer scalars"),
    (lambda x: lax.dynamic_update_slice(x, x.T, (0, 0)), EmberValueError, "does not fit"),
    (lambda x: lax.dynamic_update_slice(x, x.astype(np.int32), (0, 0)), EmberTypeError,
     "int32"),
    (lambda x: lax.index_in_dim(x, 2), EmberIndexError, "index 2 .* size 2"),
    (lambda x: lax.broadcasted_iota(np.bool_, (2,), 0), EmberTypeError, "bool"),
])
def test_errors_name_shapes_and_axes(call, error, message):
    with pytest.raises(error, match=message):
        call(arange((2, 3)))


def test_error_under_jit_names_the_user_line():
    with pytest.raises(EmberValueError, match=r"test_structural.py"):
        ember.jit(lambda x: lax.reshape(x, (7,)))(arange((2, 3)))


# --- jit against eager ----------------------------------------------------------------

JIT_CASES = {
    "broadcast_in_dim": lambda x, i: lax.broadcast_in_dim(x, (2, 2, 3), (1, 2)),
    "reshape": lambda x, i: lax.reshape(x, (3, 2), dimensions=(1, 0)),
    "transpose": lambda x, i: lax.transpose(x, (1, 0)),
    "squeeze_expand": lambda x, i: lax.squeeze(lax.expand_dims(x, (1,)), (1,)),
    "rev": lambda x, i: lax.rev(x, (1,)),
    "pad": lambda x, i: lax.pad(x, np.float32(9), [(1, -1, 1), (-1, 2, 0)]),
    "concatenate": lambda x, i: lax.concatenate([x, x, x], 1),
    "iota": lambda x, i: lax.broadcasted_iota(np.float32, (2, 3), 1),
    "slice": lambda x, i: lax.slice(x, (0, 1), (2, 3), (2, 1)),
    "dynamic_slice": lambda x, i: lax.dynamic_slice(x, (i, lax.sub(i, 2)), (1, 2)),
    "dynamic_update_slice": lambda x, i: lax.dynamic_update_slice(
        x, np.ones((1, 2), np.float32), (i, lax.neg(i))),
}


@pytest.mark.parametrize("name", sorted(JIT_CASES))
def test_jit_matches_eager(name):
    fn = JIT_CASES[name]
    x = arange((2, 3))
    with ember.config.override(backend="reference"):
        for i in (0, 1, 5):
            check(ember.jit(fn)(x, np.int32(i)), np.asarray(fn(x, np.int32(i))))


# --- transformation rules -------------------------------------------------------------

RNG = np.random.default_rng(0)
X34 = RNG.standard_normal((3, 4))

GRAD_CASES = {
    "broadcast_in_dim": lambda x: lax.broadcast_in_dim(lax.slice(x, (0, 0), (1, 4)),
                                                       (2, 3, 4), (1, 2)),
    "reshape": lambda x: lax.reshape(x, (2, 6), dimensions=(1, 0)),
    "transpose": lambda x: lax.transpose(x, (1, 0)),
    "squeeze_expand_dims": lambda x: lax.squeeze(lax.expand_dims(x, (0, 2)), (0,)),
    "rev": lambda x: lax.rev(x, (0, 1)),
    "pad": lambda x: lax.pad(x, lax.reshape(lax.slice(x, (0, 0), (1, 1)), ()),
                             [(1, -1, 1), (-2, 2, 2)]),
    "concatenate": lambda x: lax.concatenate([x, lax.neg(x), lax.rev(x, (1,))], 1),
    "slice": lambda x: lax.slice(x, (0, 1), (3, 4), (2, 2)),
    "dynamic_slice": lambda x: lax.dynamic_slice(x, (np.int32(2), np.int32(-1)), (2, 2)),
    "dynamic_update_slice": lambda x: lax.dynamic_update_slice(
        x, lax.slice(x, (0, 0), (2, 2)), (np.int32(5), np.int32(1))),
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_gradients_match_finite_differences(name, x64):
    check_grads(GRAD_CASES[name], (X34,), order=2)


X234 = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
STARTS = np.array([0, -1, 3], np.int32)
VMAP_CASES = {
    "broadcast_in_dim": (lambda x: lax.broadcast_in_dim(x, (2, 5, 4), (0, 2)), (X234,), 1),
    "reshape": (lambda x: lax.reshape(x, (4, 2), dimensions=(1, 0)), (X234,), 1),
    "transpose": (lambda x: lax.transpose(x, (1, 0)), (X234,), 2),
    "squeeze": (lambda x: lax.squeeze(x, (0,)), (X234[:1],), 2),
    "expand_dims": (lambda x: lax.expand_dims(x, (0, 2)), (X234,), 1),
    "rev": (lambda x: lax.rev(x, (1,)), (X234,), 1),
    "pad": (lambda x, v: lax.pad(x, v, [(1, -1, 1), (0, 1, 2)]), (X234, np.float32(-1)),
            (1, None)),
    "pad_batched_value": (lambda x, v: lax.pad(x, v, [(1, -1, 1), (-1, 1, 1)]),
                          (X234, np.arange(3, dtype=np.float32)), (1, 0)),
    "pad_only_value": (lambda x, v: lax.pad(x, v, [(1, 0, 1), (0, 2, 0)]),
                       (X234[:, 0], np.arange(3, dtype=np.float32)), (None, 0)),
    "concatenate": (lambda x, y: lax.concatenate([x, y, x], 1), (X234, X234[0, :2]),
                    (1, None)),
    "slice": (lambda x: lax.slice(x, (0, 1), (2, 4), (1, 2)), (X234,), 1),
    "dynamic_slice_operand": (lambda x, i: lax.dynamic_slice(x, (i, 1), (1, 2)),
                              (X234, np.int32(1)), (1, None)),
    "dynamic_slice_index": (lambda x, i: lax.dynamic_slice(x, (i, 1), (1, 2)),
                            (X234[:, 0], STARTS), (None, 0)),
    "dynamic_slice_both": (lambda x, i: lax.dynamic_slice(x, (i, i), (1, 2)),
                           (X234, STARTS), (1, 0)),
    "dynamic_update_slice_operand": (
        lambda x, u: lax.dynamic_update_slice(x, u, (np.int32(1), np.int32(-2))),
        (X234, -np.ones((1, 2), np.float32)), (1, None)),
    "dynamic_update_slice_update_index": (
        lambda x, u, i: lax.dynamic_update_slice(x, u, (i, 1)),
        (X234[:, 0], -np.ones((1, 3, 2), np.float32), STARTS), (None, 1, 0)),
    "dynamic_update_slice_all": (
        lambda x, u, i: lax.dynamic_update_slice(x, u, (1, i)),
        (X234, -np.ones((3, 1, 2), np.float32), STARTS), (1, 0, 0)),
}


@pytest.mark.parametrize("name", sorted(VMAP_CASES))
def test_vmap_matches_loop(name):
    fn, args, in_axes = VMAP_CASES[name]
    check_vmap(fn, args, in_axes)
