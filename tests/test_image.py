"""``ember.image``: resize and scale_and_translate, against independent references
(NumPy, PyTorch where installed) and against ``jax.image`` where JAX is installed."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import image
from ember.test_util import check_grads

METHODS = ["nearest", "linear", "cubic", "cubic-pytorch", "lanczos3", "lanczos5", "area"]


def _image(seed=0, shape=(2, 7, 9, 3)):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("method", METHODS[1:])
def test_an_unchanged_shape_is_the_image_itself(method):
    x = _image()
    np.testing.assert_array_equal(np.asarray(image.resize(x, x.shape, method)), x)


def test_linear_upsampling_interpolates_between_pixel_centres():
    x = np.array([0.0, 4.0, 8.0], np.float32)  # centres at 0.5, 1.5, 2.5
    got = np.asarray(image.resize(x, (6,), "linear"))
    # output centres at 0.25, 0.75, ... (input units): clamped at the edges
    np.testing.assert_allclose(got, [0.0, 1.0, 3.0, 5.0, 7.0, 8.0], atol=1e-6)


def test_area_downsampling_averages_blocks_and_nearest_picks_pixels():
    x = _image(1, (4, 6))
    blocks = x.reshape(2, 2, 3, 2).mean(axis=(1, 3))
    np.testing.assert_allclose(np.asarray(image.resize(x, (2, 3), "area")), blocks, rtol=1e-5)
    picked = np.asarray(image.resize(x, (2, 3), "nearest"))
    np.testing.assert_array_equal(picked, x[1::2, 1::2])
    ints = (x * 10).astype(np.int32)
    assert image.resize(ints, (8, 12), "nearest").dtype == np.int32
    assert image.resize(ints, (8, 12), "linear").dtype == np.float32


def test_antialias_widens_the_kernel_only_when_downsampling():
    x = _image(2, (16,))
    up = [np.asarray(image.resize(x, (40,), "linear", antialias=a)) for a in (True, False)]
    np.testing.assert_array_equal(*up)
    down = [np.asarray(image.resize(x, (5,), "linear", antialias=a)) for a in (True, False)]
    assert np.abs(down[0] - down[1]).max() > 1e-3
    # Antialiased: each output is a triangle-weighted mean over 2 * 16/5 input pixels.
    centre = (2 + 0.5) * 16 / 5 - 0.5
    weights = np.maximum(0, 1 - np.abs(np.arange(16) - centre) / (16 / 5))
    np.testing.assert_allclose(down[0][2], (weights * x).sum() / weights.sum(), rtol=1e-5)


def test_scale_and_translate_moves_the_image():
    x = _image(3, (10,))
    shifted = image.scale_and_translate(x, (10,), (0,), jnp.asarray([1.0]), jnp.asarray([2.0]),
                                        "linear")
    np.testing.assert_allclose(np.asarray(shifted)[2:], x[:-2], rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(shifted)[:2], 0.0)  # outside the input
    with pytest.raises(ValueError, match="nearest"):
        image.scale_and_translate(x, (10,), (0,), [1.0], [0.0], "nearest")
    with pytest.raises(ValueError, match="unknown resize method"):
        image.resize(x, (5,), "bilinearr")
    with pytest.raises(ValueError, match="one size per axis"):
        image.resize(x, (5, 2), "linear")


def test_jit_matches_eager_and_gradients_are_right(x64):
    x = _image(4, (5, 6)).astype(np.float64)
    for method in ("linear", "cubic", "lanczos3", "area"):
        eager = np.asarray(image.resize(x, (3, 9), method))
        compiled = np.asarray(ember.jit(lambda v, m=method: image.resize(v, (3, 9), m))(x))
        np.testing.assert_allclose(compiled, eager, rtol=1e-12)
        check_grads(lambda v, m=method: image.resize(v, (3, 9), m), (x,), order=1)

    def moved(scale, translation):
        return image.scale_and_translate(x, (4, 7), (0, 1), scale, translation, "cubic")

    # (at scales and shifts where no sample lands on a kink of the kernel)
    check_grads(moved, (np.array([0.83, 1.31]), np.array([0.27, -0.41])), order=1)


def test_cubic_pytorch_and_linear_match_torch():
    torch = pytest.importorskip("torch")
    x = _image(5, (2, 3, 7, 9))
    for size in ((14, 20), (5, 4)):
        for mode, method in (("bilinear", "linear"), ("bicubic", "cubic-pytorch")):
            theirs = torch.nn.functional.interpolate(torch.from_numpy(x), size=size,
                                                     mode=mode, align_corners=False)
            ours = image.resize(x, (2, 3, *size), method, antialias=False)
            np.testing.assert_allclose(np.asarray(ours), theirs.numpy(), atol=2e-5)


def test_as_jax():
    jax = pytest.importorskip("jax")
    x = _image()
    for method in METHODS:
        for antialias in (True, False):
            # (up along one axis, down along the other: JAX compiles each, ~0.6 s)
            for shape in [(2, 14, 4, 3)] + ([(2, 1, 1, 3)] if antialias else []):
                ours = np.asarray(image.resize(x, shape, method, antialias))
                theirs = np.asarray(jax.image.resize(x, shape, method, antialias))
                np.testing.assert_allclose(ours, theirs, atol=1e-5,
                                           err_msg=f"{method} {antialias} {shape}")
    scale, shift = np.array([1.7, 0.6], np.float32), np.array([0.3, -1.2], np.float32)
    for method in METHODS[1:]:
        for antialias in (True, False) if method == "cubic-pytorch" else (True,):
            ours = image.scale_and_translate(x, (2, 10, 6, 3), (1, 2), scale, shift, method,
                                             antialias)
            theirs = jax.image.scale_and_translate(x, (2, 10, 6, 3), (1, 2), scale, shift,
                                                   method, antialias)
            np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), atol=1e-5)
    ints = (np.random.default_rng(6).random((5, 6)) * 255).astype(np.uint8)
    for method in ("nearest", "linear"):
        ours, theirs = image.resize(ints, (3, 8), method), jax.image.resize(ints, (3, 8), method)
        assert ours.dtype == theirs.dtype
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), atol=1e-4)
    assert [m.name for m in image.ResizeMethod] == [m.name for m in jax.image.ResizeMethod]
    x = _image(7, (6, 8)).astype(np.float32)
    at = (np.array([0.83, 1.31], np.float32), np.array([0.27, -0.41], np.float32))
    ours = ember.grad(lambda s, t: image.scale_and_translate(x, (4, 7), (0, 1), s, t,
                                                             "linear").sum(), (0, 1))(*at)
    theirs = jax.grad(lambda s, t: jax.image.scale_and_translate(x, (4, 7), (0, 1), s, t,
                                                                 "linear").sum(), (0, 1))(*at)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4)
