"""lax.bitcast_convert_type: NumPy's ``view`` semantics on every backend, fused into one
kernel, compiled for CUDA without a GPU, and the same answers as JAX."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import lax
from ember.core import dtypes
from ember.errors import EmberError

SPECIAL_FLOATS = [0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan, 1e-40, 3.4e38, 7.0e-3]
SAME_WIDTH = [(np.float32, np.uint32), (np.float32, np.int32), (np.int32, np.float32),
              (np.uint32, np.float32), (np.float16, np.int16), (np.uint16, np.float16),
              (np.int8, np.uint8), (np.uint16, np.int16)]
if dtypes.bfloat16 is not None:
    SAME_WIDTH += [(dtypes.bfloat16, np.uint16), (np.int16, dtypes.bfloat16),
                   (np.float16, dtypes.bfloat16)]
X64_SAME_WIDTH = [(np.float64, np.uint64), (np.int64, np.float64), (np.float64, np.int64)]


def _values(dtype, rng) -> np.ndarray:
    """Edge values of ``dtype``: signed zeros, infinities and NaNs of both signs for floats."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f" or dtype == dtypes.bfloat16:
        with np.errstate(over="ignore"):
            base = np.array(SPECIAL_FLOATS, np.float64).astype(dtype)
        return np.concatenate([base, -base[6:7]])  # a NaN with its sign bit set
    info = np.iinfo(dtype)
    return np.concatenate([np.array([info.min, info.max, 0, 1], dtype),
                           rng.integers(info.min, info.max, 12, dtype=dtype, endpoint=True)])


def _expected(x: np.ndarray, target) -> np.ndarray:
    return x.view(np.dtype(target))


def _half_nan_payloads_dropped(bits: np.ndarray, half) -> np.ndarray:
    """16-bit patterns with every NaN of ``half`` reduced to its sign (see the module
    doc of ember.ops.bitcast: half precision is computed in float32)."""
    bits = bits.view(np.uint16)
    values = bits.view(half).astype(np.float32)
    return np.where(np.isnan(values), (bits & 0x8000) | 0x7FFF, bits)


@pytest.mark.parametrize("source,target", SAME_WIDTH, ids=str)
def test_same_width_is_numpys_view_on_every_backend(backend, source, target):
    x = _values(source, np.random.default_rng(0))
    got = np.asarray(ember.jit(lambda v: lax.bitcast_convert_type(v, target))(x))
    want = _expected(x, target)
    assert got.dtype == np.dtype(target)
    halves = [d for d in (source, target) if np.dtype(d) in (np.float16, dtypes.bfloat16)]
    if halves:
        got, want = (_half_nan_payloads_dropped(v, halves[0]) for v in (got, want))
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("source,target", X64_SAME_WIDTH, ids=str)
def test_64_bit_same_width_on_every_backend(backend, x64, source, target):
    x = _values(source, np.random.default_rng(1))
    got = ember.jit(lambda v: lax.bitcast_convert_type(v, target))(x)
    np.testing.assert_array_equal(np.asarray(got).view(np.uint8), _expected(x, target).view(np.uint8))


@pytest.mark.parametrize("source,target", [(np.float32, np.uint8), (np.int32, np.int16),
                                           (np.float32, np.int16)], ids=str)
def test_narrower_dtype_adds_a_trailing_axis_lowest_bits_first(backend, source, target):
    x = _values(source, np.random.default_rng(2))[:10].reshape(2, 5)
    got = ember.jit(lambda v: lax.bitcast_convert_type(v, target))(x)
    want = x.view(np.dtype(target)).reshape(*x.shape, -1)
    assert got.shape == want.shape
    np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.parametrize("source,target", [(np.uint8, np.float32), (np.int16, np.uint32),
                                           (np.int8, np.int64)], ids=str)
