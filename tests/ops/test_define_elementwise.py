"""An elementwise op is one row: defined here, in this file only, it runs on every
backend present (the reference, the CPU's generated C, OpenCL, CUDA: compile-only
without a GPU), under grad and vmap, through ember.lax and ember.numpy, and the fuzzer
draws it."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import lax
from ember.core.primitive import REGISTRY
from ember.fuzz.choices import RandomChoices
from ember.fuzz.generate import Limits, generate
from ember.fuzz.ops import unary_templates
from ember.fuzz.program import function_source
from ember.fuzz.runner import check
from ember.fuzz.targets import all_targets
from ember.ops import elementwise as ew
from ember.runtime.devices import available_backends
from ember.test_util import check_grads

NAME = "smooth_relu"  # softplus: log(1 + e^x), as max(x, 0) + log1p(e^-|x|)

SMOOTH_RELU = ew.ElementwiseOp(
    NAME, lambda x: np.logaddexp(np.zeros_like(x), x), ew.FLOAT,
    jvp=[lambda t, x: lax.mul(t, lax.logistic(x))], expensive=True,
    templates={"c": {"float": "(({0} > 0 ? {0} : ({T})0) + {f_log1p}({f_exp}(-{f_fabs}({0}))))"}},
    numpy=(NAME,), promote="inexact")


@pytest.fixture
def smooth_relu():
    """The op, defined for one test and removed after it (other tests walk the tables)."""
    ew.define_elementwise(SMOOTH_RELU)
    try:
        yield getattr(lax, NAME)
    finally:
        for table in (ew.ELEMENTWISE, ew.ELEMENTWISE_OPS, REGISTRY):
            del table[NAME]


def expected(x: np.ndarray) -> np.ndarray:
    return np.log1p(np.exp(x.astype(np.float64))).astype(x.dtype)


X = np.array([-30.0, -3.5, -1.0, -0.25, 0.0, 0.5, 2.0, 9.0, 40.0], np.float32)
NATIVE = [b for b in ("cpu", "opencl", "cuda") if b in available_backends()]  # cuda: with a GPU


def test_reference_eager_and_jit(smooth_relu):
    np.testing.assert_allclose(smooth_relu(X), expected(X), rtol=1e-6)
    jitted = ember.jit(smooth_relu, backend="reference")
    np.testing.assert_allclose(jitted(X), expected(X), rtol=1e-6)


@pytest.mark.parametrize("backend", NATIVE)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_native_backends_compute_it_in_a_generated_kernel(smooth_relu, backend, dtype):
    x = X.astype(dtype)
    with ember.config.override(enable_x64=dtype == np.float64):
        fun = ember.jit(lambda v: lax.mul(smooth_relu(v), v), backend=backend)
        compiled = fun.lower(x).compile()
        np.testing.assert_allclose(fun(x), expected(x) * x, rtol=1e-5, atol=1e-30)
    fused = [k for k in compiled.kernels if k.kind != "host"]
    assert len(fused) == 1 and "log1p" in fused[0].source, [k.source for k in compiled.kernels]


def test_cuda_renders_and_compiles_it(smooth_relu):
    from ember.backends.cuda.driver import gpus
    from ember.backends.cuda.nvrtc import nvrtc_version

    if nvrtc_version() is None or gpus():
        pytest.skip("needs NVRTC and no GPU (compile-only mode)")
    compiled = ember.jit(lambda v: lax.mul(smooth_relu(v), v), backend="cuda").lower(X).compile()
    (kernel,) = [k for k in compiled.kernels if k.kind != "host"]
    assert "log1pf(expf(-fabsf(" in kernel.source
    assert compiled.executable.cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize("backend", ["reference", *NATIVE])
def test_grad_matches_finite_differences_and_the_closed_form(smooth_relu, backend):
    x = X[1:-1].astype(np.float64)
    with ember.config.override(enable_x64=True):
        check_grads(smooth_relu, (x,), order=2)
        grad = ember.jit(ember.grad(lambda v: lax.reduce_sum(smooth_relu(v), (0,))),
                         backend=backend)
        np.testing.assert_allclose(grad(x), 1 / (1 + np.exp(-x)), rtol=1e-12)


@pytest.mark.parametrize("backend", ["reference", *NATIVE])
def test_vmap(smooth_relu, backend):
    x = np.stack([X, -X, 2 * X])
    batched = ember.jit(ember.vmap(lambda row: lax.sub(smooth_relu(row), row)), backend=backend)
    np.testing.assert_allclose(batched(x), expected(x) - x, rtol=1e-5, atol=1e-6)


def test_ember_numpy_wraps_it_with_the_rows_promotion(smooth_relu):
    ints = np.array([[-2], [0], [3]], np.int32)
    out = getattr(jnp, NAME)(ints)
    assert out.dtype == np.float32  # "inexact": integers become the default float
    np.testing.assert_allclose(out, expected(ints.astype(np.float32)), rtol=1e-6)


def test_the_fuzzer_draws_it_and_the_backends_agree(smooth_relu):
    template = f"lax.{NAME}({{0}})"
    assert template in unary_templates()
    limits = Limits(max_steps=4, max_rank=2, max_dim=4)
    programs = (generate(RandomChoices(f"smooth relu {seed}"), limits) for seed in range(400))
    drawn = [p for p in programs if f"lax.{NAME}(" in function_source(p)][:3]
    assert drawn, "400 programs and none draws the new op"
    for program in drawn:
        report = check(program, targets=all_targets(NATIVE))
        assert not report.failures, [f.headline() for f in report.failures]
