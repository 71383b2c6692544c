"""erf_inv and digamma compile to C (include/ember_special.h), not host calls, and match
the reference backend over dense ranges and at every special value."""
from __future__ import annotations

import numpy as np
import pytest
from cpu_testing import compiled, requires_cpu

import ember
from ember import lax

pytestmark = requires_cpu

# max |cpu - reference| / max(|reference|, 1): about an ulp (float32 rounds one double)
TOLERANCE = {"float32": 1.2e-7, "float64": 4e-14}


def _edges(dtype: np.dtype) -> np.ndarray:
    info = np.finfo(dtype)
    values = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, np.nan, np.inf, -np.inf,
              info.tiny, info.smallest_subnormal, 1 - info.epsneg, info.max]
    values = np.array(values, dtype)
    return np.concatenate([values, -values])


def _erf_inv_inputs(dtype: np.dtype) -> np.ndarray:
    tail = 1 - np.arange(1, 300) * np.finfo(dtype).epsneg  # the last values below 1
    return np.concatenate([_edges(dtype), np.linspace(-1, 1, 40001, dtype=dtype),
                           tail.astype(dtype), -tail.astype(dtype)])


def _digamma_inputs(dtype: np.dtype) -> np.ndarray:
    grid = np.linspace(-30, 30, 60001, dtype=dtype)
    magnitudes = 10.0 ** np.random.default_rng(0).uniform(-30, 30, 4000)
    poles = -np.arange(0, 60.0)
    x = np.concatenate([_edges(dtype), grid, magnitudes.astype(dtype), poles.astype(dtype),
                        (poles - 0.5).astype(dtype)])
    # the reference reflects through tan(pi x) unreduced: it loses digits next to the
    # negative poles (not at them), where ember_special.h does not, so the values keep
    # 1/100 away from them
    with np.errstate(invalid="ignore"):
        offset = np.abs(x - np.round(x))
    return x[~((x < 0) & (offset > 0) & (offset <= 1e-2))]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("fun, inputs", [(lax.erf_inv, _erf_inv_inputs),
                                         (lax.digamma, _digamma_inputs)])
def test_special_function_is_native_and_matches_the_reference(fun, inputs, dtype, request):
    if dtype == "float64":
        request.getfixturevalue("x64")
    x = inputs(np.dtype(dtype))
    assert [k.kind for k in compiled(fun, x).kernels] == ["kernel"]
    got = np.asarray(ember.jit(fun, backend="cpu")(x))
    want = np.asarray(ember.jit(fun, backend="reference")(x))
    assert got.dtype == want.dtype == x.dtype
    special = ~np.isfinite(want)  # NaN, +-inf: exactly where and as the reference
    np.testing.assert_array_equal(got[special], want[special])
    assert np.isfinite(got[~special]).all()
    scale = np.maximum(np.abs(want[~special]).astype(np.float64), 1.0)
    error = np.abs(got[~special].astype(np.float64) - want[~special]) / scale
    assert error.max() <= TOLERANCE[dtype]


def test_erf_inv_keeps_the_sign_of_zero_and_digamma_the_side_of_its_pole():
    zeros = np.array([0.0, -0.0], np.float32)
    assert np.signbit(np.asarray(ember.jit(lax.erf_inv, backend="cpu")(zeros))).tolist() \
        == [False, True]
    assert np.asarray(ember.jit(lax.digamma, backend="cpu")(zeros)).tolist() \
        == [-np.inf, np.inf]
