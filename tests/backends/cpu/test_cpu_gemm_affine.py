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
TOLERANCE = (1e-5, 1e-5)


def _gemm_source(fun, *args) -> str:
    (step,) = [k for k in compiled(fun, *args).kernels if k.kind == "library"]
    return step.source


FOLDED = {
    # (function, the call's alpha and beta)
    "sgd update": (lambda w, x, g: w - 0.01 * (x.T @ g), -0.01, 1.0),
    "residual": (lambda w, x, g: w + x.T @ g, 1.0, 1.0),
    "scaled both": (lambda w, x, g: 2.0 * (w - 3.0 * (x.T @ g)), -6.0, 2.0),
    "product minus addend": (lambda w, x, g: (x.T @ g) * 0.5 - w, 0.5, -1.0),
    "scaled product only": (lambda w, x, g: -(x.T @ g) * 4.0, -4.0, 0.0),
}


@pytest.mark.parametrize("name", FOLDED)
def test_affine_epilogues_are_computed_by_the_call(name):
    fun, alpha, beta = FOLDED[name]
    source = _gemm_source(fun, W, X, G)
    assert "_epilogue" not in source, source
    call = source.strip().splitlines()[-1]
    *_, got_alpha, got_beta, addend = call.rstrip(");").split(", ")
    np.testing.assert_allclose([float(got_alpha), float(got_beta)], [alpha, beta], rtol=1e-6)
    assert (addend == "0") == (beta == 0.0), call
    assert_matches_reference(fun, W, X, G, tolerance=TOLERANCE)


def test_batched_residual():
    a = RNG.standard_normal((3, 40, 48)).astype(np.float32)
    b = RNG.standard_normal((3, 48, 36)).astype(np.float32)
    r = RNG.standard_normal((3, 40, 36)).astype(np.float32)
    fun = lambda r, a, b: r + a @ b  # noqa: E731
    assert "_epilogue" not in _gemm_source(fun, r, a, b)
    assert_matches_reference(fun, r, a, b, tolerance=TOLERANCE)


@pytest.mark.parametrize("fun", [
    lambda w, x, g: x.T @ g + w[0],  # a broadcast addend
    lambda w, x, g: (w - 0.01 * (x.T @ g), x.T @ g),  # the product is needed too
    lambda w, x, g: w - jnp.tanh(x.T @ g),  # not affine
    lambda w, x, g: w * (x.T @ g),  # not affine in the product
], ids=["broadcast-addend", "product-returned", "tanh", "product-times-addend"])
def test_other_epilogues_stay_kernels(fun):
    assert "_epilogue" in _gemm_source(fun, W, X, G)
    assert_matches_reference(fun, W, X, G, tolerance=TOLERANCE)


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
