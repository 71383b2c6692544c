"""Array API 2024.12 behaviour of the non-elementwise functions: NaN propagation in
max / min / clip, creation, fft, DLPack, scalar conversion, linalg, statistics,
manipulation and updates, on ember.numpy and NumPy 2.4 (see ``array_api_checks``).

Expected values come from the standard's definitions (computed here by hand or, for
numerics such as a matrix inverse, with NumPy in float64).
"""
from __future__ import annotations

import math
import operator

import numpy as np
import pytest

import ember
from array_api_checks import NAMESPACES, each_namespace

nan, inf = math.nan, math.inf


def _np(x) -> np.ndarray:
    return np.asarray(x)


def _close(actual, expected, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(_np(actual), expected, rtol=rtol, atol=atol)


# --- NaN propagation ---------------------------------------------------------------------------

@each_namespace()
def test_max_min_propagate_nan(xp):
    x = xp.asarray([[1.0, nan, 2.0], [0.0, -1.0, 5.0]], dtype=xp.float32)
    assert math.isnan(float(xp.max(x))) and math.isnan(float(xp.min(x)))
    assert np.isnan(_np(xp.max(x, axis=0))).tolist() == [False, True, False]
    assert np.isnan(_np(xp.min(x, axis=1))).tolist() == [True, False]
    assert _np(xp.max(x, axis=1, keepdims=True)).shape == (2, 1)


def test_max_min_propagate_nan_in_compiled_kernels():
    x = np.array([[1.0, nan, 2.0], [0.0, -1.0, 5.0]], np.float32)
    out = ember.jit(lambda v: (ember.numpy.max(v, axis=0), ember.numpy.min(v, axis=1)))(x)
    assert np.isnan(_np(out[0])).tolist() == [False, True, False]
    assert np.isnan(_np(out[1])).tolist() == [True, False]


@each_namespace()
def test_clip_nan_and_bounds(xp):
    x = xp.asarray([1.0, nan, 3.0], dtype=xp.float32)
    assert np.isnan(_np(xp.clip(x, 0.0, 2.0))).tolist() == [False, True, False]
    assert np.isnan(_np(xp.clip(x, min=xp.asarray(nan, dtype=xp.float32)))).all()
    assert np.isnan(_np(xp.clip(x, max=nan))).all()
    _close(xp.clip(xp.asarray([1.0, 5.0]), min=xp.asarray([2.0, 2.0]), max=4.0), [2.0, 4.0])
    assert _np(xp.clip(x)).tobytes() == _np(x).tobytes()  # no bounds: unchanged
    ints = xp.clip(xp.asarray([1, 5, 10], dtype=xp.int16), 2, 8)
    assert ints.dtype == xp.int16 and _np(ints).tolist() == [2, 5, 8]


# --- creation ----------------------------------------------------------------------------------

@each_namespace()
def test_arange_edge_cases(xp):
    assert _np(xp.arange(10, 0, -3)).tolist() == [10, 7, 4, 1]
    assert _np(xp.arange(5, 0)).shape == (0,) and _np(xp.arange(0, 5, -1)).shape == (0,)
    assert _np(xp.arange(0.0, 1.0, 0.3)).shape == (4,)  # ceil((stop - start) / step)
    assert _np(xp.arange(1, 2, 5)).tolist() == [1]
    assert xp.arange(3, dtype=xp.float32).dtype == xp.float32
    assert xp.arange(3, dtype=xp.uint8).dtype == xp.uint8
    assert xp.isdtype(xp.arange(3).dtype, "integral")
    assert xp.isdtype(xp.arange(0.5, 3).dtype, "real floating")
    assert _np(xp.arange(-2, 2)).tolist() == [-2, -1, 0, 1]


@each_namespace()
def test_eye_with_large_k(xp):
    for k in (3, 5, 100, -4, -100):
        assert not _np(xp.eye(3, k=k)).any(), k
    assert _np(xp.eye(2, 4, k=2)).tolist() == [[0, 0, 1, 0], [0, 0, 0, 1]]
    assert _np(xp.eye(3, 2, k=-1)).tolist() == [[0, 0], [1, 0], [0, 1]]
    assert xp.eye(2, dtype=xp.int8).dtype == xp.int8


@each_namespace()
def test_full_ones_zeros_dtype_rules(xp):
    assert xp.full((2,), True).dtype == xp.bool
    assert xp.isdtype(xp.full((2,), 3).dtype, "signed integer")
    assert xp.isdtype(xp.full((2,), 1.5).dtype, "real floating")
    assert xp.isdtype(xp.full((2,), 1j).dtype, "complex floating")
    assert xp.full((2,), 3, dtype=xp.float32).dtype == xp.float32
    assert xp.isdtype(xp.ones(2).dtype, "real floating") and xp.zeros(()).shape == ()
    assert xp.ones((2, 0)).shape == (2, 0)


@each_namespace()
def test_like_functions_keep_or_take_dtype(xp):
    x = xp.asarray([1, 2], dtype=xp.int16)
    assert xp.full_like(x, 7).dtype == xp.int16 and _np(xp.full_like(x, 7)).tolist() == [7, 7]
    assert xp.full_like(x, 2.5, dtype=xp.float32).dtype == xp.float32
    assert xp.ones_like(x).dtype == xp.int16 and xp.zeros_like(x, dtype=xp.uint8).dtype == xp.uint8
    assert xp.empty_like(x).shape == (2,) and xp.empty_like(x).dtype == xp.int16
    assert xp.full_like(xp.asarray([True]), False).dtype == xp.bool
    assert xp.zeros_like(x, device=x.device).device == x.device


@each_namespace()
def test_asarray_copy_and_device(xp):
    x = xp.asarray([1.0, 2.0], dtype=xp.float32)
    assert _np(xp.asarray(x, copy=False)).tolist() == [1.0, 2.0]
    assert _np(xp.asarray(x, copy=True)).tolist() == [1.0, 2.0]
    with pytest.raises(ValueError):  # a dtype change needs a copy
        xp.asarray(x, dtype=xp.int32, copy=False)
    with pytest.raises(ValueError):  # so does a Python list
        xp.asarray([1.0, 2.0], copy=False)
    assert xp.asarray([1.0], device=x.device).device == x.device
    assert xp.asarray(True).dtype == xp.bool and xp.asarray(1.5).ndim == 0


@each_namespace()
def test_linspace_meshgrid_tril(xp):
    _close(xp.linspace(0, 1, 5, endpoint=False), [0, 0.2, 0.4, 0.6, 0.8])
    assert xp.linspace(0, 1, 0).shape == (0,) and xp.linspace(2, 3, 1).shape == (1,)
    assert xp.linspace(0, 1, 3, dtype=xp.float32).dtype == xp.float32
    xy = xp.meshgrid(xp.arange(2), xp.arange(3))
    ij = xp.meshgrid(xp.arange(2), xp.arange(3), indexing="ij")
    assert [a.shape for a in xy] == [(3, 2), (3, 2)] and [a.shape for a in ij] == [(2, 3)] * 2
    assert _np(xp.triu(xp.ones((3, 3)), k=1)).sum() == 3
    assert _np(xp.tril(xp.ones((2, 3, 3)), k=-1)).sum() == 6


# --- fft ---------------------------------------------------------------------------------------

Z = np.arange(12, dtype=np.complex64).reshape(3, 4) * (1 - 0.5j)


@each_namespace()
def test_fft_n_axis_norm(xp):
    z = xp.asarray(Z)
    for norm in ("backward", "ortho", "forward"):
        _close(xp.fft.fft(z, n=6, axis=0, norm=norm), np.fft.fft(Z, n=6, axis=0, norm=norm),
               rtol=1e-4, atol=1e-4)
        _close(xp.fft.ifft(xp.fft.fft(z, norm=norm), norm=norm), Z, rtol=1e-4, atol=1e-4)
    assert xp.fft.fft(z, n=3).shape == (3, 3) and xp.fft.fft(z).dtype == xp.complex64


@each_namespace()
def test_fftn_s_axes(xp):
    z = xp.asarray(Z)
    _close(xp.fft.fftn(z, s=(2, 5)), np.fft.fftn(Z, s=(2, 5)), rtol=1e-4, atol=1e-4)
    _close(xp.fft.fftn(z, axes=(1,)), np.fft.fftn(Z, axes=(1,)), rtol=1e-4, atol=1e-4)
    _close(xp.fft.ifftn(z, s=(4,), axes=(0,)), np.fft.ifftn(Z, s=(4,), axes=(0,)),
           rtol=1e-4, atol=1e-4)


@each_namespace()
def test_real_ffts_shapes_and_dtypes(xp):
    x = xp.asarray(np.arange(8, dtype=np.float32))
    assert xp.fft.rfft(x).shape == (5,) and xp.fft.rfft(x).dtype == xp.complex64
    assert xp.fft.rfft(x, n=5).shape == (3,)
    spectrum = xp.fft.rfft(x)
    assert xp.fft.irfft(spectrum).dtype == xp.float32 and xp.fft.irfft(spectrum).shape == (8,)
    assert xp.fft.irfft(spectrum, n=9).shape == (9,)
    _close(xp.fft.irfft(spectrum), np.arange(8), atol=1e-4)
    grid = xp.asarray(np.ones((4, 6), np.float32))
    assert xp.fft.rfftn(grid).shape == (4, 4) and xp.fft.rfftn(grid, axes=(0,)).shape == (3, 6)
    assert xp.fft.irfftn(xp.fft.rfftn(grid), s=(4, 6)).shape == (4, 6)
    assert xp.fft.hfft(spectrum).dtype == xp.float32 and xp.fft.ihfft(x).dtype == xp.complex64


@each_namespace(numpy_deviates="np.fft.fftfreq / rfftfreq take no dtype= (NumPy 2.4)")
def test_fftfreq_dtype_and_device(xp):
    assert xp.fft.fftfreq(5, dtype=xp.float32).dtype == xp.float32
    assert xp.fft.rfftfreq(6, d=2.0, dtype=xp.float32).dtype == xp.float32
    device = xp.ones(1).device
    assert xp.fft.fftfreq(4, device=device, dtype=xp.float32).device == device


@each_namespace()
def test_fftfreq_values_and_shifts(xp):
    assert xp.isdtype(xp.fft.fftfreq(5).dtype, "real floating")
    _close(xp.fft.fftfreq(5, d=0.5), [0, 0.4, 0.8, -0.8, -0.4])
    _close(xp.fft.rfftfreq(6, d=2.0), [0, 1 / 12, 2 / 12, 3 / 12])
    assert _np(xp.fft.fftshift(xp.arange(5))).tolist() == [3, 4, 0, 1, 2]
    assert _np(xp.fft.ifftshift(xp.arange(5))).tolist() == [2, 3, 4, 0, 1]
    grid = xp.reshape(xp.arange(6), (2, 3))
    assert _np(xp.fft.fftshift(grid, axes=(1,))).tolist() == [[2, 0, 1], [5, 3, 4]]


# --- DLPack ------------------------------------------------------------------------------------

@pytest.mark.parametrize("producer", NAMESPACES.values(), ids=NAMESPACES.keys())
@each_namespace()
def test_from_dlpack_with_device_and_copy(xp, producer):
    source = producer.asarray([1.0, 2.0, 3.0], dtype=producer.float32)
    device = xp.ones(1).device
    for kwargs in ({}, {"copy": True}, {"copy": None}, {"device": device}):
        out = xp.from_dlpack(source, **kwargs)
        assert _np(out).tolist() == [1.0, 2.0, 3.0] and out.dtype == xp.float32, kwargs
    assert source.__dlpack_device__() == (1, 0)  # kDLCPU, device 0
    capsule = source.__dlpack__(max_version=(1, 0), dl_device=(1, 0), copy=True)
    assert type(capsule).__name__ == "PyCapsule"
    assert _np(np.from_dlpack(source)).tolist() == [1.0, 2.0, 3.0]  # any version's consumer


def test_ember_dlpack_legacy_consumers_get_a_copy():
    """Ember's buffers are read-only, which DLPack before 1.0 cannot say: export a copy."""
    x = ember.numpy.asarray([1.0, 2.0])
    assert type(x.__dlpack__()).__name__ == "PyCapsule"
    with pytest.raises(BufferError, match="read-only"):
        x.__dlpack__(copy=False)


# --- scalar conversion -------------------------------------------------------------------------

@each_namespace()
def test_python_scalar_conversions(xp):
    f, i, b, c = (xp.asarray(2.5, dtype=xp.float32), xp.asarray(-3, dtype=xp.int16),
                  xp.asarray(True), xp.asarray(1 + 2j, dtype=xp.complex64))
    assert bool(f) is True and bool(xp.asarray(0.0)) is False and bool(b) is True
    assert int(f) == 2 and int(xp.asarray(-2.5)) == -2 and int(i) == -3 and int(b) == 1
    assert float(i) == -3.0 and float(b) == 1.0 and isinstance(float(f), float)
    assert complex(c) == 1 + 2j and complex(f) == 2.5 + 0j and complex(b) == 1 + 0j
    assert i.__index__() == -3 and [10, 20, 30, 40][xp.asarray(2)] == 30
    with pytest.raises(TypeError):
        f.__index__()
    with pytest.raises(ValueError):
        int(xp.asarray(nan))
    with pytest.raises(OverflowError):
        int(xp.asarray(inf))
    assert math.isnan(float(xp.asarray(nan))) and float(xp.asarray(-inf)) == -inf
    for convert in (int, float, operator.index):  # complex to real, bool to index: TypeError
        with pytest.raises(TypeError):
            convert(c if convert is not operator.index else b)
    assert bool(xp.asarray(0j)) is False and bool(xp.asarray(1e-30j)) is True


# --- linalg ------------------------------------------------------------------------------------

RNG = np.random.default_rng(0)
A = (RNG.standard_normal((4, 3, 3)) + 3 * np.eye(3)).astype(np.float32)
B = RNG.standard_normal((4, 3, 2)).astype(np.float32)


@each_namespace()
def test_solve_broadcasts(xp):
    a = xp.asarray(A)
    _close(xp.linalg.solve(a, xp.asarray(B)), np.linalg.solve(A, B), rtol=1e-4, atol=1e-5)
    _close(xp.linalg.solve(a, xp.asarray(B[:1])), np.linalg.solve(A, B[:1]), rtol=1e-4,
           atol=1e-5)
    vector = B[0, :, 0]  # (M,): one right-hand side for every matrix in the batch
    expected = np.stack([np.linalg.solve(m, vector) for m in A])
    _close(xp.linalg.solve(a, xp.asarray(vector)), expected, rtol=1e-4, atol=1e-5)


@each_namespace()
def test_inv_pinv(xp):
    _close(xp.linalg.inv(xp.asarray(A)), np.linalg.inv(A.astype(np.float64)), rtol=1e-4,
           atol=1e-5)
    wide = RNG.standard_normal((2, 3, 5)).astype(np.float32)
    _close(xp.linalg.pinv(xp.asarray(wide)), np.linalg.pinv(wide.astype(np.float64)),
           rtol=1e-3, atol=1e-4)
    assert xp.linalg.pinv(xp.asarray(wide), rtol=0.5).shape == (2, 5, 3)


@each_namespace()
def test_cross_outer_tensordot(xp):
    u = xp.asarray([1.0, 0.0, 0.0])
    v = xp.asarray([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    assert _np(xp.linalg.cross(u, v)).tolist() == [[0, 0, 1], [0, -1, 0]]  # broadcasting
    columns = xp.asarray(np.ones((3, 2), np.float32))
    assert xp.linalg.cross(columns, columns, axis=0).shape == (3, 2)
    assert _np(xp.linalg.outer(xp.asarray([1.0, 2.0]), xp.asarray([1.0, 2.0, 3.0]))).tolist() \
        == [[1, 2, 3], [2, 4, 6]]
    x, y = np.arange(24.0).reshape(2, 3, 4), np.arange(60.0).reshape(3, 4, 5)
    _close(xp.tensordot(xp.asarray(x), xp.asarray(y), axes=2), np.tensordot(x, y, 2))
    _close(xp.linalg.tensordot(xp.asarray(x), xp.asarray(y), axes=((1, 2), (0, 1))),
           np.tensordot(x, y, ((1, 2), (0, 1))))
    assert xp.tensordot(xp.asarray(x), xp.asarray(x), axes=0).shape == (2, 3, 4, 2, 3, 4)


@each_namespace()
def test_vecdot_conjugates_and_matmul_broadcasts(xp):
    assert complex(xp.vecdot(xp.asarray([1j, 2]), xp.asarray([1j, 1]))) == 3 + 0j
    assert xp.vecdot(xp.ones((2, 3)), xp.ones((2, 1)), axis=0).shape == (3,)
    assert xp.matmul(xp.ones((2, 1, 3, 4)), xp.ones((5, 4, 2))).shape == (2, 5, 3, 2)
    assert xp.matrix_transpose(xp.ones((2, 3, 4))).shape == (2, 4, 3)


@each_namespace()
def test_standard_linalg_names(xp):
    m = np.array([[4.0, 1.0], [1.0, 3.0]], np.float32)
    a = xp.asarray(m)
    _close(xp.linalg.cholesky(a, upper=True), np.linalg.cholesky(m).T, atol=1e-5)
    _close(xp.linalg.det(a), 11.0)
    sign, logabsdet = xp.linalg.slogdet(a)
    assert float(sign) == 1.0 and math.isclose(float(logabsdet), math.log(11), rel_tol=1e-5)
    _close(xp.linalg.eigvalsh(a), np.linalg.eigvalsh(m))
    assert xp.linalg.eigh(a).eigenvalues.shape == (2,)
    _close(xp.linalg.matrix_power(a, -1), np.linalg.inv(m), atol=1e-5)
    assert int(xp.linalg.matrix_rank(xp.ones((3, 3)))) == 1
    q, r = xp.linalg.qr(xp.ones((4, 3)))
    assert q.shape == (4, 3) and r.shape == (3, 3)
    assert xp.linalg.qr(xp.ones((4, 3)), mode="complete").Q.shape == (4, 4)
    u, s, vh = xp.linalg.svd(xp.ones((4, 3)), full_matrices=False)
    assert (u.shape, s.shape, vh.shape) == ((4, 3), (3,), (3, 3))
    assert xp.linalg.svdvals(xp.ones((2, 4, 3))).shape == (2, 3)
    _close(xp.linalg.trace(xp.ones((2, 3, 3)), offset=1), [2.0, 2.0])
    assert xp.linalg.diagonal(xp.ones((2, 3, 3)), offset=-1).shape == (2, 2)
    g = np.arange(6.0).reshape(2, 3)
    _close(xp.linalg.matrix_norm(xp.asarray(g)), np.linalg.norm(g))
    assert xp.linalg.matrix_norm(xp.asarray(g), ord="nuc", keepdims=True).shape == (1, 1)
    _close(xp.linalg.vector_norm(xp.asarray(g), axis=(0, 1), ord=1), 15.0)
    _close(xp.linalg.vector_norm(xp.asarray(g), ord=inf, axis=1), [2.0, 5.0])
    _close(xp.linalg.vector_norm(xp.asarray(g), ord=0), 5.0)


# --- statistics --------------------------------------------------------------------------------

X = np.arange(1.0, 7.0, dtype=np.float32).reshape(2, 3)


@each_namespace()
def test_var_std_correction(xp):
    x = xp.asarray(X)
    _close(xp.var(x, correction=1), np.var(X, ddof=1))
    _close(xp.std(x, axis=0, correction=1.5), np.sqrt(((X - X.mean(0)) ** 2).sum(0) / 0.5))
    _close(xp.var(x, axis=1, keepdims=True), np.var(X, axis=1, keepdims=True))
    assert xp.var(x, axis=1, keepdims=True).shape == (2, 1)


@each_namespace()
def test_sum_prod_mean_dtypes(xp):
    small = xp.asarray([1, 2, 3], dtype=xp.int8)
    assert xp.isdtype(xp.sum(small).dtype, "signed integer")
    assert xp.iinfo(xp.sum(small).dtype).bits >= 32  # the default integer, not int8
    assert xp.isdtype(xp.prod(xp.asarray([1, 2], dtype=xp.uint8)).dtype, "unsigned integer")
    assert xp.sum(small, dtype=xp.int16).dtype == xp.int16
    assert xp.prod(small, dtype=xp.int16).dtype == xp.int16
    assert xp.sum(xp.asarray([1.5], dtype=xp.float32)).dtype == xp.float32
    assert xp.sum(xp.asarray([1j], dtype=xp.complex64)).dtype == xp.complex64
    assert xp.mean(xp.asarray(X), axis=0).dtype == xp.float32
    _close(xp.mean(xp.asarray(X), axis=0), X.mean(0))


@each_namespace()
def test_cumulative_sum_prod(xp):
    x = xp.asarray([1, 2, 3])
    assert _np(xp.cumulative_sum(x, include_initial=True)).tolist() == [0, 1, 3, 6]
    assert _np(xp.cumulative_prod(x, include_initial=True)).tolist() == [1, 1, 2, 6]
    assert _np(xp.cumulative_sum(xp.asarray(X), axis=1)).tolist() == [[1, 3, 6], [4, 9, 15]]
    assert xp.cumulative_sum(xp.asarray([1, 2], dtype=xp.int8), dtype=xp.int16).dtype \
        == xp.int16


# --- manipulation and searching ---------------------------------------------------------------

@each_namespace()
def test_tile_repeat(xp):
    assert _np(xp.tile(xp.asarray([1, 2]), (2, 2))).tolist() == [[1, 2, 1, 2], [1, 2, 1, 2]]
    assert xp.tile(xp.ones((2, 3)), (2,)).shape == (2, 6)
    assert xp.tile(xp.asarray([1, 2]), (2, 1, 1)).shape == (2, 1, 2)
    x = xp.asarray(X)
    assert xp.repeat(x, 2).shape == (12,) and xp.repeat(x, 2, axis=1).shape == (2, 6)
    assert _np(xp.repeat(xp.asarray([1, 2, 3]), xp.asarray([1, 0, 2]))).tolist() == [1, 3, 3]
    assert xp.repeat(x, xp.asarray([2]), axis=0).shape == (4, 3)


@each_namespace()
def test_squeeze_expand_dims_errors(xp):
    assert xp.squeeze(xp.ones((1, 3, 1)), axis=(0, 2)).shape == (3,)
    assert xp.squeeze(xp.ones((1, 3, 1)), axis=-1).shape == (1, 3)
    with pytest.raises(ValueError):
        xp.squeeze(xp.ones((2, 3)), axis=0)  # not a singleton axis
    assert xp.expand_dims(xp.ones((2, 3)), axis=-1).shape == (2, 3, 1)
    assert xp.expand_dims(xp.ones((2, 3)), axis=-3).shape == (1, 2, 3)
    with pytest.raises(IndexError):
        xp.expand_dims(xp.ones((2, 3)), axis=3)


@each_namespace()
def test_unstack_broadcast_to_and_friends(xp):
    x = xp.asarray(X)
    parts = xp.unstack(x, axis=1)
    assert isinstance(parts, tuple) and [p.shape for p in parts] == [(2,)] * 3
    assert _np(xp.broadcast_to(xp.asarray([1, 2, 3]), (2, 3))).tolist() == [[1, 2, 3]] * 2
    with pytest.raises(ValueError):
        xp.broadcast_to(xp.asarray([1, 2, 3]), (2, 2))
    assert xp.concat([x, x], axis=None).shape == (12,)
    assert _np(xp.roll(x, (1, 1), axis=(0, 1))).tolist() == [[6, 4, 5], [3, 1, 2]]
    assert _np(xp.flip(x, axis=(0, 1))).tolist() == [[6, 5, 4], [3, 2, 1]]
    assert xp.moveaxis(xp.ones((2, 3, 4)), 0, -1).shape == (3, 4, 2)
    assert xp.permute_dims(xp.ones((2, 3, 4)), (2, 0, 1)).shape == (4, 2, 3)
    assert xp.stack([x, x], axis=-1).shape == (2, 3, 2)
    assert [a.shape for a in xp.broadcast_arrays(xp.ones((2, 1)), xp.ones(3))] == [(2, 3)] * 2


@each_namespace()
def test_searching_and_utility_functions(xp):
    counts = xp.count_nonzero(xp.asarray([[0, 1], [2, 0]]), axis=0)
    assert _np(counts).tolist() == [1, 1]
    assert xp.count_nonzero(xp.asarray([[0, 1], [2, 0]]), keepdims=True).shape == (1, 1)
    assert _np(xp.diff(xp.asarray([1, 4, 9]), prepend=xp.asarray([0]))).tolist() == [1, 3, 5]
    assert _np(xp.diff(xp.asarray(X), axis=0)).tolist() == [[3, 3, 3]]
    found = xp.searchsorted(xp.asarray([1.0, 2.0, 3.0]), xp.asarray([2.0, 2.5]), side="right")
    assert _np(found).tolist() == [2, 2]
    assert _np(xp.where(xp.asarray([True, False]), 1.5, xp.asarray([0.0, 0.0]))).tolist() \
        == [1.5, 0.0]  # 2024.12: scalars in where
    assert _np(xp.take_along_axis(xp.asarray(X), xp.asarray([[2], [0]]))).tolist() == [[3], [4]]
    assert _np(xp.take(xp.asarray(X), xp.asarray([2, 0]), axis=1)).tolist() == [[3, 1], [6, 4]]


@each_namespace(numpy_deviates="np.sort / np.argsort have no descending= (NumPy 2.4)")
def test_sort_descending_is_stable(xp):
    x = xp.asarray([3, 1, 2, 1, 3])
    assert _np(xp.argsort(x, descending=True)).tolist() == [0, 4, 2, 1, 3]
    assert _np(xp.sort(x, descending=True)).tolist() == [3, 3, 2, 1, 1]


@each_namespace()
def test_binary_functions_take_python_scalars(xp):
    """2024.12: either argument of a binary elementwise function may be a Python scalar."""
    x = xp.asarray([1.0, 4.0], dtype=xp.float32)
    for name, scalar in (("add", 1), ("subtract", 1.5), ("multiply", 2), ("divide", 2.0),
                         ("pow", 2), ("maximum", 2.0), ("atan2", 1.0), ("hypot", 3.0),
                         ("copysign", -1.0), ("logaddexp", 0.0), ("nextafter", 0.0),
                         ("equal", 1.0), ("less", 2.0)):
        fn, reference = getattr(xp, name), getattr(np, name)
        for out, expected in ((fn(x, scalar), reference(np.float32([1.0, 4.0]), scalar)),
                              (fn(scalar, x), reference(scalar, np.float32([1.0, 4.0])))):
            assert out.shape == (2,) and out.dtype in (xp.float32, xp.bool), (name, out.dtype)
            _close(out, expected)
    ints = xp.asarray([1, 8], dtype=xp.int16)
    assert xp.bitwise_left_shift(ints, 1).dtype == xp.int16
    assert _np(xp.bitwise_right_shift(ints, 2)).tolist() == [0, 2]


# --- updates: Ember arrays are immutable, as JAX's ------------------------------------------

def _masked_update(xp, x, mask, value):
    """``x[mask] = value`` where arrays are mutable, ``x.at[mask].set(value)`` where not."""
    if xp is np:
        x = x.copy()
        x[mask] = value
        return x
    return x.at[mask].set(value)


@each_namespace()
def test_setitem_with_masks(xp):
    x = xp.asarray(X)
    mask = xp.asarray([[True, False, True], [False, False, True]])
    assert _np(_masked_update(xp, x, mask, 0.0)).tolist() == [[0, 2, 0], [4, 5, 0]]
    assert _np(_masked_update(xp, x, x > 3, xp.asarray([7.0, 8.0, 9.0]))).tolist() \
        == [[1, 2, 3], [7, 8, 9]]
    assert _np(_masked_update(xp, x, xp.asarray([True, False]), -1.0)).tolist() \
        == [[-1, -1, -1], [4, 5, 6]]  # a mask over the leading axis
    assert _np(_masked_update(xp, x, xp.asarray(False), -1.0)).tolist() == X.tolist()


def test_ember_setitem_raises_as_jax():
    x = ember.numpy.asarray(X)
    with pytest.raises(TypeError, match=r"immutable.*x\.at\[idx\]\.set\(y\)"):
        x[x > 3] = 0.0
    jnp = pytest.importorskip("jax.numpy")
    with pytest.raises(TypeError, match="immutable"):
        y = jnp.asarray(X)
        y[y > 3] = 0.0


def test_traced_mask_updates_raise_an_index_error_as_jax():
    """Under jit a traced boolean mask cannot index (JAX: NonConcreteBooleanIndexError, an
    IndexError); the message points to where()."""
    x = np.arange(3.0, dtype=np.float32)
    with pytest.raises(IndexError, match=r"concrete mask.*where\(mask, x, other\)"):
        ember.jit(lambda v: v.at[v > 1].set(0.0))(x)
    jax = pytest.importorskip("jax")
    with pytest.raises(IndexError):
        jax.jit(lambda v: v.at[v > 1].set(0.0))(x)
