"""``ember.image``: resizing and resampling images, as ``jax.image``.

``resize(image, shape, method)`` resamples every axis whose size changes;
``scale_and_translate`` maps input location ``x`` to ``x * scale + translation`` along the
given axes (pixels are centred on half-integers). Each resampled axis is one contraction
with a weight matrix (input size x output size): the interpolation kernel evaluated at
the distance between each output sample's position in the input and each input pixel,
widened by the scale when downsampling with ``antialias``, each column normalized to sum
to 1, and zero for samples outside the image. The weights are computed with
``ember.numpy``, so they are differentiable in ``scale`` and ``translation``, and the whole
resize is differentiable in the image. ``"nearest"`` picks pixels instead (a gather).
"""
from __future__ import annotations

import enum
import math
from typing import Any, Callable, Sequence

import numpy as np

import ember.numpy as jnp
from ember.errors import EmberValueError

__all__ = ["ResizeMethod", "resize", "scale_and_translate"]


class ResizeMethod(enum.Enum):
    """The resampling methods, as ``jax.image.ResizeMethod``."""

    NEAREST = 0
    LINEAR = 1
    LANCZOS3 = 2
    LANCZOS5 = 3
    CUBIC = 4
    CUBIC_PYTORCH = 5
    AREA = 6

    @staticmethod
    def from_string(name: str) -> "ResizeMethod":
        """The method a string names (JAX's names and aliases: 'bilinear', 'bicubic'...)."""
        method = _NAMES.get(name)
        if method is None:
            raise EmberValueError(f"unknown resize method {name!r}; methods: "
                                  f"{', '.join(sorted(_NAMES))}")
        return method


_NAMES = {
    "nearest": ResizeMethod.NEAREST,
    **dict.fromkeys(["linear", "bilinear", "trilinear", "triangle"], ResizeMethod.LINEAR),
    "lanczos3": ResizeMethod.LANCZOS3,
    "lanczos5": ResizeMethod.LANCZOS5,
    **dict.fromkeys(["cubic", "bicubic", "tricubic"], ResizeMethod.CUBIC),
    **dict.fromkeys(["cubic-pytorch", "bicubic-pytorch"], ResizeMethod.CUBIC_PYTORCH),
    "area": ResizeMethod.AREA,
}


# --- kernels, of the distance |x| >= 0 in input pixels ---------------------------------

def _triangle(x: Any) -> Any:
    return jnp.maximum(0.0, 1.0 - x)


def _cubic(a: float) -> Callable[[Any], Any]:
    """The cubic convolution kernel with parameter ``a`` (Keys: -0.5; PyTorch: -0.75)."""
    def kernel(x: Any) -> Any:
        near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
        far = ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
        return jnp.where(x >= 2.0, 0.0, jnp.where(x >= 1.0, far, near))
    return kernel


def _lanczos(radius: float) -> Callable[[Any], Any]:
    def kernel(x: Any) -> Any:
        # sinc(x) sinc(x / radius), with its limit 1 near 0 (the quotient loses digits)
        safe = jnp.where(x > 1e-3, x, 1.0)
        value = radius * jnp.sin(np.pi * safe) * jnp.sin(np.pi * safe / radius) \
            / (np.pi ** 2 * safe * safe)
        return jnp.where(x > radius, 0.0, jnp.where(x > 1e-3, value, 1.0))
    return kernel


_AREA = "area"  # not a kernel of the distance: the overlap of output and input pixels

# method -> (the kernel's radius in input pixels, the kernel)
_KERNELS: dict[ResizeMethod, tuple[int, Any]] = {
    ResizeMethod.LINEAR: (1, _triangle),
    ResizeMethod.LANCZOS3: (3, _lanczos(3.0)),
    ResizeMethod.LANCZOS5: (5, _lanczos(5.0)),
    ResizeMethod.CUBIC: (2, _cubic(-0.5)),
    ResizeMethod.CUBIC_PYTORCH: (2, _cubic(-0.75)),
    ResizeMethod.AREA: (1, _AREA),
}


def _weights(in_size: int, out_size: int, scale: Any, translation: Any, kernel: Any,
             antialias: bool, radius: int, edge_padding: bool, dtype: Any) -> Any:
    """The (in_size, out_size) matrix that resamples one axis."""
    inv_scale = 1.0 / scale
    # Where each output pixel's centre falls in the input, in input pixels.
    sample = (jnp.arange(out_size, dtype=dtype) + 0.5 - translation) * inv_scale - 0.5
    widen = jnp.maximum(inv_scale, 1.0) if antialias else 1.0
    # Edge padding: the kernel also covers pixels beyond the edge, then repeats the edge.
    reach = 0
    if edge_padding:
        reach = math.ceil(radius * max(1.0 / float(scale), 1.0)) if antialias else radius
    pixels = jnp.arange(-reach, in_size + reach, dtype=dtype)
    if kernel is _AREA:
        left = (jnp.arange(out_size, dtype=dtype) - translation) * inv_scale
        overlap = jnp.minimum((left + inv_scale)[None, :], (pixels + 1.0)[:, None]) \
            - jnp.maximum(left[None, :], pixels[:, None])
        weights = jnp.maximum(0.0, overlap)
    else:
        weights = kernel(jnp.abs(sample[None, :] - pixels[:, None]) / widen)
    if edge_padding:  # fold the pixels beyond the edge onto the edge pixel
        rows = np.clip(np.arange(-reach, in_size + reach), 0, in_size - 1)
        fold = (rows[None, :] == np.arange(in_size)[:, None]).astype(np.dtype(dtype))
        weights = jnp.matmul(fold, weights)
    total = jnp.sum(weights, axis=0, keepdims=True)
    usable = jnp.abs(total) > 1000.0 * float(np.finfo(np.float32).eps)
    weights = jnp.where(usable, weights / jnp.where(total != 0, total, 1.0), 0.0)
    if not edge_padding:  # samples outside the image get nothing
        inside = jnp.logical_and(sample >= -0.5, sample <= in_size - 0.5)
        weights = jnp.where(inside[None, :], weights, 0.0)
    return weights