def test_wider_dtype_joins_the_trailing_axis(backend, x64, source, target):
    ratio = np.dtype(target).itemsize // np.dtype(source).itemsize
    x = np.random.default_rng(3).integers(0, 256, (3, 2, ratio * np.dtype(source).itemsize),
                                          dtype=np.uint8).view(source)
    got = ember.jit(lambda v: lax.bitcast_convert_type(v, target))(x)
    want = x.view(np.dtype(target)).reshape(x.shape[:-1])
    assert got.shape == want.shape
    np.testing.assert_array_equal(np.asarray(got).view(np.uint8), want.view(np.uint8))


def test_wrong_trailing_axis_and_bool_or_complex_are_refused():
    with pytest.raises(EmberError, match="last axis must have length 4"):
        lax.bitcast_convert_type(np.zeros((2, 3), np.uint8), np.float32)
    with pytest.raises(EmberError, match="bool or complex"):
        lax.bitcast_convert_type(np.array([True]), np.uint8)
    with pytest.raises(EmberError, match="bool or complex"):
        lax.bitcast_convert_type(np.array([1j], np.complex64), np.float32)


def test_fuses_with_its_neighbours_into_one_kernel():
    if "cpu" not in ember.runtime.devices.available_backends():
        pytest.skip("no C compiler: the CPU backend is absent")

    def next_float(x):
        bits = lax.bitcast_convert_type(x * 2.0, np.int32)
        return lax.bitcast_convert_type(bits + 1, np.float32) - x

    x = np.linspace(-3, 3, 64, dtype=np.float32)
    compiled = ember.jit(next_float, backend="cpu").lower(x).compile()
    assert [k.kind for k in compiled.kernels] == ["kernel"]
    assert "ember_f32_to_bits" in compiled.kernels[0].source
    np.testing.assert_array_equal(compiled(x), (x * 2).view(np.int32).__add__(1).view(np.float32) - x)


def test_vmap_and_zero_derivative():
    x = np.array([[1.0, -0.0], [np.nan, 2.0]], np.float32)
    got = ember.vmap(lambda row: lax.bitcast_convert_type(row, np.uint32), in_axes=1)(x)
    np.testing.assert_array_equal(got, x.T.view(np.uint32))
    grad = ember.grad(lambda v: lax.convert_element_type(
        lax.bitcast_convert_type(v, np.int32), np.float32) + v)(np.float32(1.5))
    assert float(grad) == 1.0


def test_cuda_source_compiles_for_sm_90():
    from ember.backends.cuda.driver import gpus
    from ember.backends.cuda.nvrtc import nvrtc_version

    if nvrtc_version() is None or gpus():
        pytest.skip("needs NVRTC and no GPU (compile-only mode)")

    def fun(x, h, i):
        return (lax.bitcast_convert_type(x, np.uint32), lax.bitcast_convert_type(i, np.float32),
                lax.bitcast_convert_type(h, np.int16), lax.bitcast_convert_type(x, np.uint8))

    args = (np.ones(8, np.float32), np.ones(8, np.float16), np.ones(8, np.int32))
    compiled = ember.jit(fun, backend="cuda").lower(*args).compile()
    source = "\n".join(k.source for k in compiled.kernels)
    assert "__float_as_uint" in source and "__uint_as_float" in source
    assert compiled.executable.cubin[:4] == b"\x7fELF"


def test_answers_as_jax():
    jax = pytest.importorskip("jax")
    x = _values(np.float32, np.random.default_rng(4))
    for target in (np.uint32, np.int32, np.uint8, np.int16):
        ours = np.asarray(lax.bitcast_convert_type(x, target))
        theirs = np.asarray(jax.lax.bitcast_convert_type(x, target))
        np.testing.assert_array_equal(ours, theirs)
    packed = x.view(np.uint8).reshape(-1, 4)
    np.testing.assert_array_equal(np.asarray(lax.bitcast_convert_type(packed, np.float32)).view(np.uint32),
                                  np.asarray(jax.lax.bitcast_convert_type(packed, np.float32)).view(np.uint32))
