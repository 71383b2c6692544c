"""Result comparison: exact for integers and bools, NaN-aware with dtype tolerances for
floats."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ember.fuzz.compare import difference, differences

FLOATS = [np.float32, np.float16, ml_dtypes.bfloat16]


@pytest.mark.parametrize("dtype", FLOATS)
def test_nan_inf_and_signed_zero(dtype):
    expected = np.array([np.nan, np.inf, -np.inf, -0.0, 1.0], dtype)
    assert difference(expected.copy(), expected) is None
    assert difference(np.array([np.nan, np.inf, -np.inf, 0.0, 1.0], dtype), expected) is None
    for wrong in ([1.0, np.inf, -np.inf, 0.0, 1.0],    # a NaN went missing
                  [np.nan, -np.inf, -np.inf, 0.0, 1.0],  # infinity changed sign
                  [np.nan, 5.0, -np.inf, 0.0, 1.0],      # infinity became finite
                  [np.nan, np.inf, -np.inf, 0.0, np.nan]):  # a NaN appeared
        assert difference(np.array(wrong, dtype), expected) is not None


@pytest.mark.parametrize("dtype, close, far", [
    (np.float32, 1.0001, 1.001), (np.float16, 1.01, 1.1), (ml_dtypes.bfloat16, 1.0625, 1.25)])
def test_tolerance_follows_the_dtype(dtype, close, far):
    expected = np.array([1.0, 2.0], dtype)
    assert difference(np.array([close, 2.0], dtype), expected) is None
    message = difference(np.array([far, 2.0], dtype), expected)
    assert "1 of 2 elements differ; first at [0]" in message


def test_small_values_are_compared_relative_to_the_array_scale():
    expected = np.array([1000.0, 1e-3], np.float32)
    assert difference(np.array([1000.0, 1e-3 + 1e-3], np.float32), expected) is None
    assert difference(np.array([1000.0, 1e-3 + 1.0], np.float32), expected) is not None


def test_integers_and_bools_are_exact():
    assert difference(np.array([1, 2], np.int32), np.array([1, 2], np.int32)) is None
    assert difference(np.array([1, 3], np.int32), np.array([1, 2], np.int32)) is not None
    assert difference(np.array(True), np.array(False)) is not None


def test_type_must_match():
    assert "expected f32[2]" in difference(np.zeros(2, np.float16), np.zeros(2, np.float32))
    assert "expected f32[2]" in difference(np.zeros(3, np.float32), np.zeros(2, np.float32))


def test_differences_names_the_output():
    same = [np.zeros(2, np.float32)]
    assert differences(same, same) is None
    found = differences([np.zeros(2, np.float32), np.ones(1, np.int32)],
                        [np.zeros(2, np.float32), np.zeros(1, np.int32)])
    assert found.startswith("output 1:")
    assert differences(same, same * 2) == "1 outputs, expected 2"


def test_an_alternative_expectation_accepts_it_and_everything_between():
    expected = np.array([1.0, 1.0, np.inf, np.nan, 1.0], np.float16)
    wide = np.array([1.5, 1.0, 7.0, 2.0, 1.0], np.float16)
    actual = np.array([1.25, 1.0, 7.0, 2.0, 1.0], np.float16)
    assert difference(actual, expected) is not None
    assert difference(actual, expected, also=wide) is None
    assert difference(np.array([1.25, 2.0, 7.0, 2.0, 1.0], np.float16), expected,
                      also=wide) == "1 of 5 elements differ; first at [1]: got np.float16(2.0), expected np.float16(1.0)"
    assert differences([actual], [expected], also=[wide]) is None
