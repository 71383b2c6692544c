"""lax.fft against numpy.fft; errors; jit vs eager."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ember
from ember import lax
from ember.errors import EmberTypeError, EmberValueError

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
