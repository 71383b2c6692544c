"""dot_general and conv_general_dilated against NumPy oracles; errors; jit vs eager."""
import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ember
from ember import lax
from ember.errors import EmberIndexError, EmberTypeError, EmberValueError
from ember.ops.linalg import ConvDimensionNumbers, conv_dimension_numbers, padding_pairs
from ember.test_util import check_grads, check_vmap

LETTERS = "abcdefghij"


@st.composite
def dot_problem(draw):
    """Operands, dimension numbers and the equivalent einsum subscripts."""
    counts = [draw(st.integers(0, 2)) for _ in range(4)]  # batch, contracting, lhs/rhs free
    sizes = [draw(st.integers(0, 3)) for _ in range(sum(counts))]
    letters = iter(LETTERS)
    batch, contract, lfree, rfree = ([next(letters) for _ in range(n)] for n in counts)
    lhs_order = draw(st.permutations(batch + contract + lfree))
    rhs_order = draw(st.permutations(batch + contract + rfree))
    size = dict(zip(LETTERS, sizes))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    lhs = rng.standard_normal([size[c] for c in lhs_order]).astype(np.float32)
    rhs = rng.standard_normal([size[c] for c in rhs_order]).astype(np.float32)
    dims = ((tuple(lhs_order.index(c) for c in contract),
             tuple(rhs_order.index(c) for c in contract)),
            (tuple(lhs_order.index(c) for c in batch), tuple(rhs_order.index(c) for c in batch)))
    lfree_sorted = [c for c in lhs_order if c in lfree]
    rfree_sorted = [c for c in rhs_order if c in rfree]
    spec = f"{''.join(lhs_order)},{''.join(rhs_order)}->" \
           f"{''.join(batch + lfree_sorted + rfree_sorted)}"
    return lhs, rhs, dims, spec


@given(dot_problem())
def test_dot_general_matches_einsum(problem):
    lhs, rhs, dims, spec = problem
    out = lax.dot_general(lhs, rhs, dims)
    expected = np.einsum(spec, lhs.astype(np.float64), rhs.astype(np.float64))
    assert out.shape == expected.shape and out.dtype == np.float32
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-5, atol=1e-5)


def test_dot_and_matmul_shapes():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    v = np.ones(3, np.float32)
    np.testing.assert_array_equal(np.asarray(lax.dot(a, v)), a @ v)
    np.testing.assert_array_equal(np.asarray(lax.dot(v, v)), 3.0)
    np.testing.assert_array_equal(np.asarray(lax.dot(a, a.T)), a @ a.T)


def test_batch_matmul_and_precision():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 2, 4)), rng.standard_normal((3, 4, 5))
    out = lax.batch_matmul(a.astype(np.float32), b.astype(np.float32),
                           precision=lax.Precision.HIGHEST)
    np.testing.assert_allclose(np.asarray(out), a @ b, rtol=1e-5, atol=1e-5)
    with pytest.raises(EmberValueError, match=r"batch_matmul needs operands of one rank"):
        lax.batch_matmul(a, b[0])
    with pytest.raises(EmberValueError, match="precision must be one value or a pair"):
        lax.dot(a[0], b[0], precision=("HIGH",) * 3)


def test_graphs_print_and_parse_back():
    from ember.ir.parser import parse_graph
    from ember.ir.printer import print_graph

    def f(x, w):
        y = lax.conv_general_dilated(x, w, (1, 1), "SAME", precision="HIGHEST",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return lax.dot_general(y, y, (((3,), (3,)), ((0,), (0,))),
                               preferred_element_type=np.float32)

    graph = ember.jit(f).lower(np.ones((1, 4, 4, 2), np.float32),
                               np.ones((3, 3, 2, 5), np.float32)).graph
    text = print_graph(graph)
    assert "ConvDimensionNumbers(lhs_spec=(0, 3, 1, 2)" in text
    assert print_graph(parse_graph(text)) == text


def test_integer_dot_with_preferred_element_type():
    x = np.full((2, 64), 100, np.int8)
    out = lax.dot_general(x, x, (((1,), (1,)), ((), ())), preferred_element_type=np.int32)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(out), np.full((2, 2), 640000))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_accumulates_in_float32(dtype):
    x = np.full(4096, 1.0, dtype)  # float16 accumulation would stall at 2048
    out = lax.dot(x, x)
    assert out.dtype == np.dtype(dtype) and float(out) == 4096.0
    wide = lax.dot(x, x, preferred_element_type=np.float32)
    assert wide.dtype == np.float32 and float(wide) == 4096.0


