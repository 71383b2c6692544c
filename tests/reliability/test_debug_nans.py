"""``debug_nans``: the first NaN an operation produces raises NaNError naming the
operation and the user's line, eagerly and under jit (where the fused program is
re-run equation by equation), on every backend."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import ember
from ember import lax
from ember.errors import EmberError, NaNError

THIS_FILE = __file__


def line_of(marker: str) -> int:
    """The line of this file holding ``# <marker>``."""
    with open(THIS_FILE) as source:
        for number, text in enumerate(source, start=1):
            if text.rstrip().endswith(f"# {marker}"):
                return number
    raise AssertionError(marker)


@pytest.fixture
def debug_nans(backend):
    with ember.config.override(debug_nans=True):
        yield backend


def log_of_double(x):
    doubled = lax.mul(x, 2.0)
    return lax.log(doubled)  # log-line


def cancelling(x):
    big = lax.exp(x)
    return lax.sub(big, big)  # sub-line


def assert_names(error: pytest.ExceptionInfo, op: str, marker: str) -> None:
    message = str(error.value)
    assert f"primitive '{op}' produced a NaN" in message
    assert f"{THIS_FILE}:{line_of(marker)}" in message
    assert isinstance(error.value, EmberError) and isinstance(error.value, FloatingPointError)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_eager_names_the_operation_and_line(debug_nans, dtype):
    with pytest.raises(NaNError) as error:
        log_of_double(np.array([1.0, -1.0], dtype))
    assert_names(error, "log", "log-line")


@pytest.mark.parametrize("fn, x, op, marker", [
    (log_of_double, np.array([1.0, -1.0], np.float32), "log", "log-line"),
    (cancelling, np.array([1.0, 100.0], np.float32), "sub", "sub-line"),  # inf - inf, fused
])
def test_jit_names_the_operation_and_line(debug_nans, fn, x, op, marker):
    with pytest.raises(NaNError) as error:
        ember.jit(fn)(x)
    assert_names(error, op, marker)


def test_gradient_nans_name_the_forward_line(debug_nans):
    def loss(x):
        return lax.mul(lax.sqrt(x), 0.0)  # sqrt-line

    for run in (ember.grad(loss), ember.jit(ember.grad(loss))):
        with pytest.raises(NaNError) as error:
            run(np.float32(0.0))  # 0 * d sqrt(x) / dx at 0 is 0 * inf
        assert f"{THIS_FILE}:{line_of('sqrt-line')}" in str(error.value)


def test_nan_given_as_input(debug_nans):
    with pytest.raises(NaNError, match="produced a NaN"):
        log_of_double(np.float32(np.nan))
    with pytest.raises(NaNError, match="an input contained it"):
        ember.jit(log_of_double)(np.float32(np.nan))


def test_no_nan_no_error_and_same_result(debug_nans):
    x = np.array([0.5, 2.0], np.float32)
    expected = np.log(x * 2)
    np.testing.assert_allclose(log_of_double(x), expected, rtol=1e-6)
    np.testing.assert_allclose(ember.jit(log_of_double)(x), expected, rtol=1e-6)
    assert int(ember.jit(lambda v: lax.div(v, v))(np.int32(0))) == -1  # integers: no NaN


def test_off_by_default(backend):
    assert not ember.config.debug_nans
    assert np.isnan(np.asarray(ember.jit(log_of_double)(np.float32(-1.0))))
    assert np.isnan(np.asarray(log_of_double(np.float32(-1.0))))
