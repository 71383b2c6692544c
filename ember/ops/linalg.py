"""Contractions: ``dot_general`` (batched matmul with dimension numbers) and
``conv_general_dilated`` (N-d convolution with strides, padding, dilations and groups).

Both follow XLA's semantics. ``dot_general`` lays its output out as batch dimensions,
then the lhs free dimensions, then the rhs free dimensions. The convolution's reference
and its transformation rules work in the canonical layout (batch, feature, spatial...)
and transpose to and from the user's layout, so each rule is written once.

Half-precision inputs accumulate in float32 in the reference, as BLAS and XLA do.
"""
from __future__ import annotations

import enum
from typing import Any, NamedTuple, Sequence

import numpy as np

from ember.core import dtypes
from ember.core.abstract import ShapedArray
from ember.core.primitive import Primitive
from ember.errors import EmberIndexError, EmberTypeError, EmberValueError
from ember.ops.elementwise import convert_element_type
from ember.ops.reductions import accumulator_dtype
from ember.ops.sharding_rules import DimPicker, ShardingDecision, ShardingQuery, dim_of
from ember.ops.structural import reshape, rev, transpose
from ember.ops.rules import (
    UndefinedPrimal, batch_size, defjvp, is_undefined_primal, move_batch_axis)

__all__ = [
    "dot_general", "dot", "batch_matmul", "conv_general_dilated", "conv",
    "conv_with_general_padding", "conv_transpose", "ConvDimensionNumbers",
    "conv_dimension_numbers", "Precision",
]

DotDimensionNumbers = tuple[tuple[tuple[int, ...], tuple[int, ...]],
                            tuple[tuple[int, ...], tuple[int, ...]]]


# --- shared dtype policy ---------------------------------------------------------------

def _result_dtype(name: str, lhs: ShapedArray, rhs: ShapedArray,
                  preferred: np.dtype | None) -> np.dtype:
    if lhs.dtype != rhs.dtype:
        raise EmberTypeError(f"{name}: operand dtypes {lhs.dtype} and {rhs.dtype} differ; "
                             "convert one with .astype(...) first")
    if preferred is None:
        return lhs.dtype
    if dtypes.is_inexact(preferred) != dtypes.is_inexact(lhs.dtype) or (
            dtypes.is_complex(lhs.dtype) and not dtypes.is_complex(preferred)):
        raise EmberTypeError(f"{name}: preferred_element_type {preferred} does not fit "
                             f"inputs of dtype {lhs.dtype}; both must be integer (or bool), "
                             "real floating or complex")
    return preferred


class Precision(enum.Enum):
    """Requested matmul precision (as ``jax.lax.Precision``); recorded in the graph for
    backends that trade precision for speed. The reference always computes exactly."""

    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    @classmethod
    def _missing_(cls, value: object) -> "Precision | None":
        """``Precision('highest')`` and the other names JAX accepts (lower case names,
        'fastest', 'bfloat16', 'tensorfloat32', 'float32')."""
        return _PRECISION_NAMES.get(value) if isinstance(value, str) else None

    def __str__(self) -> str:
        return self.name


_PRECISION_NAMES = {
    "default": Precision.DEFAULT, "fastest": Precision.DEFAULT, "bfloat16": Precision.DEFAULT,
    "high": Precision.HIGH, "tensorfloat32": Precision.HIGH,
    "highest": Precision.HIGHEST, "float32": Precision.HIGHEST,
}


def _canonical_precision(precision: Any) -> Any:
    """None, or a pair of precision names (one per operand), as strings."""
    if precision is None:
        return None
    if isinstance(precision, (tuple, list)):
        if len(precision) != 2:
            raise EmberValueError(f"precision must be one value or a pair, got {precision!r}")
        return tuple(str(getattr(p, "name", p)) for p in precision)
    name = str(getattr(precision, "name", precision))
    return (name, name)


def _preferred(preferred_element_type: Any) -> np.dtype | None:
    if preferred_element_type is None:
        return None
    return dtypes.canonicalize(preferred_element_type)


# --- dot_general -------------------------------------------------------------------------

def _check_dims(name: str, which: str, shape: tuple[int, ...], dims: Sequence[int]) -> None:
    for d in dims:
        if not 0 <= d < len(shape):
            raise EmberIndexError(f"{name}: {which} dimension {d} is out of range for an "
                                  f"operand of shape {shape}")
    if len(set(dims)) != len(dims):
        raise EmberValueError(f"{name}: {which} dimensions {tuple(dims)} repeat a dimension")


def _free_dims(ndim: int, contracting: Sequence[int], batch: Sequence[int]) -> list[int]:
    return [d for d in range(ndim) if d not in contracting and d not in batch]


def _dot_check(lhs: ShapedArray, rhs: ShapedArray, dimension_numbers: DotDimensionNumbers):
    (lc, rc), (lb, rb) = dimension_numbers
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise EmberValueError(f"dot_general: dimension numbers {dimension_numbers} pair "
                              "unequal numbers of lhs and rhs dimensions")
    _check_dims("dot_general", "lhs", lhs.shape, (*lc, *lb))
    _check_dims("dot_general", "rhs", rhs.shape, (*rc, *rb))
    for kind, ldims, rdims in (("contracting", lc, rc), ("batch", lb, rb)):
        for l, r in zip(ldims, rdims):
            if lhs.shape[l] != rhs.shape[r]:
                raise EmberValueError(
                    f"dot_general: {kind} dimension {l} of lhs {lhs.shape} has size "
                    f"{lhs.shape[l]} but {kind} dimension {r} of rhs {rhs.shape} has size "
                    f"{rhs.shape[r]}")


