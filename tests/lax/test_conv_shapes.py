"""Convolution shape helpers agree with the convolutions themselves, and with JAX."""
import itertools

import numpy as np
import pytest

from ember import lax
from ember.errors import EmberValueError

LAYOUTS = [("NCHW", "OIHW", "NCHW"), ("NHWC", "HWIO", "NHWC"), ("NHWC", "OIHW", "NCHW")]
PADDINGS = ["SAME", "VALID", ((1, 0), (2, 1))]


def _shapes(layout, batch=2, spatial=(7, 6), cin=3, cout=4, window=(3, 2)):
    lhs_spec, rhs_spec, _ = layout
    sizes = {"N": batch, "C": cin, "H": spatial[0], "W": spatial[1]}
    lhs = tuple(sizes[c] for c in lhs_spec)
    kernel = {"O": cout, "I": cin, "H": window[0], "W": window[1]}
    return lhs, tuple(kernel[c] for c in rhs_spec)


@pytest.mark.parametrize("layout,padding,strides",
                         list(itertools.product(LAYOUTS, PADDINGS, [(1, 1), (2, 3)])))
def test_conv_general_shape_tuple_is_the_conv_output_shape(layout, padding, strides):
    lhs_shape, rhs_shape = _shapes(layout)
    out = lax.conv_general_dilated(np.ones(lhs_shape, np.float32),
                                   np.ones(rhs_shape, np.float32), strides, padding,
                                   dimension_numbers=layout)
    assert lax.conv_general_shape_tuple(lhs_shape, rhs_shape, strides, padding,
                                        layout) == out.shape


@pytest.mark.parametrize("padding,strides",
                         list(itertools.product(["SAME", "VALID", ((2, 1), (1, 1))],
                                                [(1, 1), (2, 2), (3, 1)])))
def test_conv_transpose_shape_tuple_is_the_conv_transpose_output_shape(padding, strides):
    layout = ("NHWC", "HWIO", "NHWC")
    lhs_shape, rhs_shape = _shapes(layout, window=(4, 3))
    out = lax.conv_transpose(np.ones(lhs_shape, np.float32), np.ones(rhs_shape, np.float32),
                             strides, padding, dimension_numbers=layout)
    assert lax.conv_transpose_shape_tuple(lhs_shape, rhs_shape, strides, padding,
                                          layout) == out.shape


def test_padtype_to_pads():
    assert lax.padtype_to_pads((7, 6), (3, 2), (2, 2), "SAME") == [(1, 1), (0, 0)]
    assert lax.padtype_to_pads((6,), (4,), (1,), "SAME") == [(1, 2)]
    assert lax.padtype_to_pads((6,), (4,), (1,), "SAME_LOWER") == [(2, 1)]
    assert lax.padtype_to_pads((6, 5), (4, 2), (1, 1), "VALID") == [(0, 0), (0, 0)]
    with pytest.raises(EmberValueError, match="padding"):
        lax.padtype_to_pads((6,), (4,), (1,), "FULL")


def test_conv_shape_tuple_checks_negative_padding():
    assert lax.conv_shape_tuple((2, 3, 8, 8), (4, 3, 3, 3), (1, 1), "SAME") == (2, 4, 8, 8)
    with pytest.raises(EmberValueError, match="negative padding"):
        lax.conv_shape_tuple((2, 3, 4, 4), (4, 3, 1, 1), (1, 1), ((-5, 0), (0, 0)))


def test_helpers_match_jax():
    jax = pytest.importorskip("jax")
    for layout, padding, strides in itertools.product(LAYOUTS, PADDINGS, [(1, 1), (2, 3)]):
        lhs_shape, rhs_shape = _shapes(layout)
        args = (lhs_shape, rhs_shape, strides, padding, layout)
        assert lax.conv_general_shape_tuple(*args) == jax.lax.conv_general_shape_tuple(*args)
        assert lax.conv_general_permutations(layout) == jax.lax.conv_general_permutations(layout)
    for padding, strides in itertools.product(["SAME", "VALID"], [(1, 1), (2, 2), (3, 1)]):
        layout = ("NHWC", "HWIO", "NHWC")
        lhs_shape, rhs_shape = _shapes(layout, window=(4, 3))
        args = (lhs_shape, rhs_shape, strides, padding, layout)
        assert lax.conv_transpose_shape_tuple(*args) == tuple(
            jax.lax.conv_transpose_shape_tuple(*args))
    for shape, window, strides in [((7, 6), (3, 2), (2, 2)), ((6, 9), (4, 4), (1, 3))]:
        for padding in ("SAME", "SAME_LOWER", "VALID"):
            assert lax.padtype_to_pads(shape, window, strides, padding) == [
                tuple(p) for p in jax.lax.padtype_to_pads(shape, window, strides, padding)]
