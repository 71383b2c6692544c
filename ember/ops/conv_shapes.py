"""Shape arithmetic of convolutions, as ``jax.lax``'s helpers: ``padtype_to_pads``,
``conv_shape_tuple``, ``conv_general_shape_tuple``, ``conv_transpose_shape_tuple`` and
``conv_general_permutations``. Layer libraries (stax) use them to compute output shapes
without running a convolution; they agree with what ``conv_general_dilated`` and
``conv_transpose`` return, because they share those functions' padding rules."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ember.errors import EmberValueError
from ember.ops.linalg import (
    _transposed_padding, conv_dimension_numbers, conv_output_size, padding_pairs)

__all__ = ["padtype_to_pads", "conv_shape_tuple", "conv_general_shape_tuple",
           "conv_transpose_shape_tuple", "conv_general_permutations"]


def padtype_to_pads(in_shape: Sequence[int], window_shape: Sequence[int],
                    window_strides: Sequence[int], padding: str) -> list[tuple[int, int]]:
    """(low, high) pairs for 'SAME', 'SAME_LOWER' or 'VALID' padding (odd 'SAME' padding
    goes high, 'SAME_LOWER' low)."""
    if not isinstance(padding, str):
        raise EmberValueError(f"padtype_to_pads takes 'SAME', 'SAME_LOWER' or 'VALID', got "
                              f"{padding!r}")
    return list(padding_pairs(padding, list(in_shape), list(window_shape),
                              list(window_strides)))


def conv_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                     strides: Sequence[int], pads: Any,
                     batch_group_count: int = 1) -> tuple[int, ...]:
    """The output shape of a convolution of operands in the canonical layouts (NC...,
    OI...)."""
    spatial_in, windows = list(lhs_shape[2:]), list(rhs_shape[2:])
    pads = padding_pairs(pads, spatial_in, windows, list(strides))
    for size, (lo, hi) in zip(spatial_in, pads):
        if size + lo + hi < 0:
            raise EmberValueError(f"conv: negative padding {pads} removes more than the input "
                                  f"spatial shape {tuple(spatial_in)} holds")
    if lhs_shape[0] % batch_group_count:
        raise EmberValueError(f"conv: batch size {lhs_shape[0]} is not a multiple of "
                              f"batch_group_count={batch_group_count}")
    spatial_out = (conv_output_size(size, window, stride, pad, 1, 1)
                   for size, window, stride, pad in zip(spatial_in, windows, strides, pads))
    return (lhs_shape[0] // batch_group_count, rhs_shape[0], *spatial_out)


def conv_general_permutations(dimension_numbers: Any) -> tuple[tuple[int, ...], ...]:
    """Where (batch, feature, *spatial) live in each of lhs, rhs and out, given string
    dimension numbers such as ``('NHWC', 'HWIO', 'NHWC')``."""
    ndim = len(dimension_numbers[0])
    return tuple(conv_dimension_numbers((0,) * ndim, (0,) * ndim, dimension_numbers))


def _permuted(shape: Sequence[int], perm: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(shape[d]) for d in perm)


def _specs(lhs_shape: Sequence[int], rhs_shape: Sequence[int], dimension_numbers: Any):
    return conv_dimension_numbers(tuple(lhs_shape), tuple(rhs_shape), dimension_numbers)


def conv_general_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                             window_strides: Sequence[int], padding: Any,
                             dimension_numbers: Any) -> tuple[int, ...]:
    """The output shape of ``conv_general_dilated`` (no dilation) in the layouts that
    ``dimension_numbers`` name."""
    dnums = _specs(lhs_shape, rhs_shape, dimension_numbers)
    out = conv_shape_tuple(_permuted(lhs_shape, dnums.lhs_spec),
                           _permuted(rhs_shape, dnums.rhs_spec), window_strides, padding)
    return tuple(out[i] for i in np.argsort(dnums.out_spec))


def conv_transpose_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                               window_strides: Sequence[int], padding: Any,
                               dimension_numbers: Any) -> tuple[int, ...]:
    """The output shape of ``conv_transpose`` (no kernel dilation) in the layouts that
    ``dimension_numbers`` name."""
    dnums = _specs(lhs_shape, rhs_shape, dimension_numbers)
    lhs, rhs = _permuted(lhs_shape, dnums.lhs_spec), _permuted(rhs_shape, dnums.rhs_spec)
    if isinstance(padding, str):
        padding = [_transposed_padding(padding, k, s) for k, s in zip(rhs[2:], window_strides)]
    spatial = [(size - 1) * stride - window + 2 + lo + hi
               for size, window, stride, (lo, hi) in zip(lhs[2:], rhs[2:], window_strides,
                                                         padding)]
    out = (lhs[0], rhs[0], *spatial)
    return tuple(out[i] for i in np.argsort(dnums.out_spec))