dot_general_p = Primitive("dot_general")


@dot_general_p.def_abstract_eval
def _dot_general_abstract(lhs: ShapedArray, rhs: ShapedArray, *,
                          dimension_numbers: DotDimensionNumbers, precision: Any,
                          preferred_element_type: np.dtype | None) -> ShapedArray:
    _dot_check(lhs, rhs, dimension_numbers)
    dtype = _result_dtype("dot_general", lhs, rhs, preferred_element_type)
    (lc, rc), (lb, rb) = dimension_numbers
    shape = (*(lhs.shape[d] for d in lb),
             *(lhs.shape[d] for d in _free_dims(lhs.ndim, lc, lb)),
             *(rhs.shape[d] for d in _free_dims(rhs.ndim, rc, rb)))
    return ShapedArray(shape, dtype)


@dot_general_p.def_impl
def _dot_general_impl(lhs, rhs, *, dimension_numbers, precision, preferred_element_type):
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    (lc, rc), (lb, rb) = dimension_numbers
    out_dtype = preferred_element_type or lhs.dtype
    acc = accumulator_dtype(out_dtype)
    lfree, rfree = _free_dims(lhs.ndim, lc, lb), _free_dims(rhs.ndim, rc, rb)
    batch_shape = tuple(lhs.shape[d] for d in lb)
    lfree_shape = tuple(lhs.shape[d] for d in lfree)
    rfree_shape = tuple(rhs.shape[d] for d in rfree)
    size = lambda shape: int(np.prod(shape, dtype=np.int64))  # noqa: E731
    k = size([lhs.shape[d] for d in lc])
    a = lhs.transpose((*lb, *lfree, *lc)).astype(acc).reshape(
        size(batch_shape), size(lfree_shape), k)
    b = rhs.transpose((*rb, *rc, *rfree)).astype(acc).reshape(
        size(batch_shape), k, size(rfree_shape))
    with np.errstate(all="ignore"):
        out = np.matmul(a, b)
    return out.reshape(batch_shape + lfree_shape + rfree_shape).astype(out_dtype)


def _canonical_dot_dims(dimension_numbers: Any) -> DotDimensionNumbers:
    try:
        (lc, rc), (lb, rb) = dimension_numbers
        return ((tuple(map(int, lc)), tuple(map(int, rc))),
                (tuple(map(int, lb)), tuple(map(int, rb))))
    except (TypeError, ValueError):
        raise EmberValueError(
            "dot_general: dimension_numbers must be ((lhs_contracting, rhs_contracting), "
            f"(lhs_batch, rhs_batch)), got {dimension_numbers!r}") from None


def dot_general(lhs: Any, rhs: Any, dimension_numbers: Any, precision: Any = None,
                preferred_element_type: Any = None) -> Any:
    """General tensor contraction (XLA's DotGeneral).

    ``dimension_numbers = ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch))``.
    The result has the batch dimensions first, then lhs free, then rhs free dimensions.
    """
    return dot_general_p.bind(lhs, rhs, dimension_numbers=_canonical_dot_dims(dimension_numbers),
                              precision=_canonical_precision(precision),
                              preferred_element_type=_preferred(preferred_element_type))


def dot(lhs: Any, rhs: Any, *, dimension_numbers: Any = None, precision: Any = None,
        preferred_element_type: Any = None) -> Any:
    """Vector/vector, matrix/vector and matrix/matrix products (contracts the last lhs
    dimension with the first rhs dimension), or ``dot_general`` when
    ``dimension_numbers`` are given (as ``jax.lax.dot``)."""
    if dimension_numbers is None:
        lhs_ndim, rhs_ndim = len(np.shape(lhs)), len(np.shape(rhs))
        if not (1 <= lhs_ndim <= 2 and 1 <= rhs_ndim <= 2):
            raise EmberValueError(f"dot takes 1-d or 2-d operands, got shapes "
                                  f"{np.shape(lhs)} and {np.shape(rhs)}; pass "
                                  "dimension_numbers (or use dot_general) for higher ranks")
        dimension_numbers = (((lhs_ndim - 1,), (0,)), ((), ()))
    return dot_general(lhs, rhs, dimension_numbers, precision, preferred_element_type)


def batch_matmul(lhs: Any, rhs: Any, precision: Any = None) -> Any:
    """Matrix products of stacks ``(..., m, k) @ (..., k, n)`` with equal leading dims."""
    ndim = len(np.shape(lhs))
    if ndim < 2 or len(np.shape(rhs)) != ndim:
        raise EmberValueError(f"batch_matmul needs operands of one rank >= 2, got shapes "
                              f"{np.shape(lhs)} and {np.shape(rhs)}")
    batch = tuple(range(ndim - 2))
    return dot_general(lhs, rhs, (((ndim - 1,), (ndim - 2,)), (batch, batch)), precision)


# --- convolution: dimension numbers and padding -----------------------------------------

class ConvDimensionNumbers(NamedTuple):
    """Where each logical dimension lives: ``lhs_spec = (batch, feature, *spatial)``,
    ``rhs_spec = (out feature, in feature, *spatial)``, ``out_spec = (batch, feature,
    *spatial)``; spatial dimensions correspond in order."""

    lhs_spec: tuple[int, ...]
    rhs_spec: tuple[int, ...]
    out_spec: tuple[int, ...]


