"""Neural network layers in the style of ``jax.example_libraries.stax``, with its API,
so that programs written against it run unchanged.

A layer is a pair ``(init_fun, apply_fun)``: ``output_shape, params = init_fun(rng,
input_shape)`` and ``outputs = apply_fun(params, inputs, **kwargs)`` (``rng=`` for
layers that need randomness). ``serial`` and ``parallel`` combine layers into layers.
Image layers default to JAX's NHWC / HWIO layouts.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable, Sequence

import ember.numpy as jnp
from ember import lax, random
from ember.errors import EmberValueError
from ember.nn import (
    elu, gelu, leaky_relu, log_softmax, relu, selu, sigmoid, softmax, softplus, standardize)
from ember.nn.initializers import glorot_normal, normal, ones, zeros

__all__ = [
    "AvgPool", "BatchNorm", "Conv", "Conv1DTranspose", "ConvTranspose", "Dense", "Dropout",
    "Elu", "Exp", "FanInConcat", "FanInSum", "FanOut", "Flatten", "Gelu", "GeneralConv",
    "GeneralConvTranspose", "Identity", "LeakyRelu", "LogSoftmax", "MaxPool", "Relu", "Selu",
    "Sigmoid", "Softmax", "Softplus", "SumPool", "Tanh", "elementwise", "parallel", "serial",
    "shape_dependent",
    # re-exported as stax does
    "elu", "gelu", "glorot", "glorot_normal", "leaky_relu", "log_softmax", "logsoftmax",
    "normal", "ones", "randn", "relu", "selu", "sigmoid", "softmax", "softplus",
    "standardize", "zeros",
]

Layer = tuple[Callable, Callable]
glorot, randn, logsoftmax = glorot_normal, normal, log_softmax


def Dense(out_dim: int, W_init: Callable = glorot_normal(),
          b_init: Callable = normal()) -> Layer:
    """A fully connected layer: ``inputs @ W + b`` over the last axis."""
    def init_fun(rng: Any, input_shape: Sequence[int]) -> tuple:
        k1, k2 = random.split(rng)
        params = W_init(k1, (input_shape[-1], out_dim)), b_init(k2, (out_dim,))
        return tuple(input_shape[:-1]) + (out_dim,), params

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        W, b = params
        return jnp.dot(inputs, W) + b

    return init_fun, apply_fun


def _kernel_shape(dimension_numbers: Sequence[str], out_chan: int,
                  filter_shape: Sequence[int], input_shape: Sequence[int]) -> list[int]:
    lhs_spec, rhs_spec, _ = dimension_numbers
    spatial = iter(filter_shape)
    in_chan = input_shape[lhs_spec.index("C")]
    return [out_chan if c == "O" else in_chan if c == "I" else next(spatial)
            for c in rhs_spec]


def _general_conv(transpose: bool, dimension_numbers: Sequence[str], out_chan: int,
                  filter_shape: Sequence[int], strides: Sequence[int] | None = None,
                  padding: Any = "VALID", W_init: Callable | None = None,
                  b_init: Callable = normal(1e-6)) -> Layer:
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    one = (1,) * len(filter_shape)
    strides = strides or one
    W_init = W_init or glorot_normal(rhs_spec.index("I"), rhs_spec.index("O"))
    shape_tuple = lax.conv_transpose_shape_tuple if transpose else lax.conv_general_shape_tuple

    def init_fun(rng: Any, input_shape: Sequence[int]) -> tuple:
        kernel_shape = _kernel_shape(dimension_numbers, out_chan, filter_shape, input_shape)
        output_shape = shape_tuple(input_shape, kernel_shape, strides, padding,
                                   dimension_numbers)
        bias_shape = [out_chan if c == "C" else 1 for c in out_spec]
        k1, k2 = random.split(rng)
        return output_shape, (W_init(k1, kernel_shape), b_init(k2, bias_shape))

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        W, b = params
        if transpose:
            out = lax.conv_transpose(inputs, W, strides, padding,
                                     dimension_numbers=dimension_numbers)
        else:
            out = lax.conv_general_dilated(inputs, W, strides, padding, one, one,
                                           dimension_numbers=dimension_numbers)
        return out + b

    return init_fun, apply_fun


def GeneralConv(dimension_numbers: Sequence[str], out_chan: int, filter_shape: Sequence[int],
                strides: Sequence[int] | None = None, padding: Any = "VALID",
                W_init: Callable | None = None, b_init: Callable = normal(1e-6)) -> Layer:
    """A convolution in the layouts ``dimension_numbers`` names, e.g.
    ``('NHWC', 'HWIO', 'NHWC')``."""
    return _general_conv(False, dimension_numbers, out_chan, filter_shape, strides, padding,
                         W_init, b_init)


def GeneralConvTranspose(dimension_numbers: Sequence[str], out_chan: int,
                         filter_shape: Sequence[int], strides: Sequence[int] | None = None,
                         padding: Any = "VALID", W_init: Callable | None = None,
                         b_init: Callable = normal(1e-6)) -> Layer:
    """A transposed convolution (``lax.conv_transpose``) in the layouts named."""
    return _general_conv(True, dimension_numbers, out_chan, filter_shape, strides, padding,
                         W_init, b_init)


Conv = functools.partial(GeneralConv, ("NHWC", "HWIO", "NHWC"))
Conv1DTranspose = functools.partial(GeneralConvTranspose, ("NHC", "HIO", "NHC"))
ConvTranspose = functools.partial(GeneralConvTranspose, ("NHWC", "HWIO", "NHWC"))


def BatchNorm(axis: int | Sequence[int] = (0, 1, 2), epsilon: float = 1e-5,
              center: bool = True, scale: bool = True, beta_init: Callable = zeros,
              gamma_init: Callable = ones) -> Layer:
    """Normalize over ``axis`` (the batch statistics of this call; stax keeps no running
    averages), then scale by gamma and shift by beta, which live on the other axes."""
    axis = (axis,) if isinstance(axis, int) else tuple(axis)

    def init_fun(rng: Any, input_shape: Sequence[int]) -> tuple:
        shape = tuple(d for i, d in enumerate(input_shape) if i not in axis)
        k1, k2 = random.split(rng)
        beta = beta_init(k1, shape) if center else ()
        gamma = gamma_init(k2, shape) if scale else ()
        return input_shape, (beta, gamma)

    def apply_fun(params: Any, x: Any, **kwargs: Any) -> Any:
        beta, gamma = params
        kept = tuple(None if i in axis else slice(None) for i in range(jnp.ndim(x)))
        z = standardize(x, axis, epsilon=epsilon)
        if scale:
            z = gamma[kept] * z
        if center:
            z = z + beta[kept]
        return z

    return init_fun, apply_fun


def elementwise(fun: Callable, **fun_kwargs: Any) -> Layer:
    """A parameterless layer applying ``fun(inputs, **fun_kwargs)``."""
    def init_fun(rng: Any, input_shape: Sequence[int]) -> tuple:
        return input_shape, ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        return fun(inputs, **fun_kwargs)

    return init_fun, apply_fun


Tanh = elementwise(jnp.tanh)
Relu = elementwise(relu)
Exp = elementwise(jnp.exp)
LogSoftmax = elementwise(log_softmax, axis=-1)
Softmax = elementwise(softmax, axis=-1)
Softplus = elementwise(softplus)
Sigmoid = elementwise(sigmoid)
Elu = elementwise(elu)
LeakyRelu = elementwise(leaky_relu)
Selu = elementwise(selu)
Gelu = elementwise(gelu)


def _non_spatial_axes(spec: str | None, ndim: int) -> tuple[int, int]:
    """Where batch and channels are: first and last (NHWC) unless ``spec`` names them."""
    return (0, ndim - 1) if spec is None else (spec.index("N"), spec.index("C"))


def _pooling_layer(reducer: Callable, init_val: float, average: bool = False):
    def PoolingLayer(window_shape: Sequence[int], strides: Sequence[int] | None = None,
                     padding: Any = "VALID", spec: str | None = None) -> Layer:
        spatial_window = tuple(window_shape)
        spatial_strides = tuple(strides or (1,) * len(spatial_window))
        window, steps = list(spatial_window), list(spatial_strides)
        for i in sorted(_non_spatial_axes(spec, len(spatial_window) + 2)):
            window.insert(i, 1)
            steps.insert(i, 1)
        window, steps = tuple(window), tuple(steps)

        def init_fun(rng: Any, input_shape: Sequence[int]) -> tuple:
            pads = lax.padtype_to_pads(input_shape, window, steps, padding)
            return lax.reduce_window_shape_tuple(input_shape, window, steps, pads), ()

        def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
            out = lax.reduce_window(inputs, init_val, reducer, window, steps, padding)
            if not average:
                return out
            # Each window's count of real (unpadded) entries.
            non_spatial = _non_spatial_axes(spec, inputs.ndim)
            spatial_shape = [d for i, d in enumerate(inputs.shape) if i not in non_spatial]
            counts = lax.reduce_window(jnp.ones(spatial_shape, inputs.dtype), 0.0, lax.add,
                                       spatial_window, spatial_strides, padding)
            return out / jnp.expand_dims(counts, sorted(non_spatial))

        return init_fun, apply_fun

    return PoolingLayer


MaxPool = _pooling_layer(lax.max, -jnp.inf)
SumPool = _pooling_layer(lax.add, 0.0)
AvgPool = _pooling_layer(lax.add, 0.0, average=True)


def _flatten() -> Layer:
    def init_fun(rng: Any, input_shape: Sequence[int]) -> tuple:
        return (input_shape[0], math.prod(input_shape[1:])), ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        return jnp.reshape(inputs, (inputs.shape[0], -1))

    return init_fun, apply_fun


Flatten = _flatten()


def _identity() -> Layer:
    def init_fun(rng: Any, input_shape: Sequence[int]) -> tuple:
        return input_shape, ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        return inputs

    return init_fun, apply_fun


Identity = _identity()


def FanOut(num: int) -> Layer:
    """``num`` copies of the input, for ``parallel`` branches."""
    def init_fun(rng: Any, input_shape: Sequence[int]) -> tuple:
        return [input_shape] * num, ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        return [inputs] * num

    return init_fun, apply_fun


def _fan_in_sum() -> Layer:
    def init_fun(rng: Any, input_shape: Sequence[Sequence[int]]) -> tuple:
        return input_shape[0], ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        return sum(inputs)

    return init_fun, apply_fun


FanInSum = _fan_in_sum()


def FanInConcat(axis: int = -1) -> Layer:
    """Concatenate the inputs of ``parallel`` branches along ``axis``."""
    def init_fun(rng: Any, input_shape: Sequence[Sequence[int]]) -> tuple:
        ax = axis % len(input_shape[0])
        size = sum(shape[ax] for shape in input_shape)
        first = tuple(input_shape[0])
        return first[:ax] + (size,) + first[ax + 1:], ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        return jnp.concatenate(inputs, axis)

    return init_fun, apply_fun


def Dropout(rate: float, mode: str = "train") -> Layer:
    """Dropout as stax defines it: ``rate`` is the probability of *keeping* an entry
    (kept entries are divided by it); ``mode`` other than 'train' is the identity."""
    def init_fun(rng: Any, input_shape: Sequence[int]) -> tuple:
        return input_shape, ()

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        rng = kwargs.get("rng", None)
        if rng is None:
            raise EmberValueError(
                "Dropout's apply_fun needs a PRNG key: call apply_fun(params, inputs, "
                "rng=key), e.g. with key = ember.random.PRNGKey(0)")
        if mode != "train":
            return inputs
        keep = random.bernoulli(rng, rate, inputs.shape)
        return jnp.where(keep, inputs / rate, 0)

    return init_fun, apply_fun


def serial(*layers: Layer) -> Layer:
    """The layers one after the other; ``rng=`` is split among them."""
    count = len(layers)
    init_funs, apply_funs = zip(*layers) if layers else ((), ())

    def init_fun(rng: Any, input_shape: Sequence[int]) -> tuple:
        params = []
        for init in init_funs:
            rng, layer_rng = random.split(rng)
            input_shape, param = init(layer_rng, input_shape)
            params.append(param)
        return input_shape, params

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        rng = kwargs.pop("rng", None)
        rngs = random.split(rng, count) if rng is not None else (None,) * count
        for fun, param, layer_rng in zip(apply_funs, params, rngs):
            inputs = fun(param, inputs, rng=layer_rng, **kwargs)
        return inputs

    return init_fun, apply_fun


def parallel(*layers: Layer) -> Layer:
    """The layers side by side, each on its own input of a sequence (see ``FanOut``)."""
    count = len(layers)
    init_funs, apply_funs = zip(*layers) if layers else ((), ())

    def init_fun(rng: Any, input_shape: Sequence[Sequence[int]]) -> tuple:
        rngs = random.split(rng, count)
        results = [init(layer_rng, shape)
                   for init, layer_rng, shape in zip(init_funs, rngs, input_shape)]
        return tuple(shape for shape, _ in results), tuple(param for _, param in results)

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        rng = kwargs.pop("rng", None)
        rngs = random.split(rng, count) if rng is not None else (None,) * count
        return [f(p, x, rng=r, **kwargs)
                for f, p, x, r in zip(apply_funs, params, inputs, rngs)]

    return init_fun, apply_fun


def shape_dependent(make_layer: Callable[[Sequence[int]], Layer]) -> Layer:
    """A layer built from the input shape by ``make_layer(input_shape)``."""
    def init_fun(rng: Any, input_shape: Sequence[int]) -> tuple:
        return make_layer(input_shape)[0](rng, input_shape)

    def apply_fun(params: Any, inputs: Any, **kwargs: Any) -> Any:
        return make_layer(inputs.shape)[1](params, inputs, **kwargs)

    return init_fun, apply_fun
