"""ember_math.h against float64 NumPy / math: ulp error over a dense sweep of the float
range, exact special values, and vectorization of `#pragma omp simd` loops.

A C harness compiled through the toolchain applies each function to a float32 array,
once in a `#pragma omp simd` loop (the vectorized code kernels get) and once through a
non-inlined scalar call. It is built twice: with the default flags (no FMA contraction
under -std=c11) and with -ffp-contract=fast.
"""
from __future__ import annotations

import ctypes
import math
import os
import platform
import re
import subprocess
import numpy as np
import pytest

from ember.backends.cpu import toolchain
from ember.config import config

pytestmark = pytest.mark.skipif(toolchain.find_toolchain() is None, reason="no C compiler on this machine")

FLT_MAX = float(np.finfo(np.float32).max)
PI_2 = np.float32(math.pi / 2)


def _math_ufunc(function):
    """A float64 ufunc from a `math` function, NaN outside its domain (e.g. sin(inf))."""
    def safe(value: float) -> float:
        try:
            return function(value)
        except (ValueError, OverflowError):
            return math.nan
    vectorized = np.frompyfunc(safe, 1, 1)
    return lambda x: vectorized(x).astype(np.float64)


def _sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0, e) / (1.0 + e)


# name -> (float64 reference, max error in ulp, whether the reference is slow)
UNARY = {
    "expf": (np.exp, 1.5, False),
    "expm1f": (np.expm1, 2.0, False),
    "logf": (np.log, 1.5, False),
    "log1pf": (np.log1p, 1.5, False),
    "log2f": (np.log2, 3.0, False),
    "tanhf": (np.tanh, 3.0, False),
    "sigmoidf": (_sigmoid, 3.0, False),
    "erff": (_math_ufunc(math.erf), 1.0, True),
    "erfcf": (_math_ufunc(math.erfc), 1.0, True),
    "sinf": (_math_ufunc(math.sin), 1.0, True),
    "cosf": (_math_ufunc(math.cos), 1.0, True),
    "tanf": (_math_ufunc(math.tan), 1.0, True),
    "atanf": (np.arctan, 3.0, False),
    "sqrtf": (np.sqrt, 0.5, False),
}
POW_MAX_ULP = 1.0


def _harness_source() -> str:
    parts = ['#include "ember_math.h"']
    for name in UNARY:
        parts.append(f"""
void simd_{name}(const float *restrict x, float *restrict y, long n) {{
#pragma omp simd
    for (long i = 0; i < n; ++i) y[i] = ember_{name}(x[i]);
}}
__attribute__((noinline)) static float one_{name}(float v) {{ return ember_{name}(v); }}
void scalar_{name}(const float *x, float *y, long n) {{
    for (long i = 0; i < n; ++i) y[i] = one_{name}(x[i]);
}}""")
    parts.append("""
void simd_powf(const float *restrict x, const float *restrict y, float *restrict z, long n) {
#pragma omp simd
    for (long i = 0; i < n; ++i) z[i] = ember_powf(x[i], y[i]);
}
__attribute__((noinline)) static float one_powf(float a, float b) { return ember_powf(a, b); }
void scalar_powf(const float *x, const float *y, float *z, long n) {
    for (long i = 0; i < n; ++i) z[i] = one_powf(x[i], y[i]);
}
double double_exp(double x) { return ember_exp(x); }
double double_pow(double x, double y) { return ember_pow(x, y); }
double double_sigmoid(double x) { return ember_sigmoid(x); }
""")
    return "\n".join(parts)


class Harness:
    def __init__(self, library: ctypes.CDLL):
        self.library = library

    def __call__(self, kind: str, name: str, *inputs: np.ndarray) -> np.ndarray:
        arrays = [np.ascontiguousarray(a, dtype=np.float32) for a in inputs]
        out = np.empty_like(arrays[0])
        pointer = ctypes.c_void_p
        getattr(self.library, f"{kind}_{name}")(
            *[a.ctypes.data_as(pointer) for a in arrays], out.ctypes.data_as(pointer),
            ctypes.c_long(out.size))
        return out


@pytest.fixture(scope="module")
def module_cache(tmp_path_factory):
    saved = config.cache_dir
    config.update("cache_dir", str(tmp_path_factory.mktemp("ember-math-cache")))
    yield
    config.update("cache_dir", saved)


@pytest.fixture(scope="module", params=["default", "fma"])
def harness(request, module_cache):
    flags = ["-ffp-contract=fast"] if request.param == "fma" else []
    path = toolchain.compile_shared_library(_harness_source(), name="ember_math_harness", extra_flags=flags)
    return Harness(toolchain.load_library(path))