def _spec_from_string(spec: str, major: str, minor: str, spatial: Sequence[str],
                      ndim: int) -> tuple[int, ...]:
    if len(spec) != ndim or sorted(spec) != sorted(major + minor + "".join(spatial)):
        raise EmberValueError(
            f"conv dimension numbers: {spec!r} must name each of {major!r}, {minor!r} and "
            f"the spatial dimensions {''.join(spatial)!r} once, for rank-{ndim} operands")
    return (spec.index(major), spec.index(minor), *(spec.index(s) for s in spatial))


def conv_dimension_numbers(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                           dimension_numbers: Any) -> ConvDimensionNumbers:
    """Canonical ``ConvDimensionNumbers`` from None (NCHW / OIHW / NCHW), strings such as
    ``('NHWC', 'HWIO', 'NHWC')`` (spatial dimensions ordered as in the rhs string), or
    integer specs."""
    ndim = len(lhs_shape)
    if len(rhs_shape) != ndim:
        raise EmberValueError(f"conv: lhs shape {tuple(lhs_shape)} and rhs shape "
                              f"{tuple(rhs_shape)} must have the same rank")
    if dimension_numbers is None:
        canonical = tuple(range(ndim))
        return ConvDimensionNumbers(canonical, canonical, canonical)
    if len(dimension_numbers) != 3:
        raise EmberValueError(f"conv: dimension_numbers must be (lhs, rhs, out) specs, got "
                              f"{dimension_numbers!r}")
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    if isinstance(lhs_spec, str):
        spatial = [c for c in rhs_spec if c not in "OI"]
        return ConvDimensionNumbers(_spec_from_string(lhs_spec, "N", "C", spatial, ndim),
                                    _spec_from_string(rhs_spec, "O", "I", spatial, ndim),
                                    _spec_from_string(out_spec, "N", "C", spatial, ndim))
    specs = tuple(tuple(int(d) for d in spec) for spec in dimension_numbers)
    for spec in specs:
        if sorted(spec) != list(range(ndim)):
            raise EmberValueError(f"conv: dimension spec {spec} is not a permutation of the "
                                  f"{ndim} dimensions")
    return ConvDimensionNumbers(*specs)


def _dilated(size: int, dilation: int) -> int:
    return 0 if size == 0 else (size - 1) * dilation + 1


