"""erf_inv and digamma compile to C (include/ember_special.h), not host calls, and match
the reference backend over dense ranges and at every special value."""
from __future__ import annotations

import os
import re
import subprocess

import numpy as np
import pytest
from cpu_testing import compiled, requires_cpu

import ember
from ember import lax
from ember.backends.cpu import toolchain
from ember.config import config

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


def test_float_erf_inv_is_within_an_ulp_of_the_reference():
    """erf_invf (one Newton step in double from Giles' float guess) over a dense grid,
    the 2000 floats below 1 and magnitudes down to the subnormals: 0 or 1 ulp, and almost
    always the reference's float (only above 0.995, where the step's residual uses the
    3e-9-accurate erfc, does one in a few hundred round to a neighbour)."""
    epsneg = np.finfo(np.float32).epsneg
    magnitudes = 10.0 ** np.random.default_rng(1).uniform(-45, 0, 20000)
    y = np.concatenate([np.linspace(0, 1, 200001, dtype=np.float32)[:-1],
                        (1 - np.arange(1, 2001) * epsneg).astype(np.float32),
                        magnitudes.astype(np.float32)])
    y = np.concatenate([y, -y])
    got = np.asarray(ember.jit(lax.erf_inv, backend="cpu")(y)).astype(np.float64)
    want = np.asarray(ember.jit(lax.erf_inv, backend="reference")(y))
    ulp = np.spacing(np.abs(want)).astype(np.float64)
    assert (np.abs(got - want) <= ulp).all()
    assert np.mean(got == want) > 0.999


def test_float_erf_inv_loop_is_vectorized(tmp_path):
    """gcc vectorizes a `#pragma omp simd` loop over ember_erf_invf, as kernels run it."""
    found = toolchain.find_toolchain()
    macros = subprocess.run([found.cc, "-dM", "-E", "-x", "c", os.devnull],
                            capture_output=True, text=True).stdout
    if "__GNUC__" not in macros or "__clang__" in macros:
        pytest.skip(f"-fopt-info-vec is a gcc option; the compiler is {found.version}")
    source = """#include "ember_math.h"
void erf_inv_loop(const float *restrict y, float *restrict x, long n) {
#pragma omp simd
    for (long i = 0; i < n; ++i) x[i] = ember_erf_invf(y[i]);
}
"""
    report = tmp_path / "vec.txt"
    # compile, not a cache hit; and optimized as kernels are (a sanitizer build is -O1)
    with config.override(cache_dir=str(tmp_path / "cache"), sanitize=""):
        toolchain.compile_shared_library(source, name="erf_inv_vectorization",
                                         extra_flags=[f"-fopt-info-vec-optimized={report}"])
    assert re.search(r"erf_inv_vectorization\.c:4:\d+: optimized: loop vectorized",
                     report.read_text())
