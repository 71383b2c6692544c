"""ember.numpy.fft against numpy.fft (lengths, axes, norms, real transforms)."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember
import ember.numpy as enp
from ember.errors import EmberValueError

fft = enp.fft
NORMS = st.sampled_from([None, "backward", "ortho", "forward"])
SHAPES = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=6)


def _close(actual, expected, rtol=1e-4, atol=1e-4):
    actual = np.asarray(actual)
    assert actual.shape == np.shape(expected)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


def _signal(seed, shape, complex_=False):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape)
    if complex_:
        x = x + 1j * rng.normal(size=shape)
    return x.astype(np.complex64 if complex_ else np.float32)


@given(shape=SHAPES, seed=st.integers(0, 99), norm=NORMS, data=st.data())
def test_one_dimensional_transforms(shape, seed, norm, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    n = data.draw(st.one_of(st.none(), st.integers(1, 8)))
    z = _signal(seed, shape, complex_=True)
    x = _signal(seed, shape)
    _close(fft.fft(z, n, axis, norm), np.fft.fft(z, n, axis, norm))
    _close(fft.ifft(z, n, axis, norm), np.fft.ifft(z, n, axis, norm))
    _close(fft.rfft(x, n, axis, norm), np.fft.rfft(x, n, axis, norm))
    if n is not None or shape[axis] > 1:
        _close(fft.irfft(z, n, axis, norm), np.fft.irfft(z, n, axis, norm))
        _close(fft.hfft(z, n, axis, norm), np.fft.hfft(z, n, axis, norm), rtol=1e-3, atol=1e-3)
    _close(fft.ihfft(x, n, axis, norm), np.fft.ihfft(x, n, axis, norm))
    assert fft.fft(x).dtype == np.complex64 and fft.irfft(z, 4).dtype == np.float32


@given(shape=SHAPES, seed=st.integers(0, 99), norm=NORMS, data=st.data())
def test_n_dimensional_transforms(shape, seed, norm, data):
    axes = data.draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, unique=True))
    sizes = data.draw(st.one_of(st.none(), st.lists(st.integers(2, 6), min_size=len(axes),
                                                    max_size=len(axes))))
    z, x = _signal(seed, shape, complex_=True), _signal(seed, shape)
    _close(fft.fftn(z, sizes, axes, norm), np.fft.fftn(z, sizes, axes, norm))
    _close(fft.ifftn(z, sizes, axes, norm), np.fft.ifftn(z, sizes, axes, norm))
    _close(fft.rfftn(x, sizes, axes, norm), np.fft.rfftn(x, sizes, axes, norm))
    if sizes is not None:
        _close(fft.irfftn(z, sizes, axes, norm), np.fft.irfftn(z, sizes, axes, norm))
    if len(shape) >= 2:
        _close(fft.fft2(z), np.fft.fft2(z))
        _close(fft.ifft2(z), np.fft.ifft2(z))
        _close(fft.rfft2(x), np.fft.rfft2(x))
        _close(fft.irfft2(fft.rfft2(x), s=x.shape[-2:]), x)


@pytest.mark.parametrize("n", [1, 4, 7])
@pytest.mark.parametrize("d", [1.0, 0.1])
def test_frequencies_and_shifts(n, d):
    _close(fft.fftfreq(n, d), np.fft.fftfreq(n, d))
    _close(fft.rfftfreq(n, d), np.fft.rfftfreq(n, d))
    x = np.arange(n * 3.0).reshape(3, n)
    _close(fft.fftshift(x), np.fft.fftshift(x))
    _close(fft.ifftshift(x, axes=1), np.fft.ifftshift(x, axes=1))
    _close(fft.ifftshift(fft.fftshift(x)), x)


def test_integer_input_and_round_trip():
    x = np.arange(8)
    assert fft.fft(x).dtype == np.complex64
    _close(fft.ifft(fft.fft(x)).real, x)
    _close(fft.irfft(fft.rfft(x), 8), x)


def test_fft_errors():
    with pytest.raises(EmberValueError, match="norm must be one of"):
        fft.fft(np.ones(4), norm="none")
    with pytest.raises(EmberValueError, match="invalid number of points n=0"):
        fft.fft(np.ones(4), 0)
    with pytest.raises(EmberValueError, match="rfft needs real input"):
        fft.rfft(np.ones(4, np.complex64))


def test_fft_under_jit_matches_eager():
    def f(x):
        return fft.fft(x), fft.rfft(x, 6), fft.irfft(fft.rfft(x)), fft.fftn(x, axes=(0, 1))

    x = _signal(0, (4, 5))
    with ember.config.override(backend="reference"):
        for eager, jitted in zip(f(x), ember.jit(f)(x)):
            np.testing.assert_allclose(np.asarray(eager), np.asarray(jitted), rtol=1e-6)