SPECIALS = np.array([
    0.0, -0.0, 1e-45, -1e-45, 1.1754942e-38, -1.1754942e-38, 1.17549435e-38, -1.17549435e-38,
    1e-30, -1e-30, 1e-7, -1e-7, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 10.0, -10.0,
    88.72283, 88.72284, -87.33655, -103.97208, -103.97209, 9.01, -9.01, 3.92, 10.05,
    FLT_MAX, -FLT_MAX, np.inf, -np.inf, np.nan,
], dtype=np.float32)


def _sweep() -> np.ndarray:
    """Every 613th float (both signs, subnormals to inf), dense ranges, specials."""
    positive = np.arange(0, 0x7F800001, 613, dtype=np.uint32).view(np.float32)
    return np.concatenate([
        positive, -positive, SPECIALS,
        np.linspace(-110, 110, 300_001, dtype=np.float32),
        np.linspace(-2, 2, 300_001, dtype=np.float32),
    ])


SWEEP = _sweep()
SLOW_SWEEP = np.concatenate([SWEEP[::9], np.linspace(-12, 12, 100_001, dtype=np.float32), SPECIALS])


def ulp_errors(got: np.ndarray, reference: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(error in float32 ulps of the reference, mask of wrong special values).

    Where the correctly rounded result is inf or NaN, or the result is, they must match
    exactly; zeros must carry the reference's sign.
    """
    with np.errstate(all="ignore"):
        expected = reference.astype(np.float32)
        nonfinite = ~np.isfinite(expected) | ~np.isfinite(got)
        wrong = nonfinite & ~((got == expected) | (np.isnan(got) & np.isnan(expected)))
        wrong |= (expected == 0) & (np.signbit(got) != np.signbit(expected))
        exponent = np.frexp(np.where(reference == 0, 1e-300, reference))[1] - 1
        ulp = np.ldexp(1.0, np.maximum(exponent, -126) - 23)
        error = np.where(nonfinite, 0.0, np.abs(got.astype(np.float64) - reference) / ulp)
    return error, wrong


def _describe(x, got, reference, index) -> str:
    return f"x={x[index]!r} got={got[index]!r} reference={reference[index]!r}"


@pytest.mark.parametrize("kind", ["simd", "scalar"])
@pytest.mark.parametrize("name", list(UNARY))
def test_unary_accuracy_and_special_values(harness, name, kind):
    reference_fn, max_ulp, slow = UNARY[name]
    x = SLOW_SWEEP if slow else SWEEP
    with np.errstate(all="ignore"):
        reference = reference_fn(x.astype(np.float64))
    got = harness(kind, name, x)
    error, wrong = ulp_errors(got, reference)
    assert not wrong.any(), f"wrong special value: {_describe(x, got, reference, np.argmax(wrong))}"
    worst = int(np.argmax(error))
    assert error[worst] <= max_ulp, f"{error[worst]:.2f} ulp at {_describe(x, got, reference, worst)}"


def test_simd_and_scalar_agree_bitwise(harness):
    for name in UNARY:
        simd, scalar = harness("simd", name, SWEEP[::5]), harness("scalar", name, SWEEP[::5])
        assert np.array_equal(simd.view(np.uint32), scalar.view(np.uint32)), name


EXACT = [
    ("expf", 0.0, 1.0), ("expf", np.inf, np.inf), ("expf", -np.inf, 0.0), ("expf", 89.0, np.inf),
    ("expf", -104.0, 0.0), ("expm1f", -np.inf, -1.0), ("expm1f", np.inf, np.inf),
    ("expm1f", -0.0, -0.0), ("logf", 0.0, -np.inf), ("logf", -0.0, -np.inf),
    ("logf", -1.0, np.nan), ("logf", 1.0, 0.0), ("logf", np.inf, np.inf), ("logf", -np.inf, np.nan),
    ("log1pf", -1.0, -np.inf), ("log1pf", -2.0, np.nan), ("log1pf", -0.0, -0.0),
    ("log1pf", np.inf, np.inf), ("log2f", 8.0, 3.0), ("log2f", 2.0 ** -140, -140.0),
    ("log2f", 0.0, -np.inf), ("tanhf", np.inf, 1.0), ("tanhf", -np.inf, -1.0),
    ("tanhf", -0.0, -0.0), ("tanhf", 20.0, 1.0), ("sigmoidf", np.inf, 1.0),
    ("sigmoidf", -np.inf, 0.0), ("sigmoidf", 0.0, 0.5), ("erff", np.inf, 1.0),
    ("erff", -np.inf, -1.0), ("erff", -0.0, -0.0), ("erfcf", -np.inf, 2.0), ("erfcf", np.inf, 0.0),
    ("erfcf", 0.0, 1.0), ("sinf", -0.0, -0.0), ("sinf", np.inf, np.nan), ("cosf", -np.inf, np.nan),
    ("cosf", 0.0, 1.0), ("tanf", -0.0, -0.0), ("tanf", np.inf, np.nan), ("atanf", np.inf, PI_2),
    ("atanf", -np.inf, -PI_2), ("atanf", -0.0, -0.0), ("sqrtf", -1.0, np.nan),
    ("sqrtf", -0.0, -0.0), ("sqrtf", np.inf, np.inf),
]


@pytest.mark.parametrize("name, x, expected", EXACT)
def test_exact_special_values(harness, name, x, expected):
    for kind in ("simd", "scalar"):
        got = harness(kind, name, np.array([x], np.float32))[0]
        if np.isnan(expected):
            assert np.isnan(got), (kind, got)
        else:
            assert got == expected and np.signbit(got) == np.signbit(expected), (kind, got)


def test_nan_in_nan_out(harness):
    nans = np.array([np.nan, -np.nan], np.float32)
    for name in UNARY:
        assert np.isnan(harness("simd", name, nans)).all(), name
    assert np.isnan(harness("simd", "powf", nans, np.float32([2.0, 0.5]))).all()


def test_trig_near_multiples_of_pi_over_2(harness):
    """Arguments whose result is tiny, where exact argument reduction matters most."""
    k = np.concatenate([np.arange(1, 20_000), np.geomspace(2e4, 1e12, 20_000).round()])
    nearest = (k * (math.pi / 2)).astype(np.float32)
    x = np.concatenate([nearest, np.nextafter(nearest, np.float32(np.inf)),
                        np.nextafter(nearest, np.float32(-np.inf))])
    for name in ("sinf", "cosf", "tanf"):
        reference = UNARY[name][0](x.astype(np.float64))
        error, wrong = ulp_errors(harness("simd", name, x), reference)
        assert not wrong.any() and error.max() <= 1.0, (name, error.max())


def _around(points, count: int) -> np.ndarray:
    """The `count` floats on either side of each positive point (not below +0), and the point."""
    bits = np.asarray(points, np.float32).view(np.int32)[:, None] + np.arange(-count, count + 1, dtype=np.int32)
    return np.maximum(bits.ravel(), 0).view(np.float32)


def _erf_edges_and_tail() -> np.ndarray:
    """Where the float erf/erfc change regime: erf's switch from its polynomial at 0.9
    and its clamp at 4, erfc's old switch point 0.5, the smallest subnormal, erf
    rounding to 1 (3.92), erfc's u = t - tc turning inexact
    (a = 3.173), erfc's first subnormal (9.194), last nonzero (10.0542) and clamped
    (10.0625) results; every 7th float of erfc's subnormal tail and every 97th of the
    x whose erf is in the lowest normal binade (small products lose bits there), all
    with both signs."""
    edges = _around([0.9, 4.0, 0.5, 1e-45, 3.92, 3.1733, 9.194, 10.0542, 10.0625], 300)
    ranges = [np.arange(*np.float32(span).view(np.int32), step, dtype=np.int32).view(np.float32)
              for span, step in (([9.1, 10.1], 7), ([1.0418e-38, 2.0837e-38], 97))]
    x = np.concatenate([np.float32([0.0]), edges, *ranges])
    return np.concatenate([x, -x])


# The float kernels are at most 0.988 (erf) and 0.86 ulp (erfc) over all floats
# (exhaustive check, the same bits on every target with FMA); asserting a little above
# each catches a lost low part.
ERF_MAX_ULP = {"erff": 0.99, "erfcf": 0.9}


def test_erf_erfc_edges_and_subnormal_tail(harness):
    x = _erf_edges_and_tail()
    for name in ("erff", "erfcf"):
        reference = UNARY[name][0](x.astype(np.float64))
        for kind in ("simd", "scalar"):
            got = harness(kind, name, x)
            error, wrong = ulp_errors(got, reference)
            assert not wrong.any(), f"{name}: wrong special value: {_describe(x, got, reference, np.argmax(wrong))}"
            worst = int(np.argmax(error))
            assert error[worst] <= ERF_MAX_ULP[name], f"{name} {kind}: {error[worst]:.2f} ulp at {_describe(x, got, reference, worst)}"


def test_erf_erfc_without_fma(module_cache):
    """Without FMA the header keeps erf/erfc in double; they meet the same contract."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip("-mno-fma is an x86 option")
    source = '#include "ember_math.h"\n' + "".join(f"""
void simd_{name}(const float *restrict x, float *restrict y, long n) {{
#pragma omp simd
    for (long i = 0; i < n; ++i) y[i] = ember_{name}(x[i]);
}}""" for name in ("erff", "erfcf")) + """
int erf_in_float(void) {
#ifdef EMBER__ERF_IN_FLOAT
    return 1;
#else
    return 0;
#endif
}"""
    path = toolchain.compile_shared_library(source, name="ember_math_no_fma",
                                            extra_flags=["-mno-fma", "-mno-avx512f"])
    library = toolchain.load_library(path)
    assert library.erf_in_float() == 0
    x = np.concatenate([SLOW_SWEEP, _erf_edges_and_tail()])
    for name in ("erff", "erfcf"):
        reference = UNARY[name][0](x.astype(np.float64))
        got = Harness(library)("simd", name, x)
        error, wrong = ulp_errors(got, reference)
        assert not wrong.any() and error.max() <= 1.0, (name, error.max())


POW_BASES = np.concatenate([
    SPECIALS, -SPECIALS[np.isfinite(SPECIALS)],
    np.float32([3.0, 0.1, 1.0000001, 0.9999999, -3.0, -0.1, 1e10, -1e-10, 65536.0]),
    np.random.default_rng(0).choice(SWEEP, 1500),
])
POW_EXPONENTS = np.concatenate([
    SPECIALS, -SPECIALS[np.isfinite(SPECIALS)],
    np.arange(-12, 13, dtype=np.float32), np.arange(-12, 13, dtype=np.float32) + 0.5,
    np.float32([1 / 3, 2 ** 23 + 1, 2 ** 24, 2 ** 24 + 2, 1e10, -1e10, 150.0, -150.0, 1.5e-45]),
    np.random.default_rng(1).standard_normal(80).astype(np.float32) * 40,
])


def test_pow_matches_c99_and_is_accurate(harness):
    x, y = (a.ravel() for a in np.meshgrid(POW_BASES, POW_EXPONENTS))
    with np.errstate(all="ignore"):
        reference = np.power(x.astype(np.float64), y.astype(np.float64))  # C99 pow
    for kind in ("simd", "scalar"):
        got = harness(kind, "powf", x, y)
        error, wrong = ulp_errors(got, reference)
        bad = int(np.argmax(wrong))
        assert not wrong.any(), f"pow({x[bad]!r}, {y[bad]!r}) = {got[bad]!r}, want {reference[bad]!r}"
        worst = int(np.argmax(error))
        assert error[worst] <= POW_MAX_ULP, f"pow({x[worst]!r}, {y[worst]!r}): {error[worst]:.2f} ulp"


def test_double_versions_call_libm(harness):
    library = harness.library
    for name, argtypes in (("double_exp", 1), ("double_sigmoid", 1), ("double_pow", 2)):
        function = getattr(library, name)
        function.restype = ctypes.c_double
        function.argtypes = [ctypes.c_double] * argtypes
    assert library.double_exp(1.0) == math.exp(1.0)
    assert library.double_pow(2.0, 0.5) == math.pow(2.0, 0.5)
    assert library.double_sigmoid(-800.0) == 0.0 and library.double_sigmoid(800.0) == 1.0
    assert library.double_sigmoid(-30.0) == pytest.approx(math.exp(-30.0), rel=1e-15)


def test_simd_loops_are_vectorized(module_cache, tmp_path):
    """gcc reports every `#pragma omp simd` loop over an ember_* function as vectorized."""
    found = toolchain.find_toolchain()
    macros = subprocess.run([found.cc, "-dM", "-E", "-x", "c", os.devnull],
                            capture_output=True, text=True).stdout
    if "__GNUC__" not in macros or "__clang__" in macros:
        pytest.skip(f"-fopt-info-vec is a gcc option; the compiler is {found.version}")
    report = tmp_path / "vec.txt"
    source = _harness_source()
    toolchain.compile_shared_library(source, name="vectorization_probe",
                                     extra_flags=[f"-fopt-info-vec-optimized={report}"])
    vectorized_lines = {int(m.group(1)) for m in
                        re.finditer(r"vectorization_probe\.c:(\d+):\d+: optimized: loop vectorized",
                                    report.read_text())}
    lines = source.splitlines()
    for name in [*UNARY, "powf"]:
        loop_line = next(number for number, text in enumerate(lines, start=1)
                         if f"ember_{name}(x[i]" in text and "for (long i" in text
                         and lines[number - 2].startswith("#pragma omp simd"))
        assert loop_line in vectorized_lines, f"the simd loop over ember_{name} was not vectorized"
