"""Dtype objects, helpers and the Array API type promotion table."""
import itertools

import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember.errors import EmberTypeError, EmberValueError

BOOL = ["bool"]
SIGNED = ["int8", "int16", "int32", "int64"]
UNSIGNED = ["uint8", "uint16", "uint32", "uint64"]
FLOATS = ["float32", "float64"]
COMPLEX = ["complex64", "complex128"]


def _array_api_promotion(a: str, b: str) -> str | None:
    """The Array API 2023.12 promotion table (None: not defined by the standard)."""
    if a == b:
        return a
    groups = [SIGNED + UNSIGNED, FLOATS + COMPLEX]
    if not any(a in g and b in g for g in groups):
        return None
    if a in FLOATS + COMPLEX:
        bits = max(np.dtype(a).itemsize // (2 if a in COMPLEX else 1),
                   np.dtype(b).itemsize // (2 if b in COMPLEX else 1))
        return f"complex{bits * 16}" if a in COMPLEX or b in COMPLEX else f"float{bits * 8}"
    if (a in SIGNED) == (b in SIGNED):
        return max(a, b, key=lambda t: np.dtype(t).itemsize)
    signed, unsigned = (a, b) if a in SIGNED else (b, a)
    if np.dtype(signed).itemsize > np.dtype(unsigned).itemsize:
        return signed
    wider = {1: "int16", 2: "int32", 4: "int64", 8: None}[np.dtype(unsigned).itemsize]
    return wider


PAIRS = [(a, b) for a, b in itertools.product(BOOL + SIGNED + UNSIGNED + FLOATS + COMPLEX,
                                              repeat=2)
         if _array_api_promotion(a, b) is not None]


@pytest.mark.parametrize("a,b", PAIRS)
def test_array_api_promotion_table(x64, a, b):
    expected = np.dtype(_array_api_promotion(a, b))
    assert enp.result_type(a, b) == expected
    assert enp.promote_types(a, b) == expected
    x, y = enp.ones((2,), dtype=a), enp.zeros((2,), dtype=b)
    assert (x + y).dtype == expected
    assert enp.multiply(x, y).dtype == expected


def test_without_x64_64_bit_types_narrow():
    assert enp.result_type("int32", "uint32") == np.int32  # int64 narrows to int32
    assert enp.asarray(np.arange(3, dtype=np.int64)).dtype == np.int32
    assert enp.asarray(np.ones(2)).dtype == np.float32
    assert enp.float64(1.0).dtype == np.float32


def test_mixed_kinds_take_the_higher_kind_as_jax():
    assert enp.result_type("int32", "float16") == np.float16
    assert enp.result_type("bool", "uint8") == np.uint8
    assert enp.result_type("int8", "complex64") == np.complex64
    assert (enp.ones(2, "int32") + enp.ones(2, "float16")).dtype == np.float16


def test_python_scalars_are_weak():
    x16 = enp.ones(3, "float16")
    assert (x16 + 1.0).dtype == np.float16
    assert (x16 * 2).dtype == np.float16
    assert (enp.ones(3, "int8") + 1).dtype == np.int8
    assert (enp.ones(3, "int32") + 1.5).dtype == np.float32
    assert (enp.ones(3, "uint8") + True).dtype == np.uint8
    assert enp.result_type(1, 2.0) == np.float32
    assert enp.result_type(enp.ones(2, "bfloat16"), 3.0) == enp.bfloat16


def test_scalar_types_behave_as_dtypes():
    x = enp.ones(3)
    assert x.dtype == enp.float32 and enp.float32 == x.dtype
    assert hash(enp.float32) == hash(np.dtype("float32"))
    assert np.dtype(enp.int16) == np.int16
    assert {enp.float32: 1}[np.dtype("float32")] == 1
    assert enp.float32 != enp.int32
    y = enp.int32(3.7)
    assert isinstance(y, ember.Array) and y.dtype == np.int32 and int(y) == 3
    assert isinstance(np.float32(1), enp.float32)
    assert repr(enp.uint8) == "ember.numpy.uint8"
    assert enp.bool is enp.bool_ and enp.bool == np.bool_


def test_bfloat16_is_a_floating_dtype():
    assert enp.issubdtype(enp.bfloat16, enp.floating)
    assert enp.issubdtype(enp.bfloat16, np.inexact)
    assert not enp.issubdtype(enp.bfloat16, enp.integer)
    assert enp.issubdtype(enp.int8, np.signedinteger)
    assert enp.finfo(enp.bfloat16).bits == 16
    assert enp.result_type("bfloat16", "float16") == np.float32


def test_isdtype_kinds():
    assert enp.isdtype(enp.float32, "real floating")
    assert enp.isdtype(enp.complex64, ("bool", "complex floating"))
    assert enp.isdtype(enp.uint8, "integral") and not enp.isdtype(enp.uint8, "signed integer")
    assert enp.isdtype(enp.int8, "numeric") and not enp.isdtype(enp.bool_, "numeric")
    assert enp.isdtype(enp.int32, enp.int32) and not enp.isdtype(enp.int32, enp.int64)
    with pytest.raises(EmberValueError, match="unknown dtype kind 'floats'"):
        enp.isdtype(enp.float32, "floats")


def test_finfo_iinfo_and_can_cast():
    assert enp.finfo(enp.float32).eps == np.finfo(np.float32).eps
    assert enp.finfo(enp.ones(2)).dtype == np.float32
    assert enp.iinfo(enp.int8).min == -128
    assert enp.iinfo(enp.zeros(2, "uint16")).max == 65535
    assert enp.can_cast(enp.int8, enp.int32) and not enp.can_cast(enp.float32, enp.int32)
    assert enp.can_cast(enp.ones(2, "int16"), "float32")
    with pytest.raises(EmberValueError, match="iinfo needs an integer dtype, got float32"):
        enp.iinfo(enp.float32)
    with pytest.raises(EmberValueError, match="finfo needs a floating or complex dtype"):
        enp.finfo("int32")


def test_astype_and_iscomplexobj():
    x = enp.asarray([1.7, -2.5])
    assert enp.astype(x, enp.int32).tolist() == [1, -2]
    assert x.astype("float16").dtype == np.float16
    assert enp.iscomplexobj(enp.zeros(2, "complex64")) and enp.isrealobj(x)


def test_bad_dtype_names_are_clear():
    with pytest.raises(EmberTypeError, match="unknown dtype name 'flot32'"):
        enp.zeros(3, dtype="flot32")
    with pytest.raises(EmberTypeError, match="is not a dtype"):
        enp.ones(2, dtype=object())


def test_ndarray_covers_tracers():
    assert isinstance(enp.ones(2), enp.ndarray) and not isinstance(np.ones(2), enp.ndarray)
    seen = []
    with ember.config.override(backend="reference"):
        ember.jit(lambda x: seen.append(isinstance(x, enp.ndarray)) or x)(np.ones(2))
    assert seen == [True]


def test_public_dtypes_module():
    assert ember.dtypes.canonicalize_dtype("float64") == np.float32
    assert ember.dtypes.canonicalize_dtype(np.int16) == np.int16
    assert ember.dtypes.bfloat16 == enp.bfloat16
    assert ember.dtypes.issubdtype(ember.dtypes.float0, np.void)
    assert ember.dtypes.result_type(np.int8, 1.0) == np.float32


def test_numpy_type_aliases_isscalar_and_iterable():
    assert enp.double is enp.float64 and enp.single is enp.float32 and enp.float_ is enp.float64
    assert enp.cdouble is enp.complex128 and enp.csingle is enp.complex64
    assert enp.zeros(2, enp.double).dtype == np.float32  # 64-bit types narrow without x64
    assert enp.object_ is np.object_ and issubclass(enp.ComplexWarning, Warning)
    for value in (3, 2.5, np.float32(1), "text", enp.ones(()), np.array(1.0)):
        assert enp.isscalar(value) == True  # noqa: E712  (Python bools)
    for value in ([3], enp.ones(2), np.ones(2), None):
        assert enp.isscalar(value) is False
    assert enp.iterable(enp.ones(2)) and enp.iterable([]) and not enp.iterable(enp.ones(()))
