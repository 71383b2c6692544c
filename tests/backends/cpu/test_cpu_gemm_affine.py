"""A GEMM epilogue ``alpha * product + beta * addend`` (an SGD update, a residual) is
folded into the BLAS call: C starts as the addend, each thread copying its block just
before its call, and the call computes ``alpha * A @ B + beta * C``; no epilogue kernel.
Checked against the reference backend and on the generated code."""
import numpy as np
import pytest

import ember
import ember.numpy as jnp
from tests.backends.cpu.cpu_testing import assert_matches_reference, compiled, requires_cpu

pytestmark = requires_cpu

RNG = np.random.default_rng(0)
X = RNG.standard_normal((96, 64)).astype(np.float32)
G = RNG.standard_normal((96, 80)).astype(np.float32)
W = RNG.standard_normal((64, 80)).astype(np.float32)
# (atol: a few float32 ulps of the largest terms, 6 * x.T @ g reaches about 250, where an
# ulp is 1.5e-5: a sum in another order, e.g. another BLAS's, differs by that much)
TOLERANCE = (1e-5, 1e-4)


def _gemm_source(fun, *args) -> str:
    (step,) = [k for k in compiled(fun, *args).kernels if k.kind == "library"]
    return step.source


B = RNG.standard_normal(80).astype(np.float32)

FOLDED = {
    # (function, the call's alpha, the addend's and the row's scales)
    "sgd update": (lambda w, x, g, b: w - 0.01 * (x.T @ g), -0.01, 1.0, 0.0),
    "residual": (lambda w, x, g, b: w + x.T @ g, 1.0, 1.0, 0.0),
    "scaled both": (lambda w, x, g, b: 2.0 * (w - 3.0 * (x.T @ g)), -6.0, 2.0, 0.0),
    "product minus addend": (lambda w, x, g, b: (x.T @ g) * 0.5 - w, 0.5, -1.0, 0.0),
    "scaled product only": (lambda w, x, g, b: -(x.T @ g) * 4.0, -4.0, 0.0, 0.0),
    "bias": (lambda w, x, g, b: x.T @ g + b, 1.0, 0.0, 1.0),
    "residual and bias": (lambda w, x, g, b: w + (x.T @ g + b), 1.0, 1.0, 1.0),
    "scaled bias": (lambda w, x, g, b: 2.0 * (x.T @ g) - 3.0 * b + 0.5 * w, 2.0, 0.5, -3.0),
    "one addend twice": (lambda w, x, g, b: w + x.T @ g + 2.0 * w, 1.0, 3.0, 0.0),
}


@pytest.mark.parametrize("name", FOLDED)
def test_affine_epilogues_are_computed_by_the_call(name):
    fun, alpha, d_scale, row_scale = FOLDED[name]
    source = _gemm_source(fun, W, X, G, B)
    assert "_epilogue" not in source, source
    call = source.strip().splitlines()[-1]
    *_, got_alpha, d, got_d_scale, row, got_row_scale, activation, e = call.rstrip(");").split(
        ", ")
    assert (activation, e) == ("0", "0"), call  # (none; C takes the result)
    np.testing.assert_allclose([float(got_alpha), float(got_d_scale), float(got_row_scale)],
                               [alpha, d_scale, row_scale], rtol=1e-6)
    assert (d == "0") == (d_scale == 0.0) and (row == "0") == (row_scale == 0.0), call
    assert_matches_reference(fun, W, X, G, B, tolerance=TOLERANCE)


def test_batched_residual_and_bias():
    """Split by batch items (each thread its items) and by rows or columns (3 items on
    2 threads): the row addend follows each block's columns."""
    for count in (4, 3):
        a = RNG.standard_normal((count, 160, 48)).astype(np.float32)
        b = RNG.standard_normal((count, 48, 136)).astype(np.float32)
        r = RNG.standard_normal((count, 160, 136)).astype(np.float32)
        bias = RNG.standard_normal(136).astype(np.float32)
        fun = lambda r, a, b, bias: r + a @ b - bias  # noqa: E731
        assert "_epilogue" not in _gemm_source(fun, r, a, b, bias)
        assert_matches_reference(fun, r, a, b, bias, tolerance=TOLERANCE)


def test_a_wide_product_split_by_columns_adds_each_block_its_bias():
    x = RNG.standard_normal((40, 64)).astype(np.float32)
    w = RNG.standard_normal((64, 2000)).astype(np.float32)
    b = RNG.standard_normal(2000).astype(np.float32)
    fun = lambda x, w, b: x @ w + b  # noqa: E731
    source = _gemm_source(fun, x, w, b)
    assert "_epilogue" not in source and source.strip().splitlines()[-1].startswith(
        "ember_gemm_f32(2, 2,"), source  # split 2: by blocks of columns
    assert_matches_reference(fun, x, w, b, tolerance=TOLERANCE)


