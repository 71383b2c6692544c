"""Array API 2024.12: function signatures, dtype objects, finfo / iinfo and the data type
functions, on ember.numpy and NumPy 2.4 (see ``array_api_checks``)."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

from array_api_checks import conformance_params, each_namespace

P_ONLY, P_OR_K = inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD
K_ONLY, VAR = inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.VAR_POSITIONAL

UNARY = """abs acos acosh asin asinh atan atanh bitwise_invert ceil conj cos cosh exp expm1
floor imag isfinite isinf isnan log log1p log2 log10 logical_not negative positive real
reciprocal round sign signbit sin sinh square sqrt tan tanh trunc""".split()
BINARY = """add atan2 bitwise_and bitwise_left_shift bitwise_or bitwise_right_shift bitwise_xor
copysign divide equal floor_divide greater greater_equal hypot less less_equal logaddexp
logical_and logical_or logical_xor maximum minimum multiply nextafter not_equal pow
remainder subtract""".split()
# The standard's parameter lists (defaults are not compared).
STUBS = {
    **{name: "x, /" for name in UNARY}, **{name: "x1, x2, /" for name in BINARY},
    "clip": "x, /, min=None, max=None",
    "astype": "x, dtype, /, *, copy=True, device=None", "can_cast": "from_, to, /",
    "finfo": "type, /", "iinfo": "type, /", "isdtype": "dtype, kind",
    "result_type": "*arrays_and_dtypes",
    "arange": "start, /, stop=None, step=1, *, dtype=None, device=None",
    "asarray": "obj, /, *, dtype=None, device=None, copy=None",
    "empty": "shape, *, dtype=None, device=None", "ones": "shape, *, dtype=None, device=None",
    "zeros": "shape, *, dtype=None, device=None",
    "empty_like": "x, /, *, dtype=None, device=None",
    "ones_like": "x, /, *, dtype=None, device=None",
    "zeros_like": "x, /, *, dtype=None, device=None",
    "eye": "n_rows, n_cols=None, /, *, k=0, dtype=None, device=None",
    "from_dlpack": "x, /, *, device=None, copy=None",
    "full": "shape, fill_value, *, dtype=None, device=None",
    "full_like": "x, /, fill_value, *, dtype=None, device=None",
    "linspace": "start, stop, /, num, *, dtype=None, device=None, endpoint=True",
    "meshgrid": "*arrays, indexing='xy'", "tril": "x, /, *, k=0", "triu": "x, /, *, k=0",
    "take": "x, indices, /, *, axis=None", "take_along_axis": "x, indices, /, *, axis=-1",
    "matmul": "x1, x2, /", "matrix_transpose": "x, /", "tensordot": "x1, x2, /, *, axes=2",
    "vecdot": "x1, x2, /, *, axis=-1",
    "broadcast_arrays": "*arrays", "broadcast_to": "x, /, shape",
    "concat": "arrays, /, *, axis=0", "expand_dims": "x, /, axis", "flip": "x, /, *, axis=None",
    "moveaxis": "x, source, destination, /", "permute_dims": "x, /, axes",
    "repeat": "x, repeats, /, *, axis=None", "reshape": "x, /, shape, *, copy=None",
    "roll": "x, /, shift, *, axis=None", "squeeze": "x, /, axis",
    "stack": "arrays, /, *, axis=0", "tile": "x, repetitions, /", "unstack": "x, /, *, axis=0",
    "argmax": "x, /, *, axis=None, keepdims=False", "argmin": "x, /, *, axis=None, keepdims=False",
    "count_nonzero": "x, /, *, axis=None, keepdims=False", "nonzero": "x, /",
    "searchsorted": "x1, x2, /, *, side='left', sorter=None", "where": "condition, x1, x2, /",
    "unique_all": "x, /", "unique_counts": "x, /", "unique_inverse": "x, /",
    "unique_values": "x, /",
    "argsort": "x, /, *, axis=-1, descending=False, stable=True",
    "sort": "x, /, *, axis=-1, descending=False, stable=True",
    "cumulative_sum": "x, /, *, axis=None, dtype=None, include_initial=False",
    "cumulative_prod": "x, /, *, axis=None, dtype=None, include_initial=False",
    "max": "x, /, *, axis=None, keepdims=False", "min": "x, /, *, axis=None, keepdims=False",
    "mean": "x, /, *, axis=None, keepdims=False",
    "prod": "x, /, *, axis=None, dtype=None, keepdims=False",
    "sum": "x, /, *, axis=None, dtype=None, keepdims=False",
    "std": "x, /, *, axis=None, correction=0.0, keepdims=False",
    "var": "x, /, *, axis=None, correction=0.0, keepdims=False",
    "all": "x, /, *, axis=None, keepdims=False", "any": "x, /, *, axis=None, keepdims=False",
    "diff": "x, /, *, axis=-1, n=1, prepend=None, append=None",
}
NUMPY_SIGNATURES = {
    "clip": "np.clip(a, a_min, a_max, out, *, min, max) takes min / max only by keyword",
    "argsort": "np.argsort has no descending parameter",
    "sort": "np.sort has no descending parameter",
}


def _stub(params: str) -> inspect.Signature:
    return inspect.signature(eval(f"lambda {params}: None"))  # the standard's parameter list


def _signature_problems(fn, stub: inspect.Signature, is_ufunc: bool) -> list[str]:
    """What keeps ``fn`` from accepting every call the standard's signature allows."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except ValueError:
        return ["no inspectable signature"]
    kinds = [p.kind for p in params]
    if is_ufunc and kinds and kinds[0] == VAR:  # JAX's ufunc objects take *args
        return []
    problems = []
    for i, expected in enumerate(stub.parameters.values()):
        if expected.kind == P_ONLY:
            if i >= len(params) or params[i].kind not in (P_ONLY, P_OR_K, VAR):
                problems.append(f"parameter {i} ({expected.name}) is not positional")
        elif expected.kind == VAR:
            if VAR not in kinds:
                problems.append(f"no *{expected.name}")
        else:
            match = [p for p in params if p.name == expected.name]
            allowed = (K_ONLY, P_OR_K) if expected.kind == K_ONLY else (P_OR_K,)
            if not match or match[0].kind not in allowed:
                problems.append(f"no {expected.name!r} parameter of kind {expected.kind}")
    stub_required = [p for p in stub.parameters.values()
                     if p.default is p.empty and p.kind != VAR]
    required = [p.name for p in params if p.default is p.empty and p.kind not in (
        VAR, inspect.Parameter.VAR_KEYWORD)]
    if len(required) > len(stub_required):
        problems.append(f"requires {required}, the standard only {[p.name for p in stub_required]}")
    return problems


