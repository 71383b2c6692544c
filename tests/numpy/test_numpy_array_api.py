"""The Array API 2024.12 surface: every required name exists, the namespace is
reachable from arrays, and the inspection object describes Ember."""
import numpy as np
import pytest

import ember
import ember.numpy as enp

REQUIRED = """
e inf nan newaxis pi
arange asarray empty empty_like eye from_dlpack full full_like linspace meshgrid ones
ones_like tril triu zeros zeros_like
astype can_cast finfo iinfo isdtype result_type
bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 float32 float64 complex64 complex128
abs acos acosh add asin asinh atan atan2 atanh bitwise_and bitwise_left_shift bitwise_invert
bitwise_or bitwise_right_shift bitwise_xor ceil clip conj copysign cos cosh divide equal exp
expm1 floor floor_divide greater greater_equal hypot imag isfinite isinf isnan less less_equal
log log1p log2 log10 logaddexp logical_and logical_not logical_or logical_xor maximum minimum
multiply negative nextafter not_equal positive pow real reciprocal remainder round sign signbit
sin sinh square sqrt subtract tan tanh trunc
take take_along_axis __array_namespace_info__
matmul matrix_transpose tensordot vecdot
broadcast_arrays broadcast_to concat expand_dims flip moveaxis permute_dims repeat reshape
roll squeeze stack tile unstack
argmax argmin count_nonzero nonzero searchsorted where
unique_all unique_counts unique_inverse unique_values
argsort sort
cumulative_prod cumulative_sum max mean min prod std sum var
all any diff
""".split()

LINALG = """cholesky cross det diagonal eigh eigvalsh inv matmul matrix_norm matrix_power
matrix_rank matrix_transpose outer pinv qr slogdet solve svd svdvals tensordot trace vecdot
vector_norm""".split()

FFT = """fft ifft fftn ifftn rfft irfft rfftn irfftn hfft ihfft fftfreq rfftfreq fftshift
ifftshift""".split()


@pytest.mark.parametrize("module,names", [(enp, REQUIRED), (enp.linalg, LINALG),
                                          (enp.fft, FFT)])
def test_every_required_name_exists(module, names):
    missing = [name for name in names if not hasattr(module, name)]
    assert not missing, f"missing from {module.__name__}: {missing}"


def test_namespace_from_arrays_and_version():
    x = enp.ones(3)
    assert x.__array_namespace__() is enp
    assert x.__array_namespace__(api_version="2023.12") is enp
    assert x.__array_namespace__(api_version="2024.12") is enp
    assert enp.__array_api_version__ == "2024.12"
    with pytest.raises(ValueError, match="2021.12"):
        x.__array_namespace__(api_version="2021.12")


def test_inspection_object():
    info = enp.__array_namespace_info__()
    capabilities = info.capabilities()
    assert capabilities["boolean indexing"] is False
    assert capabilities["data-dependent shapes"] is False
    assert info.default_dtypes()["real floating"] == np.float32
    assert info.default_dtypes()["indexing"] == np.int32
    assert "float64" not in info.dtypes() and "float32" in info.dtypes()
    assert set(info.dtypes(kind="signed integer")) == {"int8", "int16", "int32"}
    assert info.default_device() in info.devices()


def test_inspection_with_x64(x64):
    info = enp.__array_namespace_info__()
    assert info.default_dtypes()["integral"] == np.int64
    assert set(info.dtypes(kind=("bool", "complex floating"))) == {"bool", "complex64",
                                                                   "complex128"}


def test_array_attributes_used_by_array_api_code():
    x = enp.asarray([[1.0, 2.0], [3.0, 4.0]])
    assert x.device is not None and x.mT.shape == (2, 2) and x.ndim == 2 and x.size == 4
    xp = x.__array_namespace__()
    y = xp.sum(xp.multiply(x, x), axis=-1)
    assert y.tolist() == [5.0, 25.0]
    assert isinstance(y, ember.Array)