@pytest.mark.parametrize("fun", [
    lambda w, x, g, b: x.T @ g + w[0],  # a row of the addend, not a buffer of its own
    lambda w, x, g, b: x.T @ g + w[:, :1],  # a column broadcast along the rows
    lambda w, x, g, b: w - jnp.tanh(x.T @ g),  # not affine
    lambda w, x, g, b: w * (x.T @ g),  # not affine in the product
], ids=["row-of-a-matrix", "column", "tanh", "product-times-addend"])
def test_other_epilogues_stay_kernels(fun):
    assert "_epilogue" in _gemm_source(fun, W, X, G, B)
    assert_matches_reference(fun, W, X, G, B, tolerance=TOLERANCE)


def test_the_product_may_be_needed_too():
    """The call writes the plain product into C and the update into E (its last
    argument, a pointer instead of 0)."""
    fun = lambda w, x, g, b: (w - 0.01 * (x.T @ g), x.T @ g)  # noqa: E731
    source = _gemm_source(fun, W, X, G, B)
    assert "_epilogue" not in source and not source.strip().endswith(", 0);"), source
    assert_matches_reference(fun, W, X, G, B, tolerance=TOLERANCE)


def test_the_addend_may_be_an_operand():
    square = RNG.standard_normal((64, 64)).astype(np.float32)
    fun = lambda w: w - 0.1 * (w @ w)  # noqa: E731
    assert "_epilogue" not in _gemm_source(fun, square)
    assert_matches_reference(fun, square, tolerance=(1e-4, 1e-4))


def test_a_donated_addend_is_updated_in_place():
    step = ember.jit(lambda w, x, g: w - 0.01 * (x.T @ g), donate_argnums=0)
    expected = W - 0.01 * (X.T @ G)
    w = ember.device_put(W.copy())
    for _ in range(3):
        w = step(w, X, G)
        expected_next = expected
        np.testing.assert_allclose(np.asarray(w), expected_next, rtol=1e-5, atol=1e-5)
        expected = expected - 0.01 * (X.T @ G)


def test_an_sgd_step_matches_the_reference():
    def loss(params, x, y):
        h = jnp.tanh(x @ params["w1"] + params["b1"])
        return jnp.mean((h @ params["w2"] - y) ** 2)

    def step(params, x, y):
        grads = ember.grad(loss)(params, x, y)
        return {k: params[k] - 0.05 * grads[k] for k in params}

    params = {"w1": RNG.standard_normal((64, 128)).astype(np.float32) * 0.1,
              "b1": np.zeros(128, np.float32),
              "w2": RNG.standard_normal((128, 8)).astype(np.float32) * 0.1}
    x, y = X, RNG.standard_normal((96, 8)).astype(np.float32)
    kernels = compiled(step, params, x, y).kernels
    assert any(k.kind == "library" and "_epilogue" not in k.source and "sub" in k.ops
               for k in kernels)
    assert_matches_reference(step, params, x, y, tolerance=(1e-4, 1e-5))


def test_float64_update_with_bias(x64):
    w, x, g, b = (a.astype(np.float64) for a in (W, X, G, B))
    fun = lambda w, x, g, b: w - 0.3 * (x.T @ g) + 2.0 * b  # noqa: E731
    source = _gemm_source(fun, w, x, g, b)
    assert "_epilogue" not in source and "ember_gemm_f64" in source
    assert_matches_reference(fun, w, x, g, b)


SCALED_OPERANDS = {
    # (function, the kernels' kinds, the call's alpha)
    "lhs": (lambda x, g: (2.0 * x.T) @ g, ["library"], 2.0),
    "rhs": (lambda x, g: x.T @ (g * -0.5), ["library"], -0.5),
    "both, then negated": (lambda x, g: -((3.0 * x.T) @ (g * 0.5)), ["library"], -1.5),
    # attention's scaled query: the scale goes to the epilogue kernel that takes the exp
    "attention scores": (lambda x, g: jnp.exp((x[:, :16] * 0.25) @ g[:, :16].T),
                         ["library"], 1.0),
}


@pytest.mark.parametrize("name", SCALED_OPERANDS)
def test_a_scaled_operand_scales_the_product(name):
    """``(c * x) @ w`` is computed as ``c * (x @ w)``: the GEMM reads x itself and c is
    its alpha (or, where the consumer is a kernel of its own, a factor there)."""
    fun, kinds, alpha = SCALED_OPERANDS[name]
    kernels = compiled(fun, X, G).kernels
    assert [k.kind for k in kernels] == kinds, kernels
    call = next(line for line in kernels[0].source.splitlines() if line.startswith("ember_gemm"))
    assert float(call.rstrip(");").split(", ")[-7]) == alpha, call
    assert_matches_reference(fun, X, G, tolerance=(1e-4, 1e-4))


def test_a_scaled_operand_used_elsewhere_stays_a_kernel():
    fun = lambda x, g: ((2.0 * x).T @ g, 2.0 * x)  # noqa: E731
    kinds = [k.kind for k in compiled(fun, X, G).kernels]
    assert "kernel" in kinds, kinds
    assert_matches_reference(fun, X, G, tolerance=(1e-4, 1e-4))


def test_gradients_through_a_scaled_operand():
    def loss(x, g):
        return jnp.sum(jnp.tanh((0.5 * x.T) @ g) ** 2)

    grads = ember.grad(loss, argnums=(0, 1))
    assert_matches_reference(grads, X, G, tolerance=(1e-4, 1e-4))
