"""Index-set splitting (codegen/split_loops.py): an innermost loop that tests its own
variable against constant bounds (a concatenate's pieces, a pad's borders) becomes one
loop per range where the tests are constant, each reading only what it selects; the
results equal the reference backend's."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.codegen.kernel_ir import IndexCond, Let, Load, Loop, Op
from ember.codegen.split_loops import MAX_PIECES

from tests.codegen.test_loop_order import innermost, kernels_of

rng = np.random.default_rng(0)


def innermost_loops(kernel) -> list[Loop]:
    return [s for s in kernel.walk()
            if isinstance(s, Loop) and not any(isinstance(b, Loop) for b in s.body)]


def guarded(kernel) -> list:
    """Reads under a guard, index tests and selections its innermost loops still compute."""
    return [s.node for loop in innermost_loops(kernel) for s in loop.body
            if isinstance(s, Let) and (
                isinstance(s.node, IndexCond)
                or (isinstance(s.node, Load) and s.node.guard is not None)
                or (isinstance(s.node, Op) and s.node.op == "select_n"))]


def check(fun, *args) -> None:
    """Equal to the reference backend (to rounding where the kernel computes a function)."""
    expected = np.asarray(ember.jit(fun, backend="reference")(*args))
    np.testing.assert_allclose(np.asarray(ember.jit(fun)(*args)), expected, rtol=1e-6, atol=1e-7)


def test_a_concatenate_along_the_last_axis_copies_each_piece_in_its_own_loop():
    a, b, c = (rng.standard_normal((16, n)).astype(np.float32) for n in (24, 8, 40))
    fun = lambda a, b, c: jnp.concatenate([a, b, c], axis=1)
    (kernel,) = kernels_of(fun, a, b, c)
    assert [loop.sym.extent for loop in innermost_loops(kernel)] == [24, 8, 40]
    assert guarded(kernel) == []
    check(fun, a, b, c)


def test_a_fused_consumer_of_a_concatenate_runs_in_every_piece():
    a = rng.standard_normal((8, 20)).astype(np.float32)
    b = rng.standard_normal((8, 12)).astype(np.float32)
    fun = lambda a, b: jnp.tanh(jnp.concatenate([a * 2.0, jnp.exp(b)], axis=1)) + 1.0
    (kernel,) = [k for k in kernels_of(fun, a, b) if "tanh" in k.ops]
    assert [loop.sym.extent for loop in innermost_loops(kernel)] == [20, 12]
    assert guarded(kernel) == []
    assert all(any(isinstance(s, Let) and isinstance(s.node, Op) and s.node.op == "tanh"
                   for s in loop.body) for loop in innermost_loops(kernel))
    check(fun, a, b)


def test_a_pad_splits_its_borders_off_and_keeps_the_padding_value():
    x = rng.standard_normal((4, 3, 10)).astype(np.float32)
    fun = lambda x: lax.pad(x, np.float32(-7.0), [(0, 0, 0), (1, 1, 0), (2, 3, 0)])
    (kernel,) = kernels_of(fun, x)
    assert [loop.sym.extent for loop in innermost_loops(kernel)] == [2, 10, 3]
    check(fun, x)


def test_an_interior_pad_keeps_its_stepped_test_inside_the_pieces():
    x = rng.standard_normal((5, 7)).astype(np.float32)
    check(lambda x: lax.pad(x, np.float32(0.5), [(1, 0, 1), (2, 1, 2)]), x)


def test_a_reduction_over_a_concatenated_axis_adds_every_piece():
    a = rng.standard_normal((6, 33)).astype(np.float32)
    b = rng.standard_normal((6, 31)).astype(np.float32)
    fun = lambda a, b: jnp.max(jnp.concatenate([a, -b], axis=1), axis=1) + \
        jnp.sum(jnp.concatenate([a, b], axis=1), axis=1)
    check(fun, a, b)


def test_a_row_wise_kernel_over_a_concatenate_splits_its_loops_and_keeps_its_scratch():
    a = rng.standard_normal((6, 40)).astype(np.float32)
    b = rng.standard_normal((6, 24)).astype(np.float32)

    def fun(a, b):
        joined = jnp.concatenate([a, 2.0 * b], axis=1)
        return ember.nn.softmax(joined, axis=1) * joined

    (kernel,) = [k for k in kernels_of(fun, a, b) if "exp" in k.ops]
    assert [loop.sym.extent for loop in innermost_loops(kernel)] == [40, 24] * 3
    assert guarded(kernel) == []
    check(fun, a, b)


def test_too_many_pieces_stay_one_loop_with_selections():
    pieces = [rng.standard_normal((4, 3)).astype(np.float32) for _ in range(MAX_PIECES + 1)]
    fun = lambda *xs: jnp.concatenate(xs, axis=1)
    (kernel,) = kernels_of(fun, *pieces)
    assert innermost(kernel).sym.extent == 3 * len(pieces)
    assert guarded(kernel)
    check(fun, *pieces)


@pytest.mark.parametrize("dtype", [np.int32, np.float64, np.bool_])
def test_other_dtypes_concatenate_alike(dtype):
    a = (rng.standard_normal((5, 9)) > 0).astype(dtype)
    b = (rng.standard_normal((5, 4)) * 3).astype(dtype)
    check(lambda a, b: jnp.concatenate([b, a, b], axis=-1), a, b)