def _resample(image: Any, shape: Sequence[int], axes: Sequence[int], scales: Sequence[Any],
              translations: Sequence[Any], method: ResizeMethod, antialias: bool,
              precision: Any) -> Any:
    if method == ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC  # (as JAX: PyTorch's kernel only without antialias)
    radius, kernel = _KERNELS[method]
    edge_padding = method == ResizeMethod.CUBIC_PYTORCH
    x = _inexact(image)
    for axis, scale, translation in zip(axes, scales, translations):
        dtype = jnp.result_type(scale, translation)  # (Python floats: the default float)
        w = _weights(x.shape[axis], shape[axis], scale, translation, kernel, antialias,
                     radius, edge_padding, dtype).astype(x.dtype)
        x = jnp.moveaxis(jnp.tensordot(x, w, axes=([axis], [0]), precision=precision), -1,
                         axis)
    return x


def _inexact(image: Any) -> Any:
    x = jnp.asarray(image)
    return x if jnp.issubdtype(x.dtype, jnp.inexact) else x.astype(jnp.float32)


def _method(method: str | ResizeMethod) -> ResizeMethod:
    return ResizeMethod.from_string(method) if isinstance(method, str) else ResizeMethod(method)


def _shape(image: Any, shape: Sequence[int]) -> tuple[int, ...]:
    shape = tuple(int(s) for s in shape)
    if len(shape) != np.ndim(image):
        raise EmberValueError(f"shape must have one size per axis of the image: {shape} for "
                              f"an image of shape {tuple(np.shape(image))}")
    return shape


def resize(image: Any, shape: Sequence[int], method: str | ResizeMethod,
           antialias: bool = True, precision: Any = None) -> Any:
    """``image`` resampled to ``shape`` (one size per axis: leave batch and channel axes
    as they are), as ``jax.image.resize``. ``method``: 'nearest' (keeps the dtype),
    'linear', 'cubic', 'cubic-pytorch', 'lanczos3', 'lanczos5' or 'area' (give a float
    result). ``antialias`` widens the kernel when downsampling."""
    shape, method = _shape(image, shape), _method(method)
    x = jnp.asarray(image)
    axes = [d for d in range(x.ndim) if x.shape[d] != shape[d]]
    if method == ResizeMethod.NEAREST:
        for d in axes:
            # (the centre of each output pixel, in input pixels, rounded down, in float32)
            picks = np.floor(((np.arange(shape[d], dtype=np.float32) + np.float32(0.5))
                              * np.float32(x.shape[d]) / np.float32(shape[d]))
                             .astype(np.float32)).astype(np.int32)
            x = jnp.take(x, picks, axis=d)
        return x
    scales = [1.0 if shape[d] == 0 else shape[d] / x.shape[d] for d in axes]
    return _resample(x, shape, axes, scales, [0.0] * len(axes), method, antialias, precision)


def scale_and_translate(image: Any, shape: Sequence[int], spatial_dims: Sequence[int],
                        scale: Any, translation: Any, method: str | ResizeMethod,
                        antialias: bool = True, precision: Any = None) -> Any:
    """``image`` resampled to ``shape``, input location ``x`` (along ``spatial_dims[i]``)
    going to ``x * scale[i] + translation[i]``, as ``jax.image.scale_and_translate``;
    output pixels that fall outside the input are 0. ``scale`` and ``translation`` may be
    traced (differentiable). Methods as ``resize``, but for 'nearest'."""
    shape, method = _shape(image, shape), _method(method)
    if method == ResizeMethod.NEAREST:
        raise EmberValueError("scale_and_translate does not resample with 'nearest' (as "
                              "JAX); use 'linear', or resize(..., 'nearest')")
    x = _inexact(image)
    axes = [d % x.ndim for d in spatial_dims]
    scale, translation = jnp.asarray(scale), jnp.asarray(translation)
    if scale.shape != (len(axes),) or translation.shape != (len(axes),):
        raise EmberValueError(f"scale and translation need one value per spatial dim "
                              f"({len(axes)}); got shapes {scale.shape} and "
                              f"{translation.shape}")
    dtype = jnp.result_type(scale, translation, x.dtype)
    scale, translation = scale.astype(dtype), translation.astype(dtype)
    return _resample(x, shape, axes, [scale[i] for i in range(len(axes))],
                     [translation[i] for i in range(len(axes))], method, antialias, precision)
