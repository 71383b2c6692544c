"""An activation after a GEMM's affine epilogue (``relu(x @ w + b)``, both GELU forms of
``ember.nn.gelu``) is applied by the GEMM call as it stores C, on Ember's GEMM and on a
BLAS: one call, no epilogue kernel. Checked on the generated code, against the reference
backend (forward and gradients) and against finite differences."""
import math

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import nn
from ember.backends.cpu import toolchain
from ember.codegen.gemm_activation import ACTIVATIONS
from ember.config import config
from ember.test_util import check_grads
from tests.backends.cpu.cpu_testing import assert_matches_reference, compiled, requires_cpu

pytestmark = requires_cpu

RNG = np.random.default_rng(0)
TOLERANCE = {np.float32: (1e-4, 1e-5), np.float64: (1e-10, 1e-12)}
ACTIVATION_FUNCTIONS = {"relu": nn.relu, "gelu_tanh": nn.gelu,
                        "gelu_erfc": lambda x: nn.gelu(x, approximate=False)}


@pytest.fixture(params=["ember", "openblas"])
def blas(request):
    """Ember's own GEMM (the activation on each tile in L1) and a BLAS (on each thread's
    block after its call)."""
    with config.override(blas=request.param):
        if toolchain.blas() is None:
            pytest.skip(f"{request.param} is not available")
        yield request.param


def _library_call(fun, *args) -> str:
    """The one step of ``fun``: a library call with no epilogue kernel; its C call."""
    kernels = compiled(fun, *args).kernels
    assert [k.kind for k in kernels] == ["library"], kernels
    assert "_epilogue" not in kernels[0].source, kernels[0].source
    return kernels[0].source.strip().splitlines()[-1]


def _activation_code(call: str) -> int:
    return int(call.rstrip(");").split(", ")[-2])


def _layer(activation, dtype=np.float32, shape=(96, 200, 130)):
    m, k, n = shape
    x = RNG.standard_normal((m, k)).astype(dtype)
    w = (RNG.standard_normal((k, n)) / math.sqrt(k)).astype(dtype)
    b = RNG.standard_normal(n).astype(dtype)
    act = ACTIVATION_FUNCTIONS[activation]
    return (lambda x, w, b: act(x @ w + b)), (x, w, b)


@pytest.mark.parametrize("activation", sorted(ACTIVATION_FUNCTIONS))
@pytest.mark.parametrize("shape", [(96, 200, 130), (250, 1700, 10), (7, 33, 65)],
                         ids=["wide", "narrow-several-blocks", "partial-tiles"])
def test_dense_bias_activation_is_one_call(blas, activation, shape):
    fun, args = _layer(activation, shape=shape)
    assert _activation_code(_library_call(fun, *args)) == ACTIVATIONS[activation]
    assert_matches_reference(fun, *args, tolerance=TOLERANCE[np.float32])


@pytest.mark.parametrize("activation", sorted(ACTIVATION_FUNCTIONS))
def test_float64_and_a_residual(blas, activation, x64):
    act = ACTIVATION_FUNCTIONS[activation]
    fun, (x, w, b) = _layer(activation, np.float64)
    r = RNG.standard_normal((x.shape[0], w.shape[1]))
    residual = lambda x, w, b, r: act(r - 0.5 * (x @ w) + b)  # noqa: E731
    call = _library_call(residual, x, w, b, r)
    assert call.startswith("ember_gemm_f64(") and _activation_code(call) == ACTIVATIONS[activation]
    assert_matches_reference(residual, x, w, b, r, tolerance=TOLERANCE[np.float64])


def test_bfloat16_operands_with_a_float32_activation():
    with config.override(blas="ember"):
        x = RNG.standard_normal((130, 96)).astype(jnp.bfloat16)
        w = RNG.standard_normal((96, 70)).astype(jnp.bfloat16)
        b = RNG.standard_normal(70).astype(np.float32)

        def layer(x, w, b):
            return nn.gelu(jnp.matmul(x, w, preferred_element_type=np.float32) + b)

        assert _activation_code(_library_call(layer, x, w, b)) == ACTIVATIONS["gelu_tanh"]
        assert_matches_reference(layer, x, w, b, tolerance=TOLERANCE[np.float32])


def test_bfloat16_results_take_relu_not_gelu():
    """A bfloat16 program's GELU constants are rounded to bfloat16: the call, which uses
    float32 ones, leaves that epilogue to the graph's kernel; relu's 0 is exact."""
    with config.override(blas="ember"):
        x = RNG.standard_normal((130, 96)).astype(jnp.bfloat16)
        w = (RNG.standard_normal((96, 70)) / math.sqrt(96)).astype(jnp.bfloat16)
        b = RNG.standard_normal(70).astype(jnp.bfloat16)
        relu = lambda x, w, b: nn.relu(x @ w + b)  # noqa: E731
        call = _library_call(relu, x, w, b)
        assert call.startswith("ember_gemm_bf16_bf16(") and _activation_code(call) == 1
        gelu = lambda x, w, b: nn.gelu(x @ w + b)  # noqa: E731
        assert "_epilogue" in compiled(gelu, x, w, b).kernels[0].source
        for fun in (relu, gelu):
            assert_matches_reference(fun, x, w, b)


def _mlp(params, x):
    h = nn.relu(x @ params["w1"] + params["b1"])
    h = nn.gelu(h @ params["w2"] + params["b2"])
    return h @ params["w3"] + params["b3"]


def _mlp_params(dtype=np.float32):
    sizes = [(64, 128), (128, 96), (96, 10)]
    params = {}
    for index, (fan_in, fan_out) in enumerate(sizes, 1):
        params[f"w{index}"] = (RNG.standard_normal((fan_in, fan_out)) / math.sqrt(fan_in)).astype(dtype)
        params[f"b{index}"] = (0.1 * RNG.standard_normal(fan_out)).astype(dtype)
    return params


