"""Whole programs whose GEMMs run on Ember's own GEMM (``blas="ember"``) against the
reference backend: every layout the BLAS path plans (transposed operands, batches,
products written into a consumer's layout), the affine epilogues folded into the call,
an MLP train step, in float32 and float64, and 16-bit operands with float32 results or
results of their own type."""
import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.backends.cpu import blas_choice, ember_gemm, toolchain
from ember.config import config
from tests.backends.cpu import test_cpu_gemm_affine as affine
from tests.backends.cpu import test_cpu_gemm_layout as layout
from tests.backends.cpu.cpu_testing import assert_matches_reference, compiled, requires_cpu

pytestmark = requires_cpu

RNG = np.random.default_rng(0)
TOLERANCE = {np.float32: (1e-4, 1e-4), np.float64: (1e-10, 1e-10)}


@pytest.fixture(autouse=True)
def ember_blas():
    with config.override(blas="ember"):
        yield


def test_modules_link_embers_gemm_library():
    info = toolchain.blas()
    assert info.name == "ember"
    assert f"-DEMBER_GEMM_OWN_CLASSES={blas_choice.ALL_CLASSES}" in info.compile_flags
    assert info.link_flags == (str(ember_gemm.library_path()),)
    _, link_flags = toolchain._flags(toolchain.blas(), ())
    assert str(ember_gemm.library_path()) in link_flags


def test_library_follows_the_compile_cache(tmp_path):
    """Built in the cache in use (once), and again when its file is gone."""
    paths = []
    for name in ("first", "second"):
        with config.override(cache_dir=str(tmp_path / name)):
            paths.append(ember_gemm.library_path())
            assert ember_gemm.library_path() == paths[-1]
            assert toolchain.blas().link_flags == (str(paths[-1]),)
    assert [p.is_relative_to(tmp_path / name) for p, name in zip(paths, ("first", "second"))] \
        == [True, True]
    with config.override(cache_dir=str(tmp_path / "first")):
        paths[0].unlink()
        assert ember_gemm.library_path().is_file()


def _dot(dims):
    return lambda a, b: lax.dot_general(a, b, dims)


