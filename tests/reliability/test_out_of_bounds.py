"""Out-of-bounds indices follow the documented rule on every backend, eagerly and under
jit with the indices known only at run time (see ember/ops/indexing.py):

- gather: ``fill`` (the default) yields ``fill_value`` for every window that does not fit
  (NaN, the most negative integer or True by default), ``clip`` and
  ``promise_in_bounds`` clamp the start so the window fits;
- scatter: ``fill`` / ``drop`` (the default) drop updates whose window does not fit,
  ``clip`` clamps them;
- dynamic_slice / dynamic_update_slice: a negative start counts from the end, then the
  start is clamped so the window fits.

Indices include the int32 extremes, where a careless ``index + size`` overflows."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import lax

INT_MIN, INT_MAX = np.iinfo(np.int32).min, np.iinfo(np.int32).max
STARTS = np.array([0, 3, 4, -1, 2, INT_MAX, INT_MIN, 7], np.int32)
ROWS = np.arange(12, dtype=np.float32).reshape(4, 3) + 1


def eager_and_jit(fn, *args):
    return [np.asarray(fn(*args)), np.asarray(ember.jit(fn)(*args))]


def gather_rows(operand, starts, window, **kwargs):
    numbers = lax.GatherDimensionNumbers(
        offset_dims=(1, 2) if window > 1 else (1,),
        collapsed_slice_dims=() if window > 1 else (0,), start_index_map=(0,))
    return lax.gather(operand, starts[:, None], numbers, slice_sizes=(window, 3), **kwargs)


def expected_rows(operand, window, mode, fill):
    out = []
    for start in STARTS.astype(np.int64):
        fits = 0 <= start <= len(operand) - window
        if mode == "fill" and not fits:
            out.append(np.full((window, 3), fill, operand.dtype))
        else:
            start = min(max(start, 0), len(operand) - window)
            out.append(operand[start:start + window])
    out = np.stack(out)
    return out if window > 1 else out[:, 0]


@pytest.mark.parametrize("window", [1, 2])
@pytest.mark.parametrize("mode", ["fill", "clip", "promise_in_bounds"])
def test_gather(backend, mode, window):
    expected = expected_rows(ROWS, window, mode, np.nan)
    for got in eager_and_jit(lambda x, s: gather_rows(x, s, window, mode=mode), ROWS, STARTS):
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype, fill", [(np.int32, INT_MIN), (np.bool_, True)])
def test_gather_default_fill_by_dtype(backend, dtype, fill):
    operand = (ROWS % 2).astype(dtype)
    expected = expected_rows(operand, 1, "fill", fill)
    for got in eager_and_jit(lambda x, s: gather_rows(x, s, 1), operand, STARTS):
        np.testing.assert_array_equal(got, expected)


def test_gather_explicit_fill_value(backend):
    expected = expected_rows(ROWS, 2, "fill", -5.0)
    for got in eager_and_jit(lambda x, s: gather_rows(x, s, 2, fill_value=-5.0), ROWS, STARTS):
        np.testing.assert_array_equal(got, expected)


SCATTER_NUMBERS = lax.ScatterDimensionNumbers(
    update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))


@pytest.mark.parametrize("mode", ["fill", "drop", "clip", "promise_in_bounds"])
@pytest.mark.parametrize("op", ["scatter_add", "scatter_max", "scatter"])
def test_scatter(backend, op, mode):
    updates = np.arange(len(STARTS) * 3, dtype=np.float32).reshape(-1, 3) + 100
    if op == "scatter":  # the overwriting scatter keeps any one of repeated updates
        starts, updates = STARTS[2:4], updates[2:4]
    else:
        starts = STARTS
    expected = np.zeros((4, 3), np.float32)
    for start, update in zip(starts.astype(np.int64), updates):
        if not 0 <= start < 4:
            if mode in ("fill", "drop", "promise_in_bounds"):
                continue
            start = min(max(start, 0), 3)
        combine = {"scatter_add": np.add, "scatter_max": np.maximum,
                   "scatter": lambda old, new: new}[op]
        expected[start] = combine(expected[start], update)

    def run(x, s, u):
        return getattr(lax, op)(x, s[:, None], u, SCATTER_NUMBERS, mode=mode)

    for got in eager_and_jit(run, np.zeros((4, 3), np.float32), starts, updates):
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("negative_from_end", [True, False])
def test_dynamic_slice_and_update_clamp(backend, negative_from_end):
    x = np.arange(10, dtype=np.float32)
    for start in STARTS.tolist() + [12, -20, -3]:
        first = start + 10 if start < 0 and negative_from_end else start
        first = min(max(first, 0), 7)

        def window(v, s):
            return lax.dynamic_slice(v, (s,), (3,), allow_negative_indices=negative_from_end)

        def update(v, s):
            return lax.dynamic_update_slice(v, -np.ones(3, np.float32), (s,),
                                            allow_negative_indices=negative_from_end)

        updated = x.copy()
        updated[first:first + 3] = -1
        for got in eager_and_jit(window, x, np.int32(start)):
            np.testing.assert_array_equal(got, x[first:first + 3], err_msg=f"start {start}")
        for got in eager_and_jit(update, x, np.int32(start)):
            np.testing.assert_array_equal(got, updated, err_msg=f"start {start}")
