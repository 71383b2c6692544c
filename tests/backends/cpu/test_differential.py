"""Views, reductions, contractions and host calls jitted on 'cpu' vs the reference
backend: broadcasting, transposed and strided views, size-0 and size-1 axes, NaN/inf."""
from __future__ import annotations

import numpy as np
import pytest
from cpu_testing import assert_matches_reference, compiled, requires_cpu

from ember import lax
from ember.core import dtypes

pytestmark = requires_cpu

rng = np.random.default_rng(0)


def randn(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def with_specials(x: np.ndarray) -> np.ndarray:
    flat = x.reshape(-1).copy()
    for i, value in enumerate([np.nan, np.inf, -np.inf, 0.0][:flat.size]):
        flat[(i * 7) % flat.size] = value
    return flat.reshape(x.shape)


def test_views_fold_into_indices():
    x = randn(4, 6, 5)

    def fun(x):
        t = lax.transpose(x, (2, 0, 1))  # (5, 4, 6)
        s = lax.slice(t, (1, 0, 1), (5, 4, 6), (2, 1, 2))  # (2, 4, 3)
        r = lax.rev(s, (0, 2))
        m = lax.reshape(r, (2, 12))
        b = lax.broadcast_in_dim(lax.reduce_sum(m, (1,)), (3, 2, 12), (1,))
        return lax.squeeze(lax.reshape(m, (1, 2, 12)), (0,)) * 2.0 + b, lax.reshape(x, (20, 6))

    assert_matches_reference(fun, x)


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (1, 1), (1, 5), (5, 1), ()])
def test_degenerate_shapes(shape):
    x = randn(*shape)

    def fun(x):
        axes = tuple(range(x.ndim))
        y = lax.exp(x) * 3.0 + x
        return y, lax.reduce_sum(y, axes), lax.reduce_max(x, axes[-1:]), lax.transpose(x, axes[::-1])

    assert_matches_reference(fun, x)


@pytest.mark.parametrize("name", ["reduce_sum", "reduce_prod", "reduce_max", "reduce_min"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "uint8"])
def test_reductions_over_axis_sets(name, dtype):
    dtype = dtypes.to_dtype(dtype)
    x = randn(3, 4, 5) * 3
    x = with_specials(x).astype(dtype) if dtypes.is_floating(dtype) else x.astype(dtype)
    if name == "reduce_prod" and dtypes.is_floating(dtype):
        x = (np.asarray(x, np.float32) * 0.3 + 1).astype(dtype)
    reduce = getattr(lax, name)

    def fun(x):
        return [reduce(x, axes) for axes in [(0,), (1,), (2,), (0, 2), (1, 2), (0, 1, 2)]]

    tolerance = (2e-2, 1e-2) if dtype == np.float16 else (1e-4, 1e-5)
    assert_matches_reference(fun, x, tolerance=tolerance)


@pytest.mark.parametrize("dtype", ["bool", "int16"])
def test_bitwise_reductions(dtype):
    x = rng.integers(0, 4, (5, 6)).astype(dtype)

    def fun(x):
        return [lax.reduce_and(x, (1,)), lax.reduce_or(x, (0,)), lax.reduce_xor(x, (0, 1)),
                lax.reduce_max(x, (1,))]

    assert_matches_reference(fun, x)


def test_argmax_and_argmin_pick_the_first_and_nan_wins():
    x = np.array([[1, 3, 3, 0], [np.nan, 2, np.nan, 9], [-np.inf, -np.inf, -np.inf, -np.inf],
                  [5, 5, 5, 5]], np.float32)
    ints = np.array([[4, 1, 4, 1], [0, 0, 0, 0]], np.int32)

    def fun(x, ints):
        return [lax.argmax(x, 1, np.int32), lax.argmin(x, 1, np.int32),
                lax.argmax(x, 0, np.int32), lax.argmin(ints, 1, np.int32),
                lax.argmax(ints, 0, np.int32)]

    assert_matches_reference(fun, x, ints)


def test_empty_reductions_give_the_identity():
    x = np.zeros((3, 0), np.float32)

    def fun(x):
        return [lax.reduce_sum(x, (1,)), lax.reduce_max(x, (1,)), lax.reduce_min(x, (1,)),
                lax.reduce_prod(x, (1,))]

    assert_matches_reference(fun, x)


def test_row_reductions_inside_elementwise_kernels():
    x = with_specials(randn(6, 33))

    def fun(x):
        m = lax.reduce_max(x, (1,))
        e = lax.exp(x - lax.broadcast_in_dim(m, x.shape, (0,)))
        s = lax.reduce_sum(e, (1,))
        mean = lax.reduce_sum(x, (1,)) / 33.0
        return e / lax.broadcast_in_dim(s, x.shape, (0,)), m, mean

    assert_matches_reference(fun, x)


def _dot(dims):
    return lambda a, b: lax.dot_general(a, b, dims)