def test_mlp_forward_is_one_call_per_layer(blas):
    """Each dense + bias + activation of an MLP's forward is one GEMM call (3 layers: 3
    steps, none of them a kernel)."""
    params, x = _mlp_params(), RNG.standard_normal((200, 64)).astype(np.float32)
    kernels = compiled(_mlp, params, x).kernels
    assert [k.kind for k in kernels] == ["library"] * 3, kernels
    assert all("_epilogue" not in k.source for k in kernels)
    codes = [_activation_code(k.source.strip().splitlines()[-1]) for k in kernels]
    assert sorted(codes) == sorted(ACTIVATIONS[a] for a in ("relu", "gelu_tanh", "none"))
    assert_matches_reference(_mlp, params, x, tolerance=TOLERANCE[np.float32])


def _kept_products(step, *args) -> list[str]:
    """The library calls of ``step`` that write their product beside the activation (E)."""
    calls = [k.source.strip().splitlines()[-1] for k in compiled(step, *args).kernels
             if k.kind == "library" and "_epilogue" not in k.source]
    return [call for call in calls if not call.endswith(", 0);")]  # (an E pointer)


def test_mlp_gradients_match_the_reference(blas):
    """nn.relu's derivative is written in terms of its output (as JAX's, 0 at 0): the
    backward reads the activations, so its call keeps no product. jnp.maximum(z, 0)'s
    derivative is 1/2 where z is 0: its backward needs the product, and the call writes
    it and the activation beside it (E). (The GELU layer's backward needs the values
    inside GELU as well: that epilogue stays a kernel.)"""
    params, x = _mlp_params(), RNG.standard_normal((200, 64)).astype(np.float32)
    y = RNG.standard_normal((200, 10)).astype(np.float32)

    def loss(params, x, y):
        return jnp.mean((_mlp(params, x) - y) ** 2)

    def loss_with_maximum(params, x, y):
        h = jnp.maximum(x @ params["w1"] + params["b1"], 0.0)
        h = nn.gelu(h @ params["w2"] + params["b2"])
        return jnp.mean((h @ params["w3"] + params["b3"] - y) ** 2)

    for fun in (loss, loss_with_maximum):
        step = ember.value_and_grad(fun)
        assert_matches_reference(step, params, x, y, tolerance=TOLERANCE[np.float32])
    relu_calls = lambda fun: [call for call in _kept_products(  # noqa: E731
        ember.value_and_grad(fun), params, x, y) if _activation_code(call) == ACTIVATIONS["relu"]]
    assert not relu_calls(loss) and relu_calls(loss_with_maximum)


@pytest.mark.parametrize("activation", sorted(ACTIVATION_FUNCTIONS))
def test_gradients_against_finite_differences(activation, x64):
    """The fused layer inside jit, differentiated, against finite differences (float64;
    the biases keep relu's inputs away from its kink)."""
    fun, (x, w, b) = _layer(activation, np.float64, shape=(24, 40, 33))
    with config.override(blas="ember"):
        check_grads(ember.jit(lambda w, b: jnp.sum(fun(x, w, b) ** 2), backend="cpu"), (w, b),
                    order=1)


def test_product_returned_beside_the_activation(blas):
    fun, args = _layer("gelu_erfc")
    both = lambda x, w, b: (fun(x, w, b), x @ w)  # noqa: E731
    call = _library_call(both, *args)
    assert _activation_code(call) == ACTIVATIONS["gelu_erfc"] and not call.endswith(", 0);")
    assert_matches_reference(both, *args, tolerance=TOLERANCE[np.float32])


@pytest.mark.parametrize("fun", [
    lambda x, w, b: (nn.relu(x @ w + b), x @ w + b),  # the pre-activation is needed too
    lambda x, w, b: jnp.maximum(x @ w + b, 1.0),  # not relu
    lambda x, w, b: 0.5 * (x @ w) * (1 + jnp.tanh(0.8 * ((x @ w) + 0.044715 * (x @ w) ** 3))),
    lambda x, w, b: nn.relu(x @ w) + b,  # the bias after the activation
], ids=["pre-activation-returned", "max-with-one", "gelu-constant-off", "bias-after"])
def test_other_epilogues_stay_kernels(blas, fun):
    _, (x, w, b) = _layer("relu")
    kernels = compiled(fun, x, w, b).kernels
    assert any("_epilogue" in k.source for k in kernels), kernels
    assert_matches_reference(fun, x, w, b, tolerance=TOLERANCE[np.float32])


def test_gelu_training_layer_with_tanh_stored_matches_reference():
    # (the epilogue that stores tanh for the backward also computes the GELU: fusion's
    # _merge_into_epilogues)
    x = RNG.standard_normal((48, 40)).astype(np.float32)
    w = (RNG.standard_normal((40, 72)) * 0.2).astype(np.float32)
    b = (RNG.standard_normal(72) * 0.1).astype(np.float32)
    w2 = (RNG.standard_normal((72, 8)) * 0.2).astype(np.float32)

    def loss(w, b, w2):
        return jnp.sum((nn.gelu(x @ w + b) @ w2) ** 2)

    kernels = compiled(ember.grad(loss, argnums=(0, 1, 2)), w, b, w2).kernels
    # (one loop kernel: b's gradient, a column sum)
    assert [k.kind for k in kernels] == ["library"] * 4 + ["kernel", "library"]
    assert_matches_reference(ember.value_and_grad(loss, argnums=(0, 1, 2)), w, b, w2,
                             tolerance=TOLERANCE[np.float32])
