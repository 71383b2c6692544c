"""A GEMM whose product is only copied into another layout (the heads of attention
transposed back into rows, a gradient transposed into its operand's layout) writes the
product there directly: the BLAS call gets the consumer's leading dimension and batch
strides (swapping its operands when the copy transposes the matrices), and the copy
kernel is never made. Checked against the reference backend and by kernel counts."""
import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.codegen.gemm import _reshaped_strides
from tests.backends.cpu.cpu_testing import assert_matches_reference, compiled, requires_cpu

pytestmark = requires_cpu

B, H, S, D = 2, 4, 64, 32
RNG = np.random.default_rng(0)
PROBS = RNG.standard_normal((B, H, S, S)).astype(np.float32)
VALUES = RNG.standard_normal((B, H, S, D)).astype(np.float32)
TOLERANCE = (1e-4, 1e-4)


def _kinds(fun, *args):
    return sorted(k.kind for k in compiled(fun, *args).kernels)


def _rows(t):
    """(B, H, S, D) heads back into (B, S, H * D) rows."""
    return jnp.transpose(t, (0, 2, 1, 3)).reshape(B, S, H * D)


CASES = {
    # row-major product, leading dimension H * D, batch strides (S * H * D, D)
    "heads into rows": lambda p, v: _rows(p @ v),
    # the copy transposes each matrix too: the call computes C^T = B^T A^T
    "transposed matrices": lambda p, v: jnp.transpose(
        jnp.swapaxes(v, -1, -2) @ p, (0, 3, 1, 2)).reshape(B, S, H * D),
    "transposed operand": lambda p, v: _rows(jnp.swapaxes(p, -1, -2) @ v),
    "one batch axis": lambda p, v: jnp.transpose(
        p.reshape(B * H, S, S) @ v.reshape(B * H, S, D), (1, 0, 2)),
}


@pytest.mark.parametrize("name", CASES)
def test_the_product_is_written_where_the_copy_would_put_it(name):
    fun = CASES[name]
    assert _kinds(fun, PROBS, VALUES) == ["library"]
    assert_matches_reference(fun, PROBS, VALUES, tolerance=TOLERANCE)


def test_the_next_product_reads_the_rows_in_place():
    weights = RNG.standard_normal((H * D, 48)).astype(np.float32)
    fun = lambda p, v, w: _rows(p @ v) @ w  # noqa: E731
    assert _kinds(fun, PROBS, VALUES, weights) == ["library", "library"]
    assert_matches_reference(fun, PROBS, VALUES, weights, tolerance=TOLERANCE)


@pytest.mark.parametrize("fun", [
    lambda p, v: _rows(p @ v) + 1.0,  # the consumer computes: a kernel reads the product
    lambda p, v: (_rows(p @ v), p @ v),  # the product itself is needed too
    lambda p, v: jnp.transpose(p @ v, (0, 2, 1, 3))[:, ::2],  # only part of it is kept
], ids=["computed", "also-returned", "partial"])
def test_other_consumers_read_the_product_from_its_buffer(fun):
    assert "kernel" in _kinds(fun, PROBS, VALUES)
    assert_matches_reference(fun, PROBS, VALUES, tolerance=TOLERANCE)


def test_attention_gradients():
    """The backward pass of attention: dq, dk, dv come out of their GEMMs transposed into
    the layout of the projection that produced q, k, v."""
    x = RNG.standard_normal((B, S, H * D)).astype(np.float32)
    w = (RNG.standard_normal((H * D, 3 * H * D)) / np.sqrt(H * D)).astype(np.float32)

    def loss(w, x):
        q, k, v = (jnp.transpose(t.reshape(B, S, H, D), (0, 2, 1, 3))
                   for t in jnp.split(x @ w, 3, axis=-1))
        probs = ember.nn.softmax(q @ jnp.swapaxes(k, -1, -2) / np.sqrt(D), axis=-1)
        return jnp.sum(_rows(probs @ v) ** 2)

    grad = ember.grad(loss)
    kernels = compiled(grad, w, x).kernels
    copies = [k.name for k in kernels if k.kind == "kernel" and not k.ops]
    assert not copies, copies
    assert_matches_reference(grad, w, x, tolerance=(1e-3, 1e-3))


@pytest.mark.parametrize("shape, axes, new_shape", [
    ((4, 6, 5), (0, 1, 2), (24, 5)),
    ((4, 6, 5), (1, 0, 2), (6, 20)),  # not a view of the transposed array
    ((4, 6, 5), (1, 0, 2), (6, 4, 5, 1)),
    ((2, 3, 4, 5), (0, 2, 1, 3), (2, 4, 15)),
    ((2, 3, 4, 5), (0, 2, 1, 3), (8, 15)),
    ((1, 6, 1, 4), (2, 3, 1, 0), (2, 2, 6)),
    ((3, 1, 8), (2, 0, 1), (2, 4, 3)),
])
def test_reshaped_strides_are_numpy_views(shape, axes, new_shape):
    """Strides for a reshape without a copy, as NumPy finds them (None: NumPy copies)."""
    base = np.arange(np.prod(shape)).reshape(shape).transpose(axes)
    item = base.itemsize
    found = _reshaped_strides(base.shape, [s // item for s in base.strides], new_shape)
    reshaped = base.reshape(new_shape)
    if np.shares_memory(reshaped, base):
        assert found is not None
        np.testing.assert_array_equal(
            np.lib.stride_tricks.as_strided(base, new_shape, [s * item for s in found]),
            reshaped)
    else:
        assert found is None