@pytest.mark.parametrize("xp,case", conformance_params(
    ((name, (name, params)) for name, params in STUBS.items()), NUMPY_SIGNATURES))
def test_signature_accepts_the_standard_calls(xp, case):
    name, params = case
    fn = getattr(xp, name)
    is_ufunc = isinstance(fn, getattr(xp, "ufunc", ()))
    problems = _signature_problems(fn, _stub(params), is_ufunc)
    assert not problems, f"{name}({params}): {problems}"


# --- dtype objects ---------------------------------------------------------------------------
DTYPES = """bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float32 float64 complex64
complex128""".split()
NOT_DTYPES = ["x: 1, 2", "not a dtype", None, object(), 1.5, (), "float33"]


@pytest.mark.parametrize("xp,case", conformance_params((name, name) for name in DTYPES))
def test_dtype_compares_false_with_anything_else(xp, case):
    """A harness looks strings up in dicts keyed by dtypes: == must never raise."""
    dtype = getattr(xp, case)
    assert dtype == dtype and hash(dtype) == hash(getattr(xp, case))
    for other in NOT_DTYPES:
        assert (dtype == other) is False and (dtype != other) is True, other
    assert {dtype: case}.get("x: 1, 2") is None
    others = [getattr(xp, name) for name in DTYPES if name != case]
    assert all(dtype != other for other in others)


@each_namespace()
def test_array_dtype_equals_namespace_dtype(xp):
    assert xp.asarray([1.5], dtype=xp.float32).dtype == xp.float32
    assert xp.asarray([1], dtype=xp.int16).dtype == xp.int16
    assert xp.asarray([True]).dtype == xp.bool
    assert xp.asarray([1.5], dtype=xp.float32).dtype != xp.float64


FLOATS = {"float32": "float32", "float64": "float64", "complex64": "float32",
          "complex128": "float64"}