def test_dot_general_jit_matches_eager():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 5))
    fn = lambda x, y: lax.dot_general(x, y, (((2,), (1,)), ((0,), (0,))))  # noqa: E731
    np.testing.assert_allclose(np.asarray(ember.jit(fn)(a, b)), np.asarray(fn(a, b)), rtol=1e-6)


def test_dot_general_errors():
    a, b = np.zeros((2, 3), np.float32), np.zeros((4, 5), np.float32)
    with pytest.raises(EmberValueError, match=r"dimension 1 of lhs \(2, 3\) has size 3 .* "
                                              r"dimension 0 of rhs \(4, 5\) has size 4"):
        lax.dot_general(a, b, (((1,), (0,)), ((), ())))
    with pytest.raises(EmberIndexError, match=r"lhs dimension 2 is out of range .*\(2, 3\)"):
        lax.dot_general(a, b, (((2,), (0,)), ((), ())))
    with pytest.raises(EmberValueError, match="repeat"):
        lax.dot_general(a, a, (((0,), (0,)), ((0,), (1,))))
    with pytest.raises(EmberValueError, match="unequal numbers"):
        lax.dot_general(a, a, (((0, 1), (0,)), ((), ())))
    with pytest.raises(EmberTypeError, match="float32 and int32 differ"):
        lax.dot(a, np.zeros((3, 2), np.int32))
    with pytest.raises(EmberTypeError, match="preferred_element_type int32"):
        lax.dot(a, a.T, preferred_element_type=np.int32)
    with pytest.raises(EmberValueError, match="dimension_numbers must be"):
        lax.dot_general(a, b, ((1, 0), ()))
    with pytest.raises(EmberValueError, match="1-d or 2-d"):
        lax.dot(np.zeros((1, 2, 3)), np.zeros(3))


# --- convolution -------------------------------------------------------------------------

