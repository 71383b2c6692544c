"""Convolutions on the CPU backend: the covered ones (float32 / float64, grouped or not)
compile to im2col + GEMM (ember/passes/im2col.py, no host call), the rest stay host calls; all
against the reference backend, forward and gradient."""
from __future__ import annotations

import re

import numpy as np
import pytest
from cpu_testing import assert_matches_reference, compiled, requires_cpu

import ember
from ember import lax

pytestmark = requires_cpu

# (lhs shape NCH.., rhs shape OIH.., strides, padding, lhs_dilation, rhs_dilation)
CASES = {
    "2d_valid": ((2, 3, 9, 8), (4, 3, 3, 2), (1, 1), "VALID", None, None),
    "2d_same_strided": ((2, 3, 9, 8), (4, 3, 3, 3), (2, 2), "SAME", None, None),
    "2d_asymmetric": ((1, 2, 7, 6), (3, 2, 2, 3), (2, 1), ((1, 2), (0, 1)), None, None),
    "2d_negative_padding": ((1, 2, 7, 6), (3, 2, 2, 2), (1, 1), ((-1, 1), (2, -2)), None,
                            None),
    "2d_dilated": ((2, 2, 10, 9), (3, 2, 3, 2), (1, 2), ((1, 1), (2, 0)), (1, 2), (2, 1)),
    "2d_big_kernel": ((2, 3, 6, 6), (2, 3, 5, 5), (1, 1), "VALID", None, None),
    "1d": ((3, 2, 11), (4, 2, 3), (2,), ((2, 1),), (1,), (2,)),
    "1d_lhs_dilated": ((1, 1, 5), (2, 1, 2), (1,), ((1, 1),), (3,), (1,)),
}


def _args(case, dtype):
    rng = np.random.default_rng(0)
    lhs, rhs = case[0], case[1]
    return (rng.standard_normal(lhs).astype(dtype), rng.standard_normal(rhs).astype(dtype))


def _conv(case, layout):
    """The case's convolution with channels first (NCHW / OIHW) or last (NHWC / HWIO)."""
    _, _, strides, padding, lhs_dilation, rhs_dilation = case
    nspatial = len(strides)

    def fun(x, w):
        if layout == "last":
            x = lax.transpose(x, (0, *range(2, nspatial + 2), 1))
            w = lax.transpose(w, (*range(2, nspatial + 2), 1, 0))
            spatial = "HW"[:nspatial] if nspatial == 2 else "H"
            numbers = (f"N{spatial}C", f"{spatial}IO", f"N{spatial}C")
        else:
            numbers = None
        return lax.conv_general_dilated(x, w, strides, padding, lhs_dilation, rhs_dilation,
                                        dimension_numbers=numbers)
    return fun


def _assert_no_host_call(fun, *args):
    kinds = [k.kind for k in compiled(fun, *args).kernels]
    assert "host" not in kinds, kinds