@pytest.mark.parametrize("lhs_shape, rhs_shape, dims", [
    ((200, 96), (96, 112), (((1,), (0,)), ((), ()))),
    ((96, 200), (96, 112), (((0,), (0,)), ((), ()))),           # transposed lhs
    ((100, 96), (250, 96), (((1,), (1,)), ((), ()))),           # transposed rhs
    ((96, 101), (251, 96), (((0,), (1,)), ((), ()))),           # both transposed
    ((7, 64, 65), (7, 65, 48), (((2,), (1,)), ((0,), (0,)))),   # batched
    ((80, 3, 96), (3, 96, 100), (((2,), (1,)), ((1,), (0,)))),  # strided batch
    ((2, 3, 33, 40), (2, 3, 40, 17), (((3,), (2,)), ((0, 1), (0, 1)))),  # two batch axes
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("threads", [1, 3])
def test_layouts_match_reference(lhs_shape, rhs_shape, dims, dtype, threads):
    lhs = RNG.standard_normal(lhs_shape).astype(dtype)
    rhs = RNG.standard_normal(rhs_shape).astype(dtype)
    with config.override(num_threads=threads, enable_x64=dtype == np.float64):
        assert_matches_reference(_dot(dims), lhs, rhs, tolerance=TOLERANCE[dtype])
        kinds = [k.kind for k in compiled(_dot(dims), lhs, rhs).kernels]
    assert kinds == ["library"]


@pytest.mark.parametrize("name", layout.CASES)
def test_products_written_into_consumer_layouts(name):
    assert_matches_reference(layout.CASES[name], layout.PROBS, layout.VALUES,
                             tolerance=layout.TOLERANCE)


@pytest.mark.parametrize("name", affine.FOLDED)
def test_affine_epilogues_match_reference(name):
    # (A looser tolerance than the BLAS path's: the reference's products are NumPy's
    # BLAS, the same library, summed in the same order; these are summed in another.)
    fun = affine.FOLDED[name][0]
    assert_matches_reference(fun, affine.W, affine.X, affine.G, affine.B,
                             tolerance=TOLERANCE[np.float32])


def _mlp_params(dtype):
    sizes = [(61, 96), (96, 10)]
    return [(RNG.standard_normal(shape).astype(dtype) / np.sqrt(shape[0]),
             RNG.standard_normal(shape[1]).astype(dtype) * 0.1) for shape in sizes]


def _train_step(params, x, labels):
    def loss(params):
        h = x
        for index, (w, b) in enumerate(params):
            h = h @ w + b
            if index < len(params) - 1:
                h = jnp.maximum(h, 0.0)
        logits = h - jnp.max(h, axis=1, keepdims=True)
        log_probs = logits - jnp.log(jnp.sum(jnp.exp(logits), axis=1, keepdims=True))
        return -jnp.mean(jnp.sum(log_probs * labels, axis=1))

    value, grads = ember.value_and_grad(loss)(params)
    updated = [(w - 0.1 * gw, b - 0.1 * gb) for (w, b), (gw, gb) in zip(params, grads)]
    return value, updated


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_mlp_train_step_matches_reference(dtype):
    params = _mlp_params(dtype)
    x = RNG.standard_normal((130, 61)).astype(dtype)
    labels = np.eye(10, dtype=dtype)[RNG.integers(0, 10, 130)]
    tolerance = (2e-4, 2e-5) if dtype == np.float32 else TOLERANCE[dtype]
    with config.override(enable_x64=dtype == np.float64):
        assert_matches_reference(_train_step, params, x, labels, tolerance=tolerance)
        kinds = [k.kind for k in compiled(_train_step, params, x, labels).kernels]
    assert kinds.count("library") >= 5  # forward, and both gradients of each layer


def _half_dot(dims):
    return lambda a, b: lax.dot_general(a, b, dims, preferred_element_type=np.float32)


@pytest.mark.parametrize("lhs_shape, rhs_shape, dims", [
    ((200, 96), (96, 112), (((1,), (0,)), ((), ()))),
    ((96, 201), (96, 113), (((0,), (0,)), ((), ()))),           # transposed lhs, odd sizes
    ((100, 97), (250, 97), (((1,), (1,)), ((), ()))),           # transposed rhs, odd sum
    ((7, 64, 65), (7, 65, 10), (((2,), (1,)), ((0,), (0,)))),   # batched, narrow
])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("threads", [1, 3])
def test_16_bit_operands_with_float32_products(lhs_shape, rhs_shape, dims, dtype, threads):
    """One library call of ember_gemm_bf16/f16, no conversion kernel, matching the
    reference (which computes the same products of the same 16-bit values)."""
    lhs = RNG.standard_normal(lhs_shape).astype(jnp.dtype(dtype))
    rhs = RNG.standard_normal(rhs_shape).astype(jnp.dtype(dtype))
    with config.override(num_threads=threads):
        assert_matches_reference(_half_dot(dims), lhs, rhs, tolerance=TOLERANCE[np.float32])
        kernels = compiled(_half_dot(dims), lhs, rhs).kernels
    assert [k.kind for k in kernels] == ["library"]
    assert kernels[0].source.startswith(f"ember_gemm_{'bf16' if dtype == 'bfloat16' else 'f16'}(")


def test_16_bit_products_fold_their_bias():
    """A bias added to a bfloat16 product is the call's epilogue (one kernel)."""
    x = RNG.standard_normal((130, 96)).astype(jnp.bfloat16)
    w = RNG.standard_normal((96, 70)).astype(jnp.bfloat16)
    b = RNG.standard_normal(70).astype(np.float32)

    def layer(x, w, b):
        return jnp.matmul(x, w, preferred_element_type=np.float32) + b

    assert_matches_reference(layer, x, w, b, tolerance=TOLERANCE[np.float32])
    assert [k.kind for k in compiled(layer, x, w, b).kernels] == ["library"]


_HALF_RESULTS = {
    "dot": lambda x, w, b: x @ w,
    "layer": lambda x, w, b: jnp.maximum(x @ w + b, 0),
    "transposed": lambda x, w, b: w.T @ w - 2 * b,
    "batched": lambda x, w, b: jnp.matmul(x.reshape(2, 65, 96), w) + b,
}


@pytest.mark.parametrize("name", _HALF_RESULTS)
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("threads", [1, 3])
def test_16_bit_results_are_one_call(name, dtype, threads):
    """16-bit operands and results: one call of ember_gemm_bf16_bf16 / f16_f16, with its
    bias and activation, summed in float32 and rounded once to the results (the
    reference sums in float32 too, and rounds each of its ops)."""
    half = jnp.dtype(dtype)
    x = RNG.standard_normal((130, 96)).astype(half)
    w = (RNG.standard_normal((96, 70)) / np.sqrt(96)).astype(half)
    b = RNG.standard_normal(70).astype(half)
    fun = _HALF_RESULTS[name]
    with config.override(num_threads=threads):
        assert_matches_reference(fun, x, w, b)
        kernels = compiled(fun, x, w, b).kernels
    assert [k.kind for k in kernels] == ["library"] and "_epilogue" not in kernels[0].source
    suffix = "bf16" if dtype == "bfloat16" else "f16"
    assert kernels[0].source.startswith(f"ember_gemm_{suffix}_{suffix}("), kernels[0].source


def test_bfloat16_layer_gradients():
    """A bfloat16 layer differentiated: its backward products are bfloat16 calls too."""
    x = RNG.standard_normal((130, 96)).astype(jnp.bfloat16)
    w = (RNG.standard_normal((96, 70)) / np.sqrt(96)).astype(jnp.bfloat16)
    b = RNG.standard_normal(70).astype(jnp.bfloat16)

    def loss(w, b):
        h = jnp.maximum(x @ w + b, 0)
        return jnp.sum(h.astype(np.float32) ** 2)

    grads = ember.grad(loss, argnums=(0, 1))
    assert_matches_reference(grads, w, b, tolerance=(3e-2, 3e-2))
    sources = [k.source for k in compiled(grads, w, b).kernels if k.kind == "library"]
    assert sum("ember_gemm_bf16_bf16(" in source for source in sources) >= 2, sources


@pytest.mark.parametrize("blas", ["openblas", "auto"])
def test_16_bit_products_without_embers_gemm_are_loops(blas):
    """A BLAS alone has no 16-bit products: they stay generated loops (and match)."""
    lhs = RNG.standard_normal((64, 48)).astype(jnp.bfloat16)
    rhs = RNG.standard_normal((48, 40)).astype(jnp.bfloat16)
    dims = (((1,), (0,)), ((), ()))
    with config.override(blas=blas):
        if blas == "openblas" and toolchain.blas() is None:
            pytest.skip("scipy-openblas32 is not installed")
        ember_gemm.library_path()  # (auto takes Ember's GEMM once it is built)
        toolchain._measured_blas.cache_clear()
        assert_matches_reference(_half_dot(dims), lhs, rhs, tolerance=TOLERANCE[np.float32])
        kinds = [k.kind for k in compiled(_half_dot(dims), lhs, rhs).kernels]
    toolchain._measured_blas.cache_clear()
    assert ("library" in kinds) == (blas == "auto")  # (auto links Ember's GEMM for them)


_CASTS = {  # (program, which operands are cast from float32, whether results are 16-bit)
    "x": (lambda x, w: x.astype(w.dtype) @ w, "a"),
    "both": (lambda x, w: jnp.maximum(x.astype(jnp.bfloat16) @ w.astype(jnp.bfloat16), 0), "ab"),
    # (x transposed, w a strided slice; the transpose of the product swaps them: C^T)
    "transposed": (lambda x, w: (w[:, :70].T @ x.astype(w.dtype).T).T, "a"),
    "into float32": (lambda x, w: jnp.matmul(x.astype(w.dtype), w,
                                             preferred_element_type=np.float32), "a"),
}


@pytest.mark.parametrize("name", _CASTS)
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("threads", [1, 2])
def test_float32_operands_are_cast_as_packed(name, dtype, threads):
    """``x.astype(bfloat16) @ w`` with x float32: one call that rounds x as it packs it
    (no kernel writes a 16-bit copy of x), bit for bit the product of x cast first
    (both round to nearest, ties to even), and the reference's within its rounding."""
    fun, casts = _CASTS[name]
    half = jnp.dtype(dtype)
    x = RNG.standard_normal((96, 130)).astype(np.float32)
    w = (RNG.standard_normal((130, 96)) / np.sqrt(130)).astype(half)
    if name == "both":
        w = w.astype(np.float32)
        half = jnp.dtype(jnp.bfloat16)
    with config.override(num_threads=threads):
        kernels = compiled(fun, x, w).kernels
        assert [k.kind for k in kernels] == ["library"], [k.source for k in kernels]
        assert f"_cast_{casts}(" in kernels[0].source, kernels[0].source
        got = np.asarray(ember.jit(fun)(x, w))
        stored = (x.astype(half), w.astype(half))  # (cast first, by ml_dtypes)
        cast_first = np.asarray(ember.jit(lambda x, w: fun(x, w.astype(half)))(*stored))
        assert cast_first.dtype == got.dtype
        np.testing.assert_array_equal(got.view(np.uint8), cast_first.view(np.uint8))
        assert_matches_reference(fun, x, w, tolerance=(2e-2, 2e-2))


def test_mixed_precision_train_step_casts_as_packed():
    """A layer with float32 master weights multiplied in bfloat16, differentiated: no
    kernel is left for the casts of x and w (each product reads them in float32)."""
    x = RNG.standard_normal((130, 96)).astype(np.float32)
    w = (RNG.standard_normal((96, 70)) / np.sqrt(96)).astype(np.float32)

    def loss(w):
        h = jnp.maximum(x.astype(jnp.bfloat16) @ w.astype(jnp.bfloat16), 0)
        return jnp.sum(h.astype(np.float32) ** 2)

    grad = ember.grad(loss)
    assert_matches_reference(grad, w, tolerance=(3e-2, 3e-2))
    kernels = compiled(grad, w).kernels
    casts = [k for k in kernels if k.kind != "library" and k.ops == ["convert_element_type"]]
    assert not casts, [k.source for k in casts]
    sources = [k.source for k in kernels if k.kind == "library"]
    assert any("_cast_" in source for source in sources), sources