def _same_padding(in_sizes: Sequence[int], windows: Sequence[int], strides: Sequence[int],
                  lower: bool) -> tuple[tuple[int, int], ...]:
    pads = []
    for size, window, stride in zip(in_sizes, windows, strides):
        out = -(-size // stride)
        total = max((out - 1) * stride + window - size, 0)
        low = total - total // 2 if lower else total // 2
        pads.append((low, total - low))
    return tuple(pads)


def padding_pairs(padding: Any, in_sizes: Sequence[int], windows: Sequence[int],
                  strides: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """Explicit (low, high) pairs from 'SAME' / 'SAME_LOWER' / 'VALID' or pairs."""
    if isinstance(padding, str):
        mode = padding.upper()
        if mode == "VALID":
            return tuple((0, 0) for _ in in_sizes)
        if mode in ("SAME", "SAME_LOWER"):
            return _same_padding(in_sizes, windows, strides, lower=mode == "SAME_LOWER")
        raise EmberValueError(f"unknown padding {padding!r}; use 'SAME', 'SAME_LOWER', "
                              "'VALID' or a sequence of (low, high) pairs")
    try:
        pairs = tuple((int(lo), int(hi)) for lo, hi in padding)
    except (TypeError, ValueError):
        raise EmberValueError(f"padding must be a string or (low, high) pairs, got "
                              f"{padding!r}") from None
    if len(pairs) != len(in_sizes):
        raise EmberValueError(f"padding {pairs} has {len(pairs)} pairs for "
                              f"{len(in_sizes)} spatial dimensions")
    return pairs


def conv_output_size(size: int, window: int, stride: int, pad: tuple[int, int],
                     lhs_dilation: int, rhs_dilation: int) -> int:
    padded = _dilated(size, lhs_dilation) + pad[0] + pad[1]
    window = _dilated(window, rhs_dilation)
    return 0 if padded < window else (padded - window) // stride + 1


# --- convolution: the primitive ------------------------------------------------------------

conv_general_dilated_p = Primitive("conv_general_dilated")


def _check_conv_params(lhs: ShapedArray, rhs: ShapedArray, nspatial: int,
                       params: dict[str, Any]) -> None:
    for name in ("window_strides", "lhs_dilation", "rhs_dilation", "padding"):
        if len(params[name]) != nspatial:
            raise EmberValueError(f"conv_general_dilated: {name}={params[name]} needs one "
                                  f"entry per spatial dimension ({nspatial}) of lhs "
                                  f"{lhs.shape} and rhs {rhs.shape}")
    for name in ("window_strides", "lhs_dilation", "rhs_dilation"):
        if any(v < 1 for v in params[name]):
            raise EmberValueError(f"conv_general_dilated: {name}={params[name]} must be "
                                  "positive")


def _check_groups(lhs_c: tuple[int, ...], rhs_c: tuple[int, ...], groups: int,
                  batch_groups: int) -> None:
    """``lhs_c`` and ``rhs_c`` are the canonical shapes (N, C, ...) and (O, I, ...)."""
    n, c, o, i = lhs_c[0], lhs_c[1], rhs_c[0], rhs_c[1]
    if groups < 1 or batch_groups < 1:
        raise EmberValueError("conv_general_dilated: feature_group_count and "
                              "batch_group_count must be positive")
    if groups > 1 and batch_groups > 1:
        raise EmberValueError("conv_general_dilated: at most one of feature_group_count "
                              f"({groups}) and batch_group_count ({batch_groups}) may exceed 1")
    if c % groups or c // groups != i:
        raise EmberValueError(
            f"conv_general_dilated: lhs feature size {c} must equal rhs input feature size "
            f"{i} times feature_group_count {groups}")
    if o % groups or o % batch_groups:
        raise EmberValueError(
            f"conv_general_dilated: rhs output feature size {o} must be a multiple of "
            f"feature_group_count {groups} and batch_group_count {batch_groups}")
    if n % batch_groups:
        raise EmberValueError(f"conv_general_dilated: lhs batch size {n} must be a multiple "
                              f"of batch_group_count {batch_groups}")


@conv_general_dilated_p.def_abstract_eval
def _conv_abstract(lhs: ShapedArray, rhs: ShapedArray, **params: Any) -> ShapedArray:
    if lhs.ndim != rhs.ndim or lhs.ndim < 2:
        raise EmberValueError(f"conv_general_dilated: lhs {lhs.shape} and rhs {rhs.shape} "
                              "need the same rank, at least 2")
    if dtypes.is_bool(lhs.dtype):
        raise EmberTypeError("conv_general_dilated does not accept bool operands")
    dtype = _result_dtype("conv_general_dilated", lhs, rhs, params["preferred_element_type"])
    lhs_spec, rhs_spec, out_spec = params["dimension_numbers"]
    lhs_c = tuple(lhs.shape[d] for d in lhs_spec)
    rhs_c = tuple(rhs.shape[d] for d in rhs_spec)
    _check_conv_params(lhs, rhs, lhs.ndim - 2, params)
    _check_groups(lhs_c, rhs_c, params["feature_group_count"], params["batch_group_count"])
    spatial = tuple(conv_output_size(*args) for args in zip(
        lhs_c[2:], rhs_c[2:], params["window_strides"], params["padding"],
        params["lhs_dilation"], params["rhs_dilation"]))
    out_c = (lhs_c[0] // params["batch_group_count"], rhs_c[0], *spatial)
    return ShapedArray(tuple(out_c[i] for i in np.argsort(out_spec)), dtype)


def _dilate_and_pad(x: np.ndarray, dilation: Sequence[int],
                    padding: Sequence[tuple[int, int]]) -> np.ndarray:
    """Insert ``dilation - 1`` zeros between spatial elements, then pad (negative: crop)."""
    spatial = x.shape[2:]
    dilated = np.zeros(x.shape[:2] + tuple(_dilated(s, d) for s, d in zip(spatial, dilation)),
                       x.dtype)
    dilated[(slice(None), slice(None), *(slice(None, None, d) for d in dilation))] = x
    grow = [(0, 0), (0, 0)] + [(max(lo, 0), max(hi, 0)) for lo, hi in padding]
    padded = np.pad(dilated, grow)
    crop = tuple(slice(max(-lo, 0), padded.shape[i + 2] - max(-hi, 0))
                 for i, (lo, hi) in enumerate(padding))
    return padded[(slice(None), slice(None), *crop)]


def _conv_canonical(x: np.ndarray, w: np.ndarray, out_shape: tuple[int, ...], *,
                    window_strides, rhs_dilation, feature_group_count,
                    batch_group_count) -> np.ndarray:
    """Convolution of dilated, padded ``x`` (N, C, ...) with ``w`` (O, I, ...)."""
    if 0 in out_shape or 0 in w.shape[2:]:
        return np.zeros(out_shape, x.dtype)
    nspatial = x.ndim - 2
    windows = np.lib.stride_tricks.sliding_window_view(
        x, tuple(_dilated(k, d) for k, d in zip(w.shape[2:], rhs_dilation)),
        axis=tuple(range(2, 2 + nspatial)))
    windows = windows[(slice(None), slice(None), *(slice(None, None, s) for s in window_strides),
                       *(slice(None, None, d) for d in rhs_dilation))]
    n, c, o = x.shape[0], x.shape[1], w.shape[0]
    b, g = batch_group_count, feature_group_count
    npos, ktaps = int(np.prod(out_shape[2:])), int(np.prod(w.shape[2:]))
    lhs = windows.reshape(b, n // b, g, c // g, npos, ktaps)
    rhs = w.reshape(b, g, o // (b * g), c // g, ktaps)
    out = np.einsum("bngcxk,bgjck->nbgjx", lhs, rhs, optimize=True)
    return out.reshape(out_shape)


@conv_general_dilated_p.def_impl
def _conv_impl(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
               dimension_numbers, feature_group_count, batch_group_count, precision,
               preferred_element_type):
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    out_dtype = preferred_element_type or lhs.dtype
    acc = accumulator_dtype(out_dtype)
    x = _dilate_and_pad(lhs.transpose(lhs_spec).astype(acc), lhs_dilation, padding)
    w = rhs.transpose(rhs_spec).astype(acc)
    spatial = tuple(conv_output_size(*args) for args in zip(
        lhs.transpose(lhs_spec).shape[2:], w.shape[2:], window_strides, padding,
        lhs_dilation, rhs_dilation))
    out_shape = (x.shape[0] // batch_group_count, w.shape[0], *spatial)
    with np.errstate(all="ignore"):
        out = _conv_canonical(x, w, out_shape, window_strides=window_strides,
                              rhs_dilation=rhs_dilation, feature_group_count=feature_group_count,
                              batch_group_count=batch_group_count)
    return out.transpose(np.argsort(out_spec)).astype(out_dtype)


def _ints(name: str, values: Sequence[int] | None, count: int) -> tuple[int, ...]:
    if values is None:
        return (1,) * count
    values = tuple(int(v) for v in values)
    if len(values) != count:
        raise EmberValueError(f"conv_general_dilated: {name}={values} needs {count} entries "
                              "(one per spatial dimension)")
    return values


def conv_general_dilated(lhs: Any, rhs: Any, window_strides: Sequence[int], padding: Any,
                         lhs_dilation: Sequence[int] | None = None,
                         rhs_dilation: Sequence[int] | None = None,
                         dimension_numbers: Any = None, feature_group_count: int = 1,
                         batch_group_count: int = 1, precision: Any = None,
                         preferred_element_type: Any = None) -> Any:
    """General N-d convolution (XLA's ConvGeneralDilated), as ``jax.lax.conv_general_dilated``.

    ``padding`` is 'SAME', 'SAME_LOWER', 'VALID' or one (low, high) pair per spatial
    dimension (negative values crop). ``lhs_dilation`` > 1 gives a transposed
    convolution; ``rhs_dilation`` > 1 an atrous one. String padding is computed from the
    undilated lhs and the dilated kernel, as JAX does.
    """
    lhs_shape, rhs_shape = np.shape(lhs), np.shape(rhs)
    dnums = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    nspatial = len(lhs_shape) - 2
    strides = _ints("window_strides", window_strides, nspatial)
    lhs_dilation = _ints("lhs_dilation", lhs_dilation, nspatial)
    rhs_dilation = _ints("rhs_dilation", rhs_dilation, nspatial)
    windows = [_dilated(rhs_shape[d], r) for d, r in zip(dnums.rhs_spec[2:], rhs_dilation)]
    pads = padding_pairs(padding, [lhs_shape[d] for d in dnums.lhs_spec[2:]], windows, strides)
    return conv_general_dilated_p.bind(
        lhs, rhs, window_strides=strides, padding=pads, lhs_dilation=lhs_dilation,
        rhs_dilation=rhs_dilation, dimension_numbers=dnums,
        feature_group_count=int(feature_group_count), batch_group_count=int(batch_group_count),
        precision=_canonical_precision(precision),
        preferred_element_type=_preferred(preferred_element_type))


def conv_with_general_padding(lhs: Any, rhs: Any, window_strides: Sequence[int],
                              padding: Any, lhs_dilation: Sequence[int] | None,
                              rhs_dilation: Sequence[int] | None, precision: Any = None,
                              preferred_element_type: Any = None) -> Any:
    """``conv_general_dilated`` in the NCHW / OIHW layout, without groups."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                                precision=precision,
                                preferred_element_type=preferred_element_type)


def conv(lhs: Any, rhs: Any, window_strides: Sequence[int], padding: Any,
         precision: Any = None, preferred_element_type: Any = None) -> Any:
    """Convolution in the NCHW / OIHW layout with no dilation or groups (``jax.lax.conv``)."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def _transposed_padding(padding: str, window: int, stride: int) -> tuple[int, int]:
    """Padding of the input-dilated convolution that transposes a forward convolution with
    ``padding`` ('SAME' or 'VALID'), ``window`` (dilated kernel size) and ``stride``:
    the output has ``in * stride`` ('SAME') or ``in * stride + max(window - stride, 0)``
    ('VALID') elements, and the forward low padding p becomes ``window - 1 - p``."""
    mode = padding.upper()
    if mode not in ("SAME", "VALID"):
        raise EmberValueError(f"conv_transpose: padding must be 'SAME', 'VALID' or (low, high) "
                              f"pairs, got {padding!r}")
    overlap = max(window - stride, 0)
    forward_low = overlap // 2 if mode == "SAME" else 0
    total = window + stride - 2 + (overlap if mode == "VALID" else 0)
    low = window - 1 - forward_low
    return low, total - low


def _channels_last(ndim: int) -> tuple[str, str, str]:
    spatial = "HWD"[:ndim - 2]
    if ndim - 2 > len("HWD"):
        raise EmberValueError(f"conv_transpose: no default dimension_numbers for rank {ndim}; "
                              "pass them explicitly")
    return f"N{spatial}C", f"{spatial}IO", f"N{spatial}C"


def conv_transpose(lhs: Any, rhs: Any, strides: Sequence[int], padding: Any,
                   rhs_dilation: Sequence[int] | None = None, dimension_numbers: Any = None,
                   transpose_kernel: bool = False, precision: Any = None,
                   preferred_element_type: Any = None,
                   use_consistent_padding: bool = False) -> Any:
    """Transposed ("fractionally strided") convolution, as ``jax.lax.conv_transpose``:
    the input is dilated by ``strides``. Layouts default to channels-last (NHWC / HWIO).
    With ``transpose_kernel`` the kernel's spatial axes are flipped and its feature axes
    swapped, which makes this the gradient of a forward convolution with that kernel.
    A padding string describes the forward convolution; (low, high) pairs describe this
    one, unless ``use_consistent_padding``, when they too are the forward padding."""
    ndim = len(np.shape(lhs))
    dnums = conv_dimension_numbers(np.shape(lhs), np.shape(rhs), _channels_last(ndim)
                                   if dimension_numbers is None else dimension_numbers)
    strides = _ints("strides", strides, ndim - 2)
    rhs_dilation = _ints("rhs_dilation", rhs_dilation, ndim - 2)
    windows = [_dilated(np.shape(rhs)[d], r) for d, r in zip(dnums.rhs_spec[2:], rhs_dilation)]
    if isinstance(padding, str):
        padding = tuple(_transposed_padding(padding, w, s) for w, s in zip(windows, strides))
    elif use_consistent_padding:  # forward (low, high) -> window - 1 - each
        padding = tuple((w - 1 - int(lo), w - 1 - int(hi))
                        for w, (lo, hi) in zip(windows, padding))
    if transpose_kernel:
        out_axis, in_axis = dnums.rhs_spec[:2]
        perm = list(range(ndim))
        perm[out_axis], perm[in_axis] = in_axis, out_axis
        rhs = transpose(rev(rhs, dnums.rhs_spec[2:]), perm)
    return conv_general_dilated(lhs, rhs, (1,) * (ndim - 2), padding, strides, rhs_dilation,
                                dnums, precision=precision,
                                preferred_element_type=preferred_element_type)


# --- dot_general rules ---------------------------------------------------------------------

defjvp(dot_general_p,
       lambda t, lhs, rhs, **params: dot_general_p.bind(t, rhs, **params),
       lambda t, lhs, rhs, **params: dot_general_p.bind(lhs, t, **params))


def _dot_cotangent(ct: Any, other: Any, ours: ShapedArray, our_dims: tuple, other_dims: tuple,
                   other_free_in_ct: Sequence[int], precision: Any) -> Any:
    """Cotangent of one operand: contract ``ct`` with the other operand over the other's
    free dimensions, then put the result's dimensions in our order."""
    (our_contract, our_batch), (other_contract, other_batch) = our_dims, other_dims
    other_aval = ShapedArray(np.shape(other), other.dtype)
    if other.dtype != ct.dtype:
        other = convert_element_type(other, ct.dtype)
    other_free = _free_dims(other_aval.ndim, other_contract, other_batch)
    dims = ((tuple(other_free_in_ct), tuple(other_free)),
            (tuple(range(len(our_batch))), tuple(other_batch)))
    out = dot_general(ct, other, dims, precision)
    our_free = _free_dims(ours.ndim, our_contract, our_batch)
    out_to_ours = [*our_batch, *our_free,
                   *(our_contract[other_contract.index(d)] for d in sorted(other_contract))]
    return convert_element_type(transpose(out, tuple(np.argsort(out_to_ours))), ours.dtype)


def _dot_general_transpose(ct: Any, lhs: Any, rhs: Any, *, dimension_numbers, precision,
                           preferred_element_type) -> list:
    (lc, rc), (lb, rb) = dimension_numbers
    nb = len(lb)
    if is_undefined_primal(lhs):
        n_lfree = lhs.ndim - len(lc) - nb
        rhs_free_in_ct = range(nb + n_lfree, ct.ndim)
        return [_dot_cotangent(ct, rhs, lhs.aval, (lc, lb), (rc, rb), rhs_free_in_ct,
                               precision), None]
    n_lfree = lhs.ndim - len(lc) - nb
    lhs_free_in_ct = range(nb, nb + n_lfree)
    return [None, _dot_cotangent(ct, lhs, rhs.aval, (rc, rb), (lc, lb), lhs_free_in_ct,
                                 precision)]


dot_general_p.def_transpose(_dot_general_transpose)


def _shifted(dims: Sequence[int]) -> tuple[int, ...]:
    return tuple(d + 1 for d in dims)


def _dot_general_batch(values: Sequence[Any], dims: Sequence[int | None], *,
                       dimension_numbers, **params: Any):
    """A batch axis on both operands becomes a new leading batch dimension; on one
    operand it becomes that operand's first free dimension."""
    (lhs, rhs), (ldim, rdim) = values, dims
    (lc, rc), (lb, rb) = dimension_numbers
    size = batch_size(values, dims)
    if ldim is not None:
        lhs, lc, lb = move_batch_axis(lhs, ldim, 0, size), _shifted(lc), _shifted(lb)
    if rdim is not None:
        rhs, rc, rb = move_batch_axis(rhs, rdim, 0, size), _shifted(rc), _shifted(rb)
    if ldim is not None and rdim is not None:
        lb, rb = (0, *lb), (0, *rb)
        out_dim = 0
    elif ldim is not None:
        out_dim = len(lb)
    else:
        out_dim = len(lb) + np.ndim(lhs) - len(lc) - len(lb)
    out = dot_general_p.bind(lhs, rhs, dimension_numbers=((lc, rc), (lb, rb)), **params)
    return out, out_dim


dot_general_p.def_batch(_dot_general_batch)


# --- convolution rules (in the canonical layout) ------------------------------------------

def _canonical(x: Any, spec: Sequence[int]) -> Any:
    return transpose(x, tuple(spec))


def _from_canonical(x: Any, spec: Sequence[int]) -> Any:
    return transpose(x, tuple(np.argsort(spec)))


def _swap_leading(x: Any) -> Any:
    return transpose(x, (1, 0, *range(2, np.ndim(x))))


def _conv_canonical_bind(lhs: Any, rhs: Any, params: dict, **changes: Any) -> Any:
    """Bind a convolution of canonically laid out operands (NC..., OI..., NC...)."""
    ndim = np.ndim(lhs)
    canonical = tuple(range(ndim))
    merged = {**params, **changes,
              "dimension_numbers": ConvDimensionNumbers(canonical, canonical, canonical)}
    return conv_general_dilated_p.bind(lhs, rhs, **merged)


def _split_axis(x: Any, axis: int, parts: int) -> Any:
    shape = list(np.shape(x))
    shape[axis:axis + 1] = [parts, shape[axis] // parts]
    return reshape(x, shape)


def _merge_axes(x: Any, axis: int) -> Any:
    """Merge ``axis`` and ``axis + 1`` (row-major)."""
    shape = list(np.shape(x))
    shape[axis:axis + 2] = [shape[axis] * shape[axis + 1]]
    return reshape(x, shape)


def _move_axis(x: Any, src: int, dst: int) -> Any:
    perm = [d for d in range(np.ndim(x)) if d != src]
    perm.insert(dst, src)
    return transpose(x, perm)


def _group_swapped_kernel(w: Any, groups: int) -> Any:
    """(O, I, K...) -> (groups * I, O / groups, K...): the kernel of the transposed
    convolution, whose input features are our outputs, group by group."""
    w = _split_axis(w, 0, groups)      # (G, O/G, I, K)
    w = _move_axis(w, 2, 1)            # (G, I, O/G, K)
    return _merge_axes(w, 0)


def _conv_transpose_lhs(ct: Any, lhs: UndefinedPrimal, rhs: Any, **params: Any) -> Any:
    lhs_spec, rhs_spec, out_spec = params["dimension_numbers"]
    g, w = _canonical(ct, out_spec), _canonical(rhs, rhs_spec)
    if w.dtype != g.dtype:
        w = convert_element_type(w, g.dtype)
    lhs_shape = tuple(lhs.shape[d] for d in lhs_spec)
    groups = max(params["feature_group_count"], params["batch_group_count"])
    nspatial = len(lhs_shape) - 2
    kernel = rev(_group_swapped_kernel(w, groups), tuple(range(2, 2 + nspatial)))
    pads = []
    for size, k, out, stride, (lo, _), ld, rd in zip(
            lhs_shape[2:], np.shape(w)[2:], np.shape(g)[2:], params["window_strides"],
            params["padding"], params["lhs_dilation"], params["rhs_dilation"]):
        pads.append((_dilated(k, rd) - 1 - lo, _dilated(size, ld) + lo - _dilated(out, stride)))
    out = _conv_canonical_bind(
        g, kernel, params, window_strides=params["lhs_dilation"], padding=tuple(pads),
        lhs_dilation=params["window_strides"], feature_group_count=groups,
        batch_group_count=1)
    if params["batch_group_count"] > 1:  # (N/B, B*C, ...) -> (N, C, ...), group-major
        out = _merge_axes(_move_axis(_split_axis(out, 1, groups), 1, 0), 0)
    return _from_canonical(convert_element_type(out, lhs.dtype), lhs_spec)


def _conv_transpose_rhs(ct: Any, lhs: Any, rhs: UndefinedPrimal, **params: Any) -> Any:
    lhs_spec, rhs_spec, out_spec = params["dimension_numbers"]
    x, g = _canonical(lhs, lhs_spec), _canonical(ct, out_spec)
    if x.dtype != g.dtype:
        x = convert_element_type(x, g.dtype)
    kernel_shape = tuple(rhs.shape[d] for d in rhs_spec)
    pads = []
    for size, k, out, stride, (lo, _), ld, rd in zip(
            np.shape(x)[2:], kernel_shape[2:], np.shape(g)[2:], params["window_strides"],
            params["padding"], params["lhs_dilation"], params["rhs_dilation"]):
        pads.append((lo, (k - 1) * rd + _dilated(out, stride) - _dilated(size, ld) - lo))
    # Batch and feature swap roles: feature groups become batch groups and vice versa.
    out = _conv_canonical_bind(
        _swap_leading(x), _swap_leading(g), params, window_strides=params["rhs_dilation"],
        padding=tuple(pads), rhs_dilation=params["window_strides"],
        feature_group_count=params["batch_group_count"],
        batch_group_count=params["feature_group_count"])
    return _from_canonical(convert_element_type(_swap_leading(out), rhs.dtype), rhs_spec)


def _conv_transpose(ct: Any, lhs: Any, rhs: Any, **params: Any) -> list:
    if is_undefined_primal(lhs):
        return [_conv_transpose_lhs(ct, lhs, rhs, **params), None]
    return [None, _conv_transpose_rhs(ct, lhs, rhs, **params)]


defjvp(conv_general_dilated_p,
       lambda t, lhs, rhs, **params: conv_general_dilated_p.bind(t, rhs, **params),
       lambda t, lhs, rhs, **params: conv_general_dilated_p.bind(lhs, t, **params))
conv_general_dilated_p.def_transpose(_conv_transpose)


def _batched_canonical(x: Any, bdim: int, spec: Sequence[int]) -> Any:
    """Batch axis first, then the operand's dimensions in canonical order."""
    return transpose(x, (bdim, *(d + (d >= bdim) for d in spec)))


def _vmapped_lhs(x: Any, w: Any, params: dict) -> Any:
    """x (V, N, C, ...): V joins the batch inside each batch group, (B, V, N/B)."""
    size, batch_groups = np.shape(x)[0], params["batch_group_count"]
    x = _merge_axes(_move_axis(_split_axis(x, 1, batch_groups), 1, 0), 0)
    out = _conv_canonical_bind(_merge_axes(x, 0), w, params)
    return _split_axis(out, 0, size)


def _vmapped_rhs(x: Any, w: Any, params: dict) -> Any:
    """w (V, O, I, ...): V joins the output features inside each group, (G, V, O/G)."""
    size = np.shape(w)[0]
    groups = params["feature_group_count"] * params["batch_group_count"]
    w = _merge_axes(_merge_axes(_move_axis(_split_axis(w, 1, groups), 1, 0), 0), 0)
    out = _conv_canonical_bind(x, w, params)
    out = _split_axis(_split_axis(out, 1, groups), 2, size)   # (N/B, G, V, O/G, ...)
    return _merge_axes(_move_axis(out, 2, 0), 2)


def _vmapped_both(x: Any, w: Any, params: dict) -> Any:
    """Each of the V examples becomes its own group: batch groups if the convolution
    already has them (they own the lhs batch), feature groups otherwise."""
    size = np.shape(x)[0]
    w = _merge_axes(w, 0)                                      # (V*O, I, ...)
    if params["batch_group_count"] > 1:
        out = _conv_canonical_bind(_merge_axes(x, 0), w, params,
                                   batch_group_count=size * params["batch_group_count"])
    else:
        out = _conv_canonical_bind(_merge_axes(_move_axis(x, 0, 1), 1), w, params,
                                   feature_group_count=size * params["feature_group_count"])
    return _move_axis(_split_axis(out, 1, size), 1, 0)


def _conv_batch(values: Sequence[Any], dims: Sequence[int | None], **params: Any):
    """Fold the vmapped axis into the lhs batch, the rhs output features, or the groups,
    working in the canonical layout with the vmapped axis first."""
    (lhs, rhs), (ldim, rdim) = values, dims
    lhs_spec, rhs_spec, out_spec = params["dimension_numbers"]
    if rdim is None:
        out = _vmapped_lhs(_batched_canonical(lhs, ldim, lhs_spec), _canonical(rhs, rhs_spec),
                           params)
    elif ldim is None:
        out = _vmapped_rhs(_canonical(lhs, lhs_spec), _batched_canonical(rhs, rdim, rhs_spec),
                           params)
    else:
        out = _vmapped_both(_batched_canonical(lhs, ldim, lhs_spec),
                            _batched_canonical(rhs, rdim, rhs_spec), params)
    # out is (V, N/B, O, ...); put each example's dimensions in the user's output layout
    return transpose(out, (0, *(1 + p for p in np.argsort(out_spec)))), 0


conv_general_dilated_p.def_batch(_conv_batch)


# --- sharding rules -------------------------------------------------------------------

def _dot_general_sharding(query: ShardingQuery) -> ShardingDecision:
    """Batch and free dimensions carry their split to the result; a split contracting
    dimension (the same on both operands) leaves each shard a partial sum. Splits come
    from the operands first (batch, then free, then contracting dimensions), then from
    what the result is wanted as."""
    lhs, rhs = query.in_avals
    (lc, rc), (lb, rb) = query.params["dimension_numbers"]
    lfree, rfree = _free_dims(lhs.ndim, lc, lb), _free_dims(rhs.ndim, rc, rb)
    nb = len(lb)
    # (lhs dimension, rhs dimension, result dimension) of every group of dimensions
    groups = ([(lb[i], rb[i], i) for i in range(nb)]
              + [(d, None, nb + k) for k, d in enumerate(lfree)]
              + [(None, d, nb + len(lfree) + k) for k, d in enumerate(rfree)]
              + [(lc[k], rc[k], None) for k in range(len(lc))])
    picker = DimPicker(query)
    chosen: dict[int, tuple[str, ...] | None] = {}
    for g, (ld, rd, od) in enumerate(groups):
        size = lhs.shape[ld] if ld is not None else rhs.shape[rd]
        chosen[g] = picker.pick([dim_of(query.inputs[0], ld), dim_of(query.inputs[1], rd)],
                                size)
    for g, (ld, rd, od) in enumerate(groups):
        if chosen[g] is None and od is not None:
            size = lhs.shape[ld] if ld is not None else rhs.shape[rd]
            chosen[g] = picker.pick([dim_of(dims, od) for dims in query.outputs], size)
    left: list = [None] * lhs.ndim
    right: list = [None] * rhs.ndim
    out: list = [None] * query.out_avals[0].ndim
    partial: list[str] = []
    for g, (ld, rd, od) in enumerate(groups):
        if ld is not None:
            left[ld] = chosen[g]
        if rd is not None:
            right[rd] = chosen[g]
        if od is not None:
            out[od] = chosen[g]
        else:
            partial += list(chosen[g] or ())
    return ShardingDecision([tuple(left), tuple(right)], [tuple(out)], tuple(partial))


dot_general_p.def_sharding(_dot_general_sharding)
conv_general_dilated_p.waive("sharding", "not split yet: computed on whole operands")