def naive_conv(lhs, rhs, strides, pads, lhs_dil, rhs_dil, groups, batch_groups):
    """The definition, one output position at a time (canonical NC... / OI... layout)."""
    n, c = lhs.shape[:2]
    o, i = rhs.shape[:2]
    spatial, kernel = lhs.shape[2:], rhs.shape[2:]
    out_sizes = []
    for size, k, s, (lo, hi), ld, rd in zip(spatial, kernel, strides, pads, lhs_dil, rhs_dil):
        padded = (size - 1) * ld + 1 + lo + hi
        window = (k - 1) * rd + 1
        out_sizes.append(max(0, (padded - window) // s + 1) if padded >= window else 0)
    out = np.zeros((n // batch_groups, o, *out_sizes))
    for oc in range(o):
        g = oc // (o // groups)
        b = oc // (o // batch_groups)
        x = lhs[b * (n // batch_groups):(b + 1) * (n // batch_groups), g * i:(g + 1) * i]
        for pos in itertools.product(*map(range, out_sizes)):
            for tap in itertools.product(*map(range, kernel)):
                idx = []
                for p, t, s, (lo, _), ld, rd in zip(pos, tap, strides, pads, lhs_dil, rhs_dil):
                    q = p * s + t * rd - lo  # position in the dilated input
                    idx.append(q // ld if q % ld == 0 and 0 <= q // ld else None)
                if any(v is None or v >= size for v, size in zip(idx, spatial)):
                    continue
                out[(slice(None), oc, *pos)] += x[(slice(None), slice(None), *idx)] @ \
                    rhs[(oc, slice(None), *tap)]
    return out


@st.composite
def conv_problem(draw):
    nspatial = draw(st.integers(1, 2))
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    batch_groups = 1 if groups > 1 else draw(st.sampled_from([1, 2]))
    n = draw(st.integers(1, 2)) * batch_groups
    i = draw(st.integers(1, 2))
    o = draw(st.integers(1, 2)) * groups * batch_groups
    ints = lambda lo, hi: tuple(draw(st.integers(lo, hi)) for _ in range(nspatial))  # noqa
    spatial, kernel = ints(1, 5), ints(1, 3)
    padding = draw(st.sampled_from(["SAME", "VALID", "pairs"]))
    if padding == "pairs":
        padding = tuple((draw(st.integers(-1, 2)), draw(st.integers(-1, 2)))
                        for _ in range(nspatial))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    lhs = rng.standard_normal((n, i * groups, *spatial))
    rhs = rng.standard_normal((o, i, *kernel))
    params = dict(window_strides=ints(1, 2), padding=padding, lhs_dilation=ints(1, 2),
                  rhs_dilation=ints(1, 2), feature_group_count=groups,
                  batch_group_count=batch_groups)
    return lhs, rhs, params


@given(conv_problem())
def test_conv_matches_the_definition(problem):
    lhs, rhs, params = problem
    with ember.config.override(enable_x64=True):
        out = lax.conv_general_dilated(lhs, rhs, **params)
    pads = padding_pairs(params["padding"], lhs.shape[2:],
                         [(k - 1) * d + 1 for k, d in zip(rhs.shape[2:], params["rhs_dilation"])],
                         params["window_strides"])
    expected = naive_conv(lhs, rhs, params["window_strides"], pads, params["lhs_dilation"],
                          params["rhs_dilation"], params["feature_group_count"],
                          params["batch_group_count"])
    assert out.shape == expected.shape
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-10, atol=1e-10)


def test_conv_1d_valid_is_correlation():
    x = np.arange(8, dtype=np.float32)
    w = np.array([1.0, -2.0, 0.5], np.float32)
    out = lax.conv(x[None, None], w[None, None], (1,), "VALID")
    np.testing.assert_allclose(np.asarray(out)[0, 0], np.correlate(x, w, "valid"), rtol=1e-6)


def test_same_padding_keeps_size_and_strides_ceil():
    x = np.ones((1, 1, 7, 6), np.float32)
    w = np.ones((2, 1, 3, 2), np.float32)
    assert lax.conv(x, w, (1, 1), "SAME").shape == (1, 2, 7, 6)
    assert lax.conv(x, w, (2, 4), "SAME").shape == (1, 2, 4, 2)
    lower = lax.conv_general_dilated(x, w, (1, 1), "SAME_LOWER")
    upper = lax.conv_general_dilated(x, w, (1, 1), "SAME")
    assert lower.shape == upper.shape
    # the one padded column sits left for SAME_LOWER, right for SAME
    assert float(np.asarray(lower)[0, 0, 3, 0]) == 3.0
    assert float(np.asarray(upper)[0, 0, 3, 0]) == 6.0


def test_layout_strings_match_canonical_layout():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)  # NCHW
    w = rng.standard_normal((6, 3, 3, 2)).astype(np.float32)  # OIHW
    expected = np.asarray(lax.conv_general_dilated(x, w, (1, 2), "SAME"))
    out = lax.conv_general_dilated(x.transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0), (1, 2),
                                   "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    np.testing.assert_allclose(np.asarray(out), expected.transpose(0, 2, 3, 1), rtol=1e-5,
                               atol=1e-5)


def test_conv_dimension_numbers_parsing():
    dn = conv_dimension_numbers((1, 2, 3, 4), (1, 2, 3, 4), ("NHWC", "HWIO", "NCHW"))
    assert dn == ConvDimensionNumbers((0, 3, 1, 2), (3, 2, 0, 1), (0, 1, 2, 3))
    # spatial dimensions follow the rhs string's order
    dn = conv_dimension_numbers((1, 2, 3, 4), (1, 2, 3, 4), ("NCWH", "OIHW", "NCHW"))
    assert dn.lhs_spec == (0, 1, 3, 2)
    assert conv_dimension_numbers((1, 2, 3), (1, 2, 3), None) == ((0, 1, 2),) * 3


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("stride,kernel", [(1, 3), (2, 3), (3, 2), (2, 4)])
def test_conv_transpose_is_the_gradient_of_a_strided_conv(x64, padding, stride, kernel):
    rng = np.random.default_rng(stride * 10 + kernel)
    w = rng.standard_normal((kernel, kernel, 2, 3))  # HWIO: 2 features in, 3 out
    y = rng.standard_normal((1, 3, 2, 3))            # what the forward conv produced
    out = lax.conv_transpose(y, w, (stride, stride), padding, transpose_kernel=True)
    if padding == "SAME":
        assert out.shape[1:3] == (3 * stride, 2 * stride)
    else:
        extra = max(kernel - stride, 0)
        assert out.shape[1:3] == (3 * stride + extra, 2 * stride + extra)
    x = np.zeros((1, *out.shape[1:3], 2))

    def forward(v):
        return lax.conv_general_dilated(v, w, (stride, stride), padding,
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))

    (expected,) = ember.vjp(forward, x)[1](y)
    np.testing.assert_allclose(np.asarray(out), np.asarray(expected), rtol=1e-10, atol=1e-10)


def test_conv_transpose_explicit_padding_and_errors():
    x = np.ones((1, 4, 1), np.float32)   # NHC
    w = np.ones((3, 1, 1), np.float32)   # HIO
    out = lax.conv_transpose(x, w, (2,), [(0, 0)])  # windows over 1 0 1 0 1 0 1
    np.testing.assert_array_equal(np.asarray(out)[0, :, 0], [2, 1, 2, 1, 2])
    with pytest.raises(EmberValueError, match="'FULL'"):
        lax.conv_transpose(x, w, (2,), "FULL")


def test_conv_integer_and_preferred_type_and_jit():
    x = np.ones((1, 2, 6), np.int8)
    w = np.full((1, 2, 3), 100, np.int8)
    out = lax.conv_general_dilated(x, w, (1,), "VALID", preferred_element_type=np.int32)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(out), np.full((1, 1, 4), 600))
    f = lambda a, b: lax.conv_general_dilated(a, b, (2,), [(1, 1)], rhs_dilation=(2,))  # noqa
    xf, wf = x.astype(np.float32), w.astype(np.float32)
    np.testing.assert_array_equal(np.asarray(ember.jit(f)(xf, wf)), np.asarray(f(xf, wf)))


def test_conv_errors():
    x, w = np.zeros((2, 4, 5), np.float32), np.zeros((6, 2, 3), np.float32)
    with pytest.raises(EmberValueError, match="lhs feature size 4 must equal rhs input "
                                              "feature size 2 times feature_group_count 1"):
        lax.conv(x, w, (1,), "VALID")
    with pytest.raises(EmberValueError, match=r"output feature size 6 must be a multiple of "
                                              r"feature_group_count 4"):
        lax.conv_general_dilated(x, np.zeros((6, 1, 3), np.float32), (1,), "VALID",
                                 feature_group_count=4)
    with pytest.raises(EmberValueError, match="lhs batch size 2 must be a multiple of "
                                              "batch_group_count 3"):
        lax.conv_general_dilated(x, np.zeros((6, 4, 3), np.float32), (1,), "VALID",
                                 batch_group_count=3)
    with pytest.raises(EmberValueError, match="at most one"):
        lax.conv_general_dilated(x, np.zeros((4, 2, 3), np.float32), (1,), "VALID",
                                 feature_group_count=2, batch_group_count=2)
    with pytest.raises(EmberValueError, match=r"window_strides=\(1, 1\) needs 1"):
        lax.conv(x, w, (1, 1), "VALID")
    with pytest.raises(EmberValueError, match="must be positive"):
        lax.conv(x, np.zeros((6, 4, 3), np.float32), (0,), "VALID")
    with pytest.raises(EmberValueError, match="unknown padding 'FULL'"):
        lax.conv(x, w, (1,), "FULL")
    with pytest.raises(EmberValueError, match="same rank"):
        lax.conv(x, np.zeros((6, 4), np.float32), (1,), "VALID")
    with pytest.raises(EmberValueError, match="'NWC'.*'N', 'C'"):
        lax.conv_general_dilated(x, w, (1,), "VALID", dimension_numbers=("NWC", "OIH", "NCH"))
    with pytest.raises(EmberTypeError, match="float32 and int32 differ"):
        lax.conv(x, np.zeros((6, 4, 3), np.int32), (1,), "VALID")
    with pytest.raises(EmberTypeError, match="bool"):
        lax.conv(x.astype(bool), np.zeros((6, 4, 3), bool), (1,), "VALID")


# --- transformation rules ------------------------------------------------------------------

DOT_CASES = [
    ((3, 4), (4, 5), (((1,), (0,)), ((), ()))),
    ((2, 3, 4, 5), (5, 2, 6, 3), (((3, 1), (0, 3)), ((0,), (1,)))),
    ((3,), (3,), (((0,), (0,)), ((), ()))),
    ((2, 3), (4,), (((), ()), ((), ()))),
]


@pytest.mark.parametrize("lhs_shape,rhs_shape,dims", DOT_CASES)
def test_dot_general_gradients(x64, lhs_shape, rhs_shape, dims):
    rng = np.random.default_rng(0)
    lhs, rhs = rng.standard_normal(lhs_shape), rng.standard_normal(rhs_shape)
    check_grads(lambda a, b: lax.dot_general(a, b, dims), (lhs, rhs), order=2)


def test_gradients_with_a_wider_preferred_type_keep_the_input_dtype():
    rng = np.random.default_rng(1)
    lhs, rhs = (rng.standard_normal(s).astype(np.float16) for s in [(1, 2, 5), (3, 2, 2)])

    def total(fn):
        def summed(a, b):
            out = fn(a, b)
            return lax.reduce_sum(out, tuple(range(out.ndim)))
        return summed

    dot = total(lambda a, b: lax.dot_general(a, b, (((1,), (1,)), ((), ())),
                                             preferred_element_type=np.float32))
    conv = total(lambda a, b: lax.conv_general_dilated(a, b, (1,), "VALID",
                                                       preferred_element_type=np.float32))
    for fn in (dot, conv):
        grads = ember.grad(fn, argnums=(0, 1))(lhs, rhs)
        assert [g.dtype for g in grads] == [np.float16, np.float16]
    d_lhs, d_rhs = ember.grad(conv, argnums=(0, 1))(lhs, rhs)
    x, w = lhs.astype(np.float64), rhs.astype(np.float64)
    expected_rhs = np.stack([[np.convolve(x[0, c], np.ones(4), "valid") for c in range(2)]] * 3)
    np.testing.assert_allclose(np.asarray(d_rhs), expected_rhs, rtol=1e-2)
    expected_lhs = np.stack([np.convolve(w[:, c].sum(0)[::-1], np.ones(4), "full")[::-1]
                             for c in range(2)])[None]
    np.testing.assert_allclose(np.asarray(d_lhs), expected_lhs, rtol=1e-2)


@pytest.mark.parametrize("lhs_shape,rhs_shape,dims", DOT_CASES)
@pytest.mark.parametrize("in_axes", [(0, None), (None, 1), (1, 0)])
def test_dot_general_vmap(lhs_shape, rhs_shape, dims, in_axes):
    rng = np.random.default_rng(0)
    # the batch axis goes at position in_axes[i] (clipped to the operand's rank)
    axes = tuple(None if a is None else min(a, len(s))
                 for a, s in zip(in_axes, (lhs_shape, rhs_shape)))
    args = tuple(rng.standard_normal(s) if a is None else
                 np.moveaxis(rng.standard_normal((2, *s)), 0, a)
                 for s, a in zip((lhs_shape, rhs_shape), axes))
    check_vmap(lambda a, b: lax.dot_general(a, b, dims), args, axes, rtol=1e-5, atol=1e-5)


CONV_CASES = [
    dict(window_strides=(1,), padding="SAME"),
    dict(window_strides=(2,), padding=[(1, 0)], lhs_dilation=(2,), rhs_dilation=(2,)),
    dict(window_strides=(2,), padding="VALID", feature_group_count=2),
    dict(window_strides=(1,), padding=[(0, -1)], batch_group_count=2),
]


def _conv_operands(params, seed=0):
    rng = np.random.default_rng(seed)
    groups = params.get("feature_group_count", 1) * params.get("batch_group_count", 1)
    lhs = rng.standard_normal((2, 2 * params.get("feature_group_count", 1), 7))
    rhs = rng.standard_normal((2 * groups, 2, 3))
    return lhs, rhs


@pytest.mark.parametrize("params", CONV_CASES)
def test_conv_gradients(x64, params):
    lhs, rhs = _conv_operands(params)
    check_grads(lambda a, b: lax.conv_general_dilated(a, b, **params), (lhs, rhs), order=2)


def test_conv_gradients_in_a_2d_channels_last_layout(x64):
    rng = np.random.default_rng(2)
    lhs, rhs = rng.standard_normal((2, 5, 6, 4)), rng.standard_normal((3, 2, 2, 4))
    check_grads(lambda a, b: lax.conv_general_dilated(
        a, b, (2, 1), "SAME", rhs_dilation=(1, 2), feature_group_count=2,
        dimension_numbers=("NHWC", "HWIO", "NHWC")), (lhs, rhs), order=1)


@pytest.mark.parametrize("params", CONV_CASES)
@pytest.mark.parametrize("in_axes", [(0, None), (None, 2), (1, 0)])
def test_conv_vmap(params, in_axes):
    lhs, rhs = _conv_operands(params)
    stacked = [np.stack([a, 2 * a + 1], axis=ax) if ax is not None else a
               for a, ax in zip((lhs, rhs), in_axes)]
    check_vmap(lambda a, b: lax.conv_general_dilated(a, b, **params), stacked, in_axes,
               rtol=1e-5, atol=1e-5)
