"""lax.fft against numpy.fft; errors; jit vs eager."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ember
from ember import lax
from ember.errors import EmberTypeError, EmberValueError
from ember.test_util import check_grads, check_vmap

NUMPY = {"FFT": np.fft.fftn, "IFFT": np.fft.ifftn, "RFFT": np.fft.rfftn,
         "IRFFT": np.fft.irfftn}


@st.composite
def fft_problem(draw):
    fft_type = draw(st.sampled_from(sorted(NUMPY)))
    batch = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    lengths = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=3)))
    trailing = (*lengths[:-1], lengths[-1] // 2 + 1) if fft_type == "IRFFT" else lengths
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    x = rng.standard_normal(batch + trailing)
    if fft_type != "RFFT":
        x = x + 1j * rng.standard_normal(x.shape)
    return x.astype(np.complex64 if fft_type != "RFFT" else np.float32), fft_type, lengths


@given(fft_problem())
def test_matches_numpy(problem):
    x, fft_type, lengths = problem
    out = lax.fft(x, fft_type, lengths)
    axes = tuple(range(x.ndim - len(lengths), x.ndim))
    expected = NUMPY[fft_type](x.astype(np.complex128 if fft_type != "RFFT" else np.float64),
                              s=lengths, axes=axes)
    assert out.shape == expected.shape
    assert out.dtype == (np.float32 if fft_type == "IRFFT" else np.complex64)
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-4, atol=1e-4)


def test_enum_and_round_trip_and_jit():
    x = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
    spectrum = lax.fft(x, lax.FftType.RFFT, (8,))
    back = ember.jit(lambda s: lax.fft(s, "irfft", (8,)))(spectrum)
    np.testing.assert_allclose(np.asarray(back), x, rtol=1e-5, atol=1e-5)


def test_errors():
    real = np.zeros((4, 6), np.float32)
    with pytest.raises(EmberTypeError, match="FFT takes complex input, got float32"):
        lax.fft(real, "FFT", (6,))
    with pytest.raises(EmberTypeError, match="RFFT takes float32 or float64 input"):
        lax.fft(real.astype(np.complex64), "RFFT", (6,))
    with pytest.raises(EmberValueError, match=r"needs trailing dimensions \(5,\).*\(4, 6\)"):
        lax.fft(real, "RFFT", (5,))
    with pytest.raises(EmberValueError, match=r"needs trailing dimensions \(4, 4\)"):
        lax.fft(real.astype(np.complex64), "IRFFT", (4, 6))
    with pytest.raises(EmberValueError, match="1 to 3 trailing"):
        lax.fft(np.zeros((1,) * 4, np.complex64), "FFT", (1, 1, 1, 1))
    with pytest.raises(EmberValueError, match="unknown fft_type 'DCT'"):
        lax.fft(real, "DCT", (6,))


# --- transformation rules ------------------------------------------------------------------

@pytest.mark.parametrize("fft_type", sorted(NUMPY))
@pytest.mark.parametrize("lengths", [(5,), (4,), (3, 4)])
def test_gradients(x64, fft_type, lengths):
    rng = np.random.default_rng(0)
    trailing = (*lengths[:-1], lengths[-1] // 2 + 1) if fft_type == "IRFFT" else lengths
    x = rng.standard_normal((2, *trailing))
    if fft_type != "RFFT":
        x = x + 1j * rng.standard_normal(x.shape)
    check_grads(lambda v: lax.fft(v, fft_type, lengths), (x,), order=1)


def test_rfft_gradient_of_half_spectrum_power(x64):
    """d/dx_j sum_k |X_k|^2 over the stored half spectrum X = rfft(x) is
    2 Re(sum_k X_k e^{2 pi i jk/n}) = 2 n Re(ifft(X padded with zeros))_j."""
    n = 6
    x = np.random.default_rng(1).standard_normal(n)

    def power(v):
        s = lax.fft(v, "RFFT", (n,))
        return lax.reduce_sum(lax.real(lax.mul(s, lax.conj(s))), (0,))

    half = np.fft.rfft(x)
    expected = 2 * n * np.real(np.fft.ifft(np.r_[half, np.zeros(n - half.size)]))
    np.testing.assert_allclose(np.asarray(ember.grad(power)(x)), expected, rtol=1e-10)


@pytest.mark.parametrize("fft_type", sorted(NUMPY))
@pytest.mark.parametrize("in_axis", [0, 1, 2])
def test_vmap_matches_loop(fft_type, in_axis):
    rng = np.random.default_rng(0)
    shape = [2, 3, 4]
    shape.insert(in_axis, 2)
    x = rng.standard_normal(shape).astype(np.float32)
    if fft_type != "RFFT":
        x = (x + 1j * rng.standard_normal(shape)).astype(np.complex64)
    lengths = (4,) if fft_type != "IRFFT" else (6,)
    check_vmap(lambda v: lax.fft(v, fft_type, lengths), (x,), in_axis, rtol=1e-5, atol=1e-5)
