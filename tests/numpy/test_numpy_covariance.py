"""cov and corrcoef against NumPy (float64, every option, complex) and JAX (grad, jit)."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ember
import ember.numpy as enp
from ember.errors import EmberTypeError, EmberValueError

OPTIONS = [{}, {"bias": True}, {"ddof": 2}, {"rowvar": False}, {"fweights": True},
           {"aweights": True}, {"fweights": True, "aweights": True, "ddof": 0}]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(o) or "default")
@given(seed=st.integers(0, 999), variables=st.integers(1, 3), observations=st.integers(2, 6),
       with_y=st.booleans(), complex_=st.booleans())
def test_cov_and_corrcoef_match_numpy(options, seed, variables, observations, with_y,
                                      complex_):
    rng = np.random.default_rng(seed)
    shape = (variables, observations)
    x = rng.normal(size=shape) + (1j * rng.normal(size=shape) if complex_ else 0)
    y = rng.normal(size=(1, observations)) if with_y else None
    kwargs = dict(options)
    if kwargs.pop("fweights", False):
        kwargs["fweights"] = rng.integers(1, 4, observations)
    if kwargs.pop("aweights", False):
        kwargs["aweights"] = rng.uniform(0.5, 2.0, observations)
    if kwargs.get("rowvar") is False:
        x, y = x.T, (None if y is None else y.T)
    with ember.config.override(enable_x64=True):
        out = enp.cov(x, y, **kwargs)
        corr = enp.corrcoef(x, y, rowvar=kwargs.get("rowvar", True))
    for actual, expected in ((out, np.cov(x, y, **kwargs)),
                             (corr, np.corrcoef(x, y, rowvar=kwargs.get("rowvar", True)))):
        assert np.shape(actual) == np.shape(expected)
        np.testing.assert_allclose(np.asarray(actual), expected, rtol=1e-10, atol=1e-12)


def test_dtypes_and_degenerate_inputs_as_numpy():
    assert enp.cov(np.arange(4)).dtype == np.float32  # integers become the default float
    with np.errstate(divide="ignore", invalid="ignore"):
        np.testing.assert_array_equal(np.asarray(enp.cov(np.ones((2, 1)))),
                                      np.full((2, 2), np.nan))  # N - ddof = 0
    assert float(enp.corrcoef(np.array([1.0, 2.0, 4.0]))) == 1.0


def test_grad_and_jit_match_jax():
    jax = pytest.importorskip("jax")
    x = np.random.default_rng(0).normal(size=(3, 5)).astype(np.float32)

    def loss(module):
        return lambda v: (module.corrcoef(v) ** 2).sum() + module.cov(v, aweights=v[0] ** 2)[0, 1]

    with ember.config.override(backend="reference"):
        ours = ember.jit(ember.grad(loss(enp)))(x)
    np.testing.assert_allclose(np.asarray(ours), np.asarray(jax.grad(loss(jax.numpy))(x)),
                               rtol=2e-4, atol=1e-5)


def test_errors_name_shapes_and_dtypes():
    with pytest.raises(EmberValueError, match=r"fweights must be 1-D with one entry per "
                                              r"observation \(4\), got shape \(3,\)"):
        enp.cov(np.ones((2, 4)), fweights=np.ones(3, np.int32))
    with pytest.raises(EmberTypeError, match="fweights must be integers, got float32"):
        enp.cov(np.ones((2, 4)), fweights=np.ones(4, np.float32))
    with pytest.raises(EmberValueError, match=r"at most 2 dimensions, got shape \(2, 2, 2\)"):
        enp.cov(np.ones((2, 2, 2)))
