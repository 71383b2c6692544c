"""Convolutions as im2col + one matrix product, for backends without a convolution kernel.

A covered ``conv_general_dilated`` (float32 / float64 throughout, at most
``MAX_SLICES`` taps or positions, see below) becomes primitives every code generator
handles: the input in the canonical layout (N, C, spatial...), padded (``lhs_dilation``
as interior padding, negative padding crops), then the patch matrix (N, P, C, T) of the
P output positions and T kernel taps, one gather at positions computed from iotas (a
loop kernel filling the patch buffer). A ``dot_general`` contracting (C, T) with the
kernel (O, C, T), a GEMM for BLAS, gives (N, P, O), reshaped and transposed to the layout
of the output. With feature or batch groups (grouped and depthwise convolutions, and
their gradients) the product is batched over the groups.

Everything else (other dtypes, many taps and positions, empty shapes) stays one equation.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ember.ir.graph import Eqn, Graph
from ember.ops import structural
from ember.ops.indexing import GatherDimensionNumbers, GatherScatterMode, gather
from ember.ops.linalg import dot_general
from ember.passes.rewrite import Expansion, expand_equations

MAX_SLICES = 64  # more taps and positions both: a patch matrix too big to pay
_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def lower_convolutions(graph: Graph) -> Graph:
    """``graph`` with every covered convolution (also in nested graphs) as im2col + GEMM."""
    return expand_equations(graph, _expansion)


def _expansion(eqn: Eqn) -> Expansion | None:
    """The function computing covered ``eqn`` by im2col + GEMM (None if not covered)."""
    if not covered(eqn):
        return None
    _, positions = _extents(eqn)
    return lambda lhs, rhs: [_im2col_conv(lhs, rhs, eqn.params, positions)]


def covered(eqn: Eqn) -> bool:
    """Whether ``eqn`` is a convolution this pass rewrites."""
    if eqn.prim.name != "conv_general_dilated":
        return False
    avals = [a.aval for a in eqn.inputs] + [eqn.outputs[0].aval]
    if any(a.dtype not in _DTYPES or a.dtype != avals[0].dtype or a.size == 0
           for a in avals):
        return False
    return _slice_count(*_extents(eqn)) <= MAX_SLICES


def _extents(eqn: Eqn) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(kernel taps per spatial dimension, output positions per spatial dimension)."""
    _, rhs_spec, out_spec = eqn.params["dimension_numbers"]
    rhs, out = eqn.inputs[1].aval.shape, eqn.outputs[0].aval.shape
    return (tuple(rhs[d] for d in rhs_spec[2:]), tuple(out[d] for d in out_spec[2:]))


def _slice_count(taps: tuple[int, ...], positions: tuple[int, ...]) -> int:
    return min(int(np.prod(taps)), int(np.prod(positions)))


def _im2col_conv(lhs: Any, rhs: Any, params: dict[str, Any],
                 spatial: tuple[int, ...]) -> Any:
    """The convolution of ``lhs`` and ``rhs`` with ``spatial`` output positions."""
    lhs_spec, rhs_spec, out_spec = params["dimension_numbers"]
    x, w = structural.transpose(lhs, tuple(lhs_spec)), structural.transpose(rhs, tuple(rhs_spec))
    config = [(0, 0, 0)] * 2 + [(lo, hi, d - 1) for (lo, hi), d in
                                 zip(params["padding"], params["lhs_dilation"])]
    x = structural.pad(x, 0.0, config)
    (n, c), (o, i), taps = x.shape[:2], w.shape[:2], w.shape[2:]
    patches = _patches(x, taps, spatial, params)  # (N, P, C, T)
    t, p = int(np.prod(taps)), int(np.prod(spatial))
    b, g = params["batch_group_count"], params["feature_group_count"]
    if b == g == 1:
        kernel = structural.reshape(w, (o, c, t))
        out = dot_general(patches, kernel, (((2, 3), (1, 2)), ((), ())))
    else:
        # Groups (as the reference): batch N = (B, N/B), channels C = (G, I), outputs
        # O = (B, G, O/(B G)); each (batch group, feature group) is one product.
        patches = structural.reshape(patches, (b, n // b, p, g, i, t))
        kernel = structural.reshape(w, (b, g, o // (b * g), i, t))
        out = dot_general(patches, kernel, (((4, 5), (3, 4)), ((0, 3), (0, 1))))
        out = structural.transpose(out, (2, 3, 0, 1, 4))  # (B G Nb P J)
        out = structural.reshape(out, (n // b, p, o))
        n //= b
    out = structural.reshape(out, (n, *spatial, o))
    # Our axes hold the canonical dims (N, S..., O); the output's axis a holds canonical
    # dim argsort(out_spec)[a].
    ours = {0: 0, 1: len(spatial) + 1, **{2 + i: 1 + i for i in range(len(spatial))}}
    return structural.transpose(out, tuple(ours[int(d)] for d in np.argsort(out_spec)))


def _patches(x: Any, taps: tuple[int, ...], spatial: tuple[int, ...],
             params: dict[str, Any]) -> Any:
    """The patch matrix (N, P, C, T) of padded ``x`` (N, C, S...): one gather from the
    flattened spatial axes, at positions computed from iotas (so the patch kernel reads
    ``x`` once per element and stores no index array). Slices concatenated took two
    kernels, one storing every slice and one copying them into place: 1.5x the time."""
    n, c, *extents = x.shape
    strides, dilation = params["window_strides"], params["rhs_dilation"]
    t, p = int(np.prod(taps)), int(np.prod(spatial))
    rank, shape = len(spatial), (*spatial, *taps)
    position, flat_stride = None, 1
    for d in reversed(range(rank)):  # position d * stride + tap d * dilation, row-major
        along = (structural.broadcasted_iota(np.int32, shape, d) * (strides[d] * flat_stride)
                 + structural.broadcasted_iota(np.int32, shape, rank + d)
                 * (dilation[d] * flat_stride))
        position = along if position is None else position + along
        flat_stride *= extents[d]
    flat = structural.reshape(x, (n, c, flat_stride))
    dnums = GatherDimensionNumbers(offset_dims=(0, 1), collapsed_slice_dims=(2,),
                                   start_index_map=(2,))
    patches = gather(flat, structural.reshape(position, (p * t, 1)), dnums, (n, c, 1),
                     mode=GatherScatterMode.PROMISE_IN_BOUNDS)  # (N, C, P T)
    # Stored with an axis per position and tap dimension, which the GEMM reads as
    # (N, P, C, T): the patch kernel then loops over each, with no division per element
    # to split a flat position (conv 16x3x16x16 by 16x3x3x3 forward: 149 -> 99 µs).
    rank = len(spatial)
    patches = structural.reshape(patches, (n, c, *spatial, *taps))
    order = (0, *range(2, 2 + rank), 1, *range(2 + rank, 2 + 2 * rank))
    return structural.reshape(structural.transpose(patches, order), (n, p, c, t))