@pytest.mark.parametrize("layout", ["first", "last"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_convolution_matches_the_reference_without_host_calls(name, layout):
    case = CASES[name]
    args = _args(case, np.float32)
    assert_matches_reference(_conv(case, layout), *args, tolerance=(2e-5, 2e-5))
    _assert_no_host_call(_conv(case, layout), *args)


@pytest.mark.parametrize("name", ["2d_dilated", "1d"])
def test_float64_convolution_matches_the_reference(name, x64):
    case = CASES[name]
    args = _args(case, np.float64)
    assert_matches_reference(_conv(case, "last"), *args)
    _assert_no_host_call(_conv(case, "last"), *args)


@pytest.mark.parametrize("name", ["2d_same_strided", "2d_dilated", "1d"])
def test_convolution_gradients_have_no_host_calls(name):
    case = CASES[name]
    args = _args(case, np.float32)
    grad = ember.grad(lambda x, w: (_conv(case, "first")(x, w) ** 2).sum(), argnums=(0, 1))
    assert_matches_reference(grad, *args, tolerance=(1e-4, 1e-4))
    _assert_no_host_call(grad, *args)


def test_conv2d_layer_loss_gradient():
    layer = ember.nn.Conv2d.init(ember.random.PRNGKey(0), 3, 4, 3, padding=((1, 0), (1, 2)))
    x = np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32)

    def loss(model, x):
        return (ember.numpy.tanh(model(x)) ** 2).mean()

    grad = ember.grad(loss)
    assert_matches_reference(grad, layer, x, tolerance=(1e-4, 1e-6))
    _assert_no_host_call(grad, layer, x)


# (lhs shape, rhs shape, feature_group_count, batch_group_count)
GROUPED = {
    "groups_2": ((2, 4, 6, 6), (6, 2, 3, 3), 2, 1),
    "depthwise": ((2, 4, 7, 5), (8, 1, 3, 3), 4, 1),  # channel multiplier 2
    "batch_groups_3": ((6, 2, 5, 5), (9, 2, 2, 2), 1, 3),
}


@pytest.mark.parametrize("name", sorted(GROUPED))
def test_grouped_convolutions_forward_and_gradients(name):
    lhs, rhs, groups, batch_groups = GROUPED[name]
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal(lhs).astype(np.float32), rng.standard_normal(rhs).astype(np.float32)

    def conv(x, w):
        return lax.conv_general_dilated(x, w, (1, 1), "SAME", feature_group_count=groups,
                                        batch_group_count=batch_groups)

    assert_matches_reference(conv, x, w, tolerance=(2e-5, 2e-5))
    _assert_no_host_call(conv, x, w)
    if batch_groups == 1:  # (the gradient of a grouped convolution has batch groups)
        grad = ember.grad(lambda x, w: (conv(x, w) ** 2).sum(), argnums=(0, 1))
        assert_matches_reference(grad, x, w, tolerance=(1e-4, 1e-4))
        _assert_no_host_call(grad, x, w)


def test_uncovered_convolutions_stay_host_calls():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 2, 6, 6)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3, 3)).astype(np.float32)
    ints = (x * 4).astype(np.int32), w.astype(np.int32) * 0 + 1

    def integer(x, w):
        return lax.conv_general_dilated(x, w, (1, 1), "VALID")

    assert_matches_reference(integer, *ints)
    assert "host" in [k.kind for k in compiled(integer, *ints).kernels]


def test_the_patch_matrix_is_one_kernel_reading_the_padded_input():
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((4, 8, 12, 12)), rng.standard_normal((16, 8, 3, 3))
    x, w = x.astype(np.float32), w.astype(np.float32)

    def fun(x, w):
        return lax.conv_general_dilated(x, w, (1, 1), "SAME")

    assert_matches_reference(fun, x, w, tolerance=(1e-4, 1e-4))
    # the padding, the patches (one gather, no slices stored and concatenated), the GEMM,
    # its (N, H, W, O) product to NCHW
    kernels = compiled(fun, x, w).kernels
    kinds = [(k.kind, "gather" in k.ops) for k in kernels]
    assert kinds == [("kernel", False), ("kernel", True), ("library", False),
                     ("kernel", False)], kinds
    # The gather reads the padding's flattened reshape in place, so the padding is
    # stored in its own shape: rows, vectorized, no division per element.
    padding, patches = kernels[0].source, kernels[1].source
    assert "#pragma omp simd" in padding and not re.search(r"\)\s*[/%]\s*\d", padding)
    # The patches are stored (N, H, W, C, KH, KW) for the GEMM to read as (N, P, C, T):
    # a loop per axis, no position decomposed by division per element.
    assert not re.search(r"\)\s*[/%]\s*\d", patches), patches


def test_a_convolution_with_many_taps_and_positions_stays_a_host_call():
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((1, 1, 140)), rng.standard_normal((1, 1, 70))
    x, w = x.astype(np.float32), w.astype(np.float32)

    def fun(x, w):  # 70 taps and 71 positions: more slices than MAX_SLICES either way
        return lax.conv_general_dilated(x, w, (1,), "VALID")

    assert_matches_reference(fun, x, w, tolerance=(1e-4, 1e-4))
    assert "host" in [k.kind for k in compiled(fun, x, w).kernels]


def test_a_convolution_in_a_loop_body_is_lowered_too():
    case = CASES["2d_dilated"]
    x, w = _args(case, np.float32)
    conv = _conv(case, "first")

    def fun(x, w):
        return lax.fori_loop(0, 2, lambda i, y: y + conv(x, w * i), conv(x, w))

    assert_matches_reference(fun, x, w, tolerance=(1e-4, 1e-4))
    program = compiled(fun, x, w)
    assert [k.ops for k in program.kernels if k.kind == "host"] == [["scan"]]
    assert "conv_general_dilated" not in program.as_text()  # (the body included)
