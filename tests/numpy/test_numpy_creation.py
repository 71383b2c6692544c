"""Array creation against NumPy: asarray, zeros/ones/full, arange, linspace, eye, tri*,
meshgrid, from_dlpack; their errors; creation inside jit."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ember
import ember.numpy as enp
from ember.errors import ConcretizationError, EmberTypeError, EmberValueError


def test_asarray_dtypes_and_identity():
    x = enp.asarray([1, 2, 3])
    assert isinstance(x, ember.Array) and x.dtype == np.int32
    assert enp.asarray(x) is x
    assert enp.asarray([1.5, 2]).dtype == np.float32
    assert enp.asarray(True).dtype == np.bool_ and enp.asarray(2).shape == ()
    assert enp.asarray([1, 2], dtype="float16").dtype == np.float16
    assert enp.asarray(x, dtype=enp.float32).dtype == np.float32
    assert enp.array([[1, 2]], ndmin=4).shape == (1, 1, 1, 2)
    assert enp.copy(x).tolist() == [1, 2, 3]
    np.testing.assert_array_equal(np.asarray(enp.asarray(np.arange(6).reshape(2, 3))),
                                  np.arange(6).reshape(2, 3))


def test_asarray_copy_false_and_overflow_errors():
    x = enp.asarray([1, 2])
    assert enp.asarray(x, copy=False) is x
    with pytest.raises(EmberValueError, match="converting int32 to float32 needs a copy"):
        enp.asarray(x, dtype="float32", copy=False)
    with pytest.raises(EmberValueError, match="a list is always copied"):
        enp.asarray([1, 2], copy=False)
    with pytest.raises(EmberValueError, match="does not fit in int32"):
        enp.asarray(2**40)


def test_asarray_stacks_traced_values_in_lists():
    def f(a, b):
        return enp.asarray([[a, b], [b, 1.0]]), enp.array([a, 2])

    with ember.config.override(backend="reference"):
        nested, flat = ember.jit(f)(np.float32(3), np.float32(4))
    np.testing.assert_array_equal(np.asarray(nested), [[3, 4], [4, 1]])
    assert flat.dtype == np.float32 and flat.tolist() == [3, 2]


@pytest.mark.parametrize("fn,value", [(enp.zeros, 0), (enp.ones, 1), (enp.empty, 0)])
@given(shape=st.lists(st.integers(0, 3), max_size=3).map(tuple))
def test_filled_arrays(fn, value, shape):
    out = fn(shape)
    assert out.shape == shape and out.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(out), np.full(shape, value, np.float32))
    like = fn(shape, dtype="int8")
    assert like.dtype == np.int8


def test_full_and_like_functions():
    assert enp.full((2, 2), 7).dtype == np.int32
    assert enp.full(3, 1.5).tolist() == [1.5, 1.5, 1.5]
    np.testing.assert_array_equal(np.asarray(enp.full((2, 3), [1, 2, 3])),
                                  np.full((2, 3), [1, 2, 3]))
    x = enp.asarray([[1.0, 2.0]])
    assert enp.zeros_like(x).shape == (1, 2) and enp.ones_like(x, dtype="int32").dtype == np.int32
    assert enp.full_like(x, 5, shape=(3,)).tolist() == [5.0, 5.0, 5.0]
    assert enp.empty_like(x).tolist() == [[0.0, 0.0]]
    with pytest.raises(EmberValueError, match=r"negative dimensions are not allowed: "
                                              r"shape \(2, -1\)"):
        enp.zeros((2, -1))
    with pytest.raises(EmberTypeError, match="shape .* must hold integers"):
        enp.ones((2, 1.5))


ARANGE_CASES = [(5,), (2, 9), (2, 9, 3), (10, 0, -3), (0.5, 3.2, 0.4), (-1.0, 1.0, 0.25), (3, 3),
                (5, 1)]


@pytest.mark.parametrize("args", ARANGE_CASES)
def test_arange_matches_numpy(args):
    out = enp.arange(*args)
    expected = np.arange(*args)
    assert out.dtype == (np.float32 if expected.dtype.kind == "f" else np.int32)
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-6, atol=1e-6)
    assert enp.arange(*args, dtype="float32").dtype == np.float32


def test_arange_errors():
    with pytest.raises(EmberValueError, match="step must not be zero"):
        enp.arange(0, 5, 0)
    with pytest.raises(ConcretizationError, match="arange needs a concrete value"):
        ember.jit(lambda n: enp.arange(n))(3)


@given(start=st.floats(-5, 5), stop=st.floats(-5, 5), num=st.integers(0, 9),
       endpoint=st.booleans())
def test_linspace_matches_numpy(start, stop, num, endpoint):
    out, step = enp.linspace(start, stop, num, endpoint=endpoint, retstep=True)
    expected, expected_step = np.linspace(start, stop, num, endpoint=endpoint, retstep=True)
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-5, atol=1e-5)
    if num > 1 or (num == 1 and not endpoint):
        np.testing.assert_allclose(float(step), expected_step, rtol=1e-5, atol=1e-6)
    if num > 1 and endpoint:
        assert float(out[-1]) == np.float32(stop)


def test_linspace_with_arrays_axis_and_dtype():
    out = enp.linspace(np.array([0.0, 1.0]), np.array([1.0, 3.0]), 5, axis=1)
    np.testing.assert_allclose(np.asarray(out), np.linspace([0.0, 1.0], [1.0, 3.0], 5, axis=1),
                               rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(enp.linspace(0, 10, 4, dtype="int32")),
                                  np.linspace(0, 10, 4, dtype=np.int32))
    np.testing.assert_allclose(np.asarray(enp.logspace(0, 3, 4)), np.logspace(0, 3, 4),
                               rtol=1e-5)
    np.testing.assert_allclose(np.asarray(enp.geomspace(1, 1000, 4)), np.geomspace(1, 1000, 4),
                               rtol=1e-5)
    traced = ember.jit(lambda a, b: enp.linspace(a, b, 3))
    with ember.config.override(backend="reference"):
        np.testing.assert_allclose(np.asarray(traced(0.0, 1.0)), [0, 0.5, 1])


@pytest.mark.parametrize("n,m,k", [(3, None, 0), (3, 4, 1), (4, 2, -1), (2, 3, 5), (0, 2, 0)])
def test_eye_tri_tril_triu(n, m, k):
    np.testing.assert_array_equal(np.asarray(enp.eye(n, m, k)), np.eye(n, m, k))
    np.testing.assert_array_equal(np.asarray(enp.tri(n, m, k)), np.tri(n, m, k))
    x = np.arange(2 * n * (m or n)).reshape(2, n, m or n)
    np.testing.assert_array_equal(np.asarray(enp.tril(x, k)), np.tril(x, k))
    np.testing.assert_array_equal(np.asarray(enp.triu(x, k)), np.triu(x, k))
    assert enp.identity(3, dtype="int8").dtype == np.int8
    with pytest.raises(EmberValueError, match="tril needs an array of at least 2 dimensions"):
        enp.tril(np.ones(3))


@pytest.mark.parametrize("indexing", ["xy", "ij"])
@pytest.mark.parametrize("sparse", [False, True])
def test_meshgrid_matches_numpy(indexing, sparse):
    xs = [np.arange(2), np.arange(3.0), np.arange(4)]
    for count in (1, 2, 3):
        ours = enp.meshgrid(*xs[:count], indexing=indexing, sparse=sparse)
        theirs = np.meshgrid(*xs[:count], indexing=indexing, sparse=sparse)
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            np.testing.assert_array_equal(np.asarray(a), b)
    with pytest.raises(EmberValueError, match="indexing must be 'xy' or 'ij'"):
        enp.meshgrid(xs[0], indexing="yx")


def test_from_dlpack_both_ways():
    host = np.arange(6, dtype=np.float32).reshape(2, 3)
    x = enp.from_dlpack(host)
    np.testing.assert_array_equal(np.asarray(x), host)
    np.testing.assert_array_equal(np.from_dlpack(x), host)
    assert enp.from_dlpack(x) is x
    with pytest.raises(EmberTypeError, match="from_dlpack needs an object with __dlpack__"):
        enp.from_dlpack([1, 2])
    with pytest.raises(EmberTypeError, match="cannot import ndarray of dtype <U1"):
        enp.from_dlpack(np.array(["a", "b"]))


def test_creation_under_jit_uses_no_large_constants():
    def f(x):
        return x + enp.zeros((64, 64)) + enp.eye(64) + enp.arange(64.0)

    graph = ember.jit(f).lower(np.ones((64, 64), np.float32)).as_text()
    assert "iota" in graph and "broadcast_in_dim" in graph
    with ember.config.override(backend="reference"):
        np.testing.assert_allclose(np.asarray(ember.jit(f)(np.ones((64, 64), np.float32))),
                                   1 + np.eye(64) + np.arange(64.0))