@pytest.mark.parametrize("case", [
    ((64, 48), (48, 40), (((1,), (0,)), ((), ()))),  # BLAS
    ((48, 64), (48, 40), (((0,), (0,)), ((), ()))),  # transposed lhs
    ((64, 48), (40, 48), (((1,), (1,)), ((), ()))),  # transposed rhs
    ((3, 20, 30), (3, 30, 25), (((2,), (1,)), ((0,), (0,)))),  # batched
    ((20, 3, 30), (30, 25, 3), (((2,), (0,)), ((1,), (2,)))),  # strided batch
    ((4, 5, 6), (6, 5, 7), (((1, 2), (1, 0)), ((), ()))),  # two contracting axes
    ((3, 5), (5, 2), (((1,), (0,)), ((), ()))),  # small: generated loops
    ((0, 5), (5, 4), (((1,), (0,)), ((), ()))),
    ((30, 0), (0, 40), (((1,), (0,)), ((), ()))),
])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_dot_general(case, dtype):
    lhs_shape, rhs_shape, dims = case
    lhs, rhs = (randn(*lhs_shape) * 4).astype(dtype), (randn(*rhs_shape) * 4).astype(dtype)
    assert_matches_reference(_dot(dims), lhs, rhs, tolerance=(1e-4, 1e-4))


def test_dot_of_transposed_views_needs_no_copy():
    a, b = randn(64, 48), randn(40, 64)

    def fun(a, b):
        return lax.dot_general(lax.transpose(a, (1, 0)), lax.transpose(b, (1, 0)),
                               (((1,), (0,)), ((), ())))

    assert_matches_reference(fun, a, b, tolerance=(1e-4, 1e-4))
    kinds = [k.kind for k in compiled(fun, a, b).kernels]
    assert kinds == ["library"]


def test_half_precision_contraction_accumulates_in_float32():
    a, b = randn(16, 300).astype(np.float16), randn(300, 8).astype(np.float16)
    assert_matches_reference(_dot((((1,), (0,)), ((), ()))), a, b, tolerance=(2e-2, 2e-2))


def test_primitives_without_a_native_lowering_run_on_the_host():
    x = randn(5, 7)

    def fun(x):
        y = lax.exp(x) + 1.0
        s = lax.cumlogsumexp(y, 1)  # (on the host)
        return lax.tanh(s) * 2.0, lax.cumsum(x, 1)

    assert_matches_reference(fun, x)
    kinds = [k.kind for k in compiled(fun, x).kernels]
    assert "host" in kinds and "kernel" in kinds


def test_iota_and_integer_index_math():
    def fun(x):
        i = lax.broadcasted_iota(np.int32, (4, 6), 1)
        j = lax.broadcasted_iota(np.float32, (4, 6), 0)
        return x * j + lax.convert_element_type(i * 3 % 4, np.float32)

    assert_matches_reference(fun, randn(4, 6))


@pytest.mark.parametrize("config", [((1, 2, 0), (0, 0, 0)), ((-1, 3, 1), (2, -2, 2)),
                                    ((0, 0, 3), (-3, 1, 0))])
def test_pad_reads_its_operand_through_a_guarded_index(config):
    x = randn(4, 6)

    def fun(x):
        return lax.pad(lax.exp(x), np.float32(-1.5), config) * 2.0

    assert_matches_reference(fun, x)
    assert [k.kind for k in compiled(fun, x).kernels] == ["kernel", "kernel"]


def test_concatenate_selects_its_operands_by_position():
    a, b, c = randn(3, 2), randn(3, 0), randn(3, 5)

    def fun(a, b, c):
        return lax.concatenate([a * 2.0, b, c], 1) + 1.0, lax.concatenate([c, c], 0)

    assert_matches_reference(fun, a, b, c)


def test_sums_and_transposes_of_products_become_one_gemm():
    a, b = randn(4, 32, 48), randn(4, 32, 40)

    def weight_gradient(a, b):
        per_item = lax.dot_general(a, b, (((1,), (1,)), ((0,), (0,))))  # (4, 48, 40)
        return lax.transpose(lax.reduce_sum(per_item, (0,)), (1, 0))

    assert_matches_reference(weight_gradient, a, b, tolerance=(1e-4, 1e-4))
    kernels = compiled(weight_gradient, a, b).kernels
    assert [k.kind for k in kernels] == ["library"] and kernels[0].ops == ["dot_general"]


def test_control_flow_bodies_run_compiled():
    x = randn(5, 4)

    def fun(x):
        def body(carry, row):
            carry = lax.tanh(carry * 1.5 + row)
            return carry, lax.reduce_sum(carry, (0,))

        final, sums = lax.scan(body, x[0] * 0.0, x)
        looped = lax.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, lax.exp(c[1]) * 0.5),
                                (0, final))
        chosen = lax.cond(sums[0] > 0, lambda v: v * 2.0, lambda v: v - 1.0, sums)
        return final, sums, looped[1], chosen

    assert_matches_reference(fun, x)