@pytest.mark.parametrize("xp,case", conformance_params(
    FLOATS.items(), {"float32": "np.finfo(float32).eps and friends are np.float32, not float",
                     "complex64": "np.finfo(complex64).eps and friends are np.float32"}))
def test_finfo_fields_and_types(xp, case, x64):
    info, reference = xp.finfo(getattr(xp, case)), np.finfo(case)
    assert type(info.bits) is int and info.bits == reference.bits
    for field in ("eps", "max", "min", "smallest_normal"):
        value = getattr(info, field)
        assert isinstance(value, float), (field, type(value))
        assert value == float(getattr(reference, field)), field
    assert info.dtype == getattr(xp, FLOATS[case])


@pytest.mark.parametrize("xp,case", conformance_params(
    (name, name) for name in DTYPES if name.startswith(("int", "uint"))))
def test_iinfo_fields_and_types(xp, case, x64):
    info, reference = xp.iinfo(getattr(xp, case)), np.iinfo(case)
    for field in ("bits", "max", "min"):
        value = getattr(info, field)
        assert type(value) is int and value == getattr(reference, field), field
    assert info.dtype == getattr(xp, case)


@each_namespace(numpy_deviates="np.finfo and np.iinfo do not take arrays")
def test_finfo_and_iinfo_take_arrays(xp):
    assert xp.finfo(xp.ones(1, dtype=xp.complex64)).dtype == xp.float32
    assert xp.iinfo(xp.zeros(1, dtype=xp.int8)).bits == 8


KINDS = {"bool": {"bool"}, "signed integer": {"int8", "int16", "int32", "int64"},
         "unsigned integer": {"uint8", "uint16", "uint32", "uint64"},
         "real floating": {"float32", "float64"}, "complex floating": {"complex64", "complex128"}}
KINDS["integral"] = KINDS["signed integer"] | KINDS["unsigned integer"]
KINDS["numeric"] = KINDS["integral"] | KINDS["real floating"] | KINDS["complex floating"]


@pytest.mark.parametrize("xp,case", conformance_params(KINDS.items()))
def test_isdtype_kinds(xp, case):
    members = case
    kind = next(k for k, v in KINDS.items() if v is members)
    for name in DTYPES:
        assert xp.isdtype(getattr(xp, name), kind) == (name in members), (name, kind)
    assert xp.isdtype(xp.float32, (kind, xp.float32))
    assert xp.isdtype(xp.int8, xp.int8) and not xp.isdtype(xp.int8, xp.int16)


@each_namespace()
def test_result_type_and_can_cast(xp):
    assert xp.result_type(xp.int8, xp.int16) == xp.int16
    assert xp.result_type(xp.uint8, xp.int8) == xp.int16
    assert xp.result_type(xp.float32, xp.complex64) == xp.complex64
    assert xp.result_type(xp.asarray([1], dtype=xp.int8), xp.uint8) == xp.int16
    assert xp.result_type(xp.float32, 1.5) == xp.float32  # 2024.12: Python scalars
    assert xp.result_type(xp.int16, 1) == xp.int16
    assert xp.result_type(xp.bool, True) == xp.bool
    assert xp.can_cast(xp.int8, xp.int16) and not xp.can_cast(xp.int16, xp.int8)
    assert xp.can_cast(xp.asarray([1], dtype=xp.uint8), xp.int16)
    assert not xp.can_cast(xp.float32, xp.int32)


@each_namespace()
def test_astype(xp):
    x = xp.asarray([1.7, -2.5, 0.0], dtype=xp.float32)
    as_int = xp.astype(x, xp.int32)
    assert as_int.dtype == xp.int32 and np.asarray(as_int).tolist() == [1, -2, 0]  # truncates
    assert np.asarray(xp.astype(x, xp.bool)).tolist() == [True, True, False]
    assert xp.astype(xp.asarray([True, False]), xp.float32).dtype == xp.float32
    same = xp.astype(x, xp.float32, copy=False)
    assert same.dtype == xp.float32 and np.asarray(same).tolist() == np.asarray(x).tolist()
    on = xp.astype(x, xp.float32, copy=True, device=x.device)
    assert on.device == x.device
    assert xp.astype(x, xp.complex64).dtype == xp.complex64
