"""Reductions down the columns of a row-major array (``x.sum(axis=0)``: bias gradients,
layernorm's parameter gradients) run in the column form: running values of a block of
columns in scratch rows, the input streamed row after row (``lower._column_split``).
Each case is checked against the reference backend and for the form its kernel took."""
import numpy as np
import pytest

import ember
import ember.numpy as jnp
from tests.backends.cpu.cpu_testing import assert_matches_reference, compiled, requires_cpu

pytestmark = requires_cpu
# float32 sums of a few hundred normal numbers: the reference (NumPy) adds pairwise,
# generated code row after row
SUMS = (1e-4, 1e-4)


def _column_form(fun, *args) -> bool:
    kernels = [k for k in compiled(fun, *args).kernels if k.kind == "kernel"]
    assert len(kernels) == 1, [k.name for k in kernels]
    return "for (int64_t ob = 0" in kernels[0].source


def _data(shape, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-50, 50, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("reduce", [jnp.sum, jnp.prod, jnp.max, jnp.min],
                         ids=["sum", "prod", "max", "min"])
@pytest.mark.parametrize("shape", [(300, 512), (7, 96), (40, 13), (33, 1000)])
def test_column_reductions_match_the_reference(reduce, shape):
    x = _data(shape)
    if reduce is jnp.prod:  # keep the products finite
        x = (1 + 0.01 * x).astype(np.float32)
    fun = lambda x: reduce(x, axis=0)
    assert _column_form(fun, x)
    assert_matches_reference(fun, x, tolerance=SUMS if reduce is jnp.sum else None)


@pytest.mark.parametrize("dtype", [np.float16, np.int32, np.float64])
def test_column_sums_of_other_dtypes(dtype):
    x = _data((257, 64), dtype)
    fun = lambda x: jnp.sum(x, axis=0)
    assert _column_form(fun, x)
    assert_matches_reference(fun, x)


def test_nan_propagates_through_a_column_max():
    x = _data((100, 64))
    x[37, 5] = np.nan
    x[0, 9] = np.nan
    fun = lambda x: (jnp.max(x, axis=0), jnp.min(x, axis=0))
    assert _column_form(fun, x)
    assert_matches_reference(fun, x)


def test_fused_prologue_epilogue_and_two_reductions_share_one_pass():
    """Layernorm's parameter gradients: two column sums of one row-scaled product,
    with an elementwise epilogue, in one kernel."""
    dy, xhat, scale = _data((512, 256)), _data((512, 256), seed=1), _data((512, 1), seed=2)
    fun = lambda dy, xhat, s: (jnp.sum(dy * xhat * s, axis=0) * 0.5, jnp.sum(dy, axis=0))
    assert _column_form(fun, dy, xhat, scale)
    assert_matches_reference(fun, dy, xhat, scale, tolerance=SUMS)


def test_leading_axes_of_a_3d_array():
    x = _data((6, 50, 32))
    fun = lambda x: jnp.sum(x, axis=0)
    assert _column_form(fun, x)
    assert_matches_reference(fun, x, tolerance=SUMS)


@pytest.mark.parametrize("fun, shape", [
    (lambda x: jnp.sum(x, axis=1), (64, 48)),
    (lambda x: jnp.sum(x, axis=(0, 2)), (64, 48, 4)),
    (lambda x: jnp.argmax(x, axis=0), (64, 48)),
], ids=["rows", "outer-and-inner", "argmax"])
def test_other_reductions_keep_the_plain_form(fun, shape):
    x = _data(shape)
    assert not _column_form(fun, x)
    assert_matches_reference(fun, x, tolerance=SUMS)


def test_too_few_columns_keep_the_plain_form():
    x = _data((1000, 4))
    fun = lambda x: jnp.sum(x, axis=0)
    assert not _column_form(fun, x)
    assert_matches_reference(fun, x, tolerance=SUMS)


def test_gradient_of_a_bias_is_a_column_sum():
    x, w, b = _data((256, 64)), _data((64, 32), seed=1), _data((32,), seed=2)
    loss = lambda b: jnp.sum(jnp.tanh(x @ w + b) ** 2)
    assert _column_form(ember.grad(loss), b)
    assert_matches_reference(ember.grad(loss), b, tolerance=SUMS)
