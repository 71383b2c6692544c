"""ember.scipy.stats against scipy.stats (values), numerical gradients with respect to
the point and the parameters, jit, and JAX where installed."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.stats as sst

import ember
from ember.scipy import stats
from ember.test_util import check_grads

REAL = np.array([-4.0, -1.3, -0.2, 0.0, 0.7, 2.5, 6.0])
UNIT = np.array([0.0, 1e-6, 0.05, 0.3, 0.5, 0.8, 0.999, 1.0])
POSITIVE = np.array([-0.5, 0.0, 0.3, 1.0, 2.2, 5.0])
INTERIOR = np.array([0.02, 0.25, 0.5, 0.9])

# (distribution, its parameters, the points for the functions of x)
CONTINUOUS = [
    ("norm", (0.5, 2.0), REAL), ("laplace", (0.5, 2.0), REAL),
    ("logistic", (0.5, 2.0), REAL), ("cauchy", (0.5, 2.0), REAL),
    ("uniform", (-1.0, 3.0), REAL), ("t", (3.5, 0.2, 1.5), REAL),
    ("gamma", (2.5, 0.1, 1.5), POSITIVE), ("beta", (2.5, 1.3), INTERIOR),
    ("beta", (0.8, 3.0, -1.0, 2.0), REAL),
]
FUNCTIONS_OF_X = ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf")
QUANTILES = ("ppf", "isf")


def _cases(functions):
    for name, params, points in CONTINUOUS:
        module = getattr(stats, name)
        for fn in functions:
            if fn in module.__all__:
                yield pytest.param(name, fn, params, points, id=f"{name}.{fn}{params}")


@pytest.mark.parametrize("name, fn, params, points", list(_cases(FUNCTIONS_OF_X)))
def test_functions_of_x_match_scipy(name, fn, params, points, x64):
    got = getattr(getattr(stats, name), fn)(points, *params)
    np.testing.assert_allclose(got, getattr(getattr(sst, name), fn)(points, *params),
                               rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name, fn, params, points", list(_cases(QUANTILES)))
def test_quantiles_match_scipy(name, fn, params, points, x64):
    q = np.concatenate([UNIT, [-0.1, 1.1]])
    got = getattr(getattr(stats, name), fn)(q, *params)
    np.testing.assert_allclose(got, getattr(getattr(sst, name), fn)(q, *params), rtol=1e-11)


@pytest.mark.parametrize("name, fn, params, points", list(_cases(FUNCTIONS_OF_X)))
def test_float32(name, fn, params, points):
    got = np.asarray(getattr(getattr(stats, name), fn)(points.astype(np.float32), *params))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, getattr(getattr(sst, name), fn)(points, *params),
                               rtol=2e-5, atol=1e-6)


def _interior(name, points, params):
    """Points where the density is smooth (inside the support, off the Laplace kink)."""
    if name == "uniform":
        return np.array([-0.5, 1.2])
    if name == "laplace":
        return np.array([-1.3, 2.5])
    if name == "gamma":
        return np.array([0.5, 2.2])
    if name == "beta":
        return params[2] + params[3] * INTERIOR[1:] if len(params) > 2 else INTERIOR[1:]
    return points[1:-1]


def _smooth_and_distinct(case) -> bool:
    """uniform's cdf has kinks in loc and scale (its gradient in x is checked below);
    gamma's and beta's logcdf and logsf are the logs of their cdf and sf."""
    name, fn = case.values[:2]
    return not ((name, fn) == ("uniform", "cdf")
                or (name in ("gamma", "beta") and fn in ("logcdf", "logsf")))


@pytest.mark.parametrize("name, fn, params, points", [
    case for case in _cases(("logpdf", "cdf", "logcdf", "sf", "logsf"))
    if _smooth_and_distinct(case)])
def test_gradients_in_x_and_parameters(name, fn, params, points, x64):
    x = _interior(name, points, params)
    f = getattr(getattr(stats, name), fn)
    check_grads(lambda x, *p: f(x, *p), (x, *map(np.float64, params)), order=1, rtol=1e-5,
                atol=1e-8, eps=1e-6)


@pytest.mark.parametrize("name, fn, params, points", list(_cases(QUANTILES)))
def test_quantile_gradients(name, fn, params, points, x64):
    f = getattr(getattr(stats, name), fn)
    check_grads(lambda q, *p: f(q, *p), (INTERIOR, *map(np.float64, params)), order=1,
                rtol=1e-5, atol=1e-8, eps=1e-7)


def test_uniform_cdf_gradient_in_x(x64):
    grad = ember.vmap(ember.grad(stats.uniform.cdf), in_axes=(0, None, None))
    np.testing.assert_allclose(grad(np.array([-2.0, 0.5, 3.0]), -1.0, 3.0), [0, 1 / 3, 0])


K = np.array([-1.0, 0.0, 1.0, 2.0, 3.0, 7.0, 2.5])


def test_poisson_matches_scipy(x64):
    for mu in (0.3, 2.5, 40.0):
        np.testing.assert_allclose(stats.poisson.logpmf(K, mu), sst.poisson.logpmf(K, mu),
                                   rtol=1e-12)
        np.testing.assert_allclose(stats.poisson.pmf(K, mu, loc=1), sst.poisson.pmf(
            K, mu, loc=1), rtol=1e-12, atol=1e-300)
    check_grads(lambda mu: stats.poisson.logpmf(K[1:6], mu), (np.float64(2.5),), order=2,
                rtol=1e-6)
    for mu in (0.3, 2.5, 40.0):
        np.testing.assert_allclose(stats.poisson.cdf(K, mu), sst.poisson.cdf(K, mu), rtol=1e-12)
        np.testing.assert_allclose(stats.poisson.cdf(K, mu, loc=1), sst.poisson.cdf(K, mu, 1),
                                   rtol=1e-12)
    check_grads(lambda mu: stats.poisson.cdf(K, mu), (np.float64(2.5),), order=1, rtol=1e-6)


def _poisson_entropy_by_sum(mu):
    k = np.arange(int(mu + 40 * np.sqrt(mu) + 100))
    log_pmf = sst.poisson.logpmf(k, mu)
    return -np.sum(np.exp(log_pmf) * log_pmf)


def test_poisson_entropy(x64):
    """Against the sum over the support (SciPy's own entropy does not converge at 1e5)."""
    mu = np.array([1e-3, 0.5, 3.0, 50.0, 299.9, 300.0, 1e3, 1e5])
    np.testing.assert_allclose(stats.poisson.entropy(mu),
                               [_poisson_entropy_by_sum(m) for m in mu], rtol=1e-10)
    np.testing.assert_allclose(stats.poisson.entropy(mu[:3], loc=4), sst.poisson.entropy(
        mu[:3], loc=4), rtol=1e-12)
    assert np.asarray(stats.poisson.entropy(0.0)) == 0
    assert np.isnan(np.asarray(stats.poisson.entropy(-1.0)))
    check_grads(stats.poisson.entropy, (np.array([0.5, 3.0, 500.0]),), order=1, rtol=1e-6)


def test_bernoulli_matches_scipy(x64):
    for p in (0.0, 0.3, 1.0):
        np.testing.assert_allclose(stats.bernoulli.logpmf(K, p), sst.bernoulli.logpmf(K, p))
        np.testing.assert_allclose(stats.bernoulli.pmf(K, p, 1), sst.bernoulli.pmf(K, p, 1))
        np.testing.assert_allclose(stats.bernoulli.cdf(K - 0.5, p),
                                   sst.bernoulli.cdf(K - 0.5, p))
        q = np.array([0.2, 0.7, 0.71, -0.1, 1.5])
        np.testing.assert_allclose(stats.bernoulli.ppf(q, p), sst.bernoulli.ppf(q, p))
        # At the ends, as JAX: the least k with cdf(k) >= q (SciPy: -1 at 0, and 1 at 1
        # even where p = 0).
        assert stats.bernoulli.ppf(0.0, p) == 0
        assert stats.bernoulli.ppf(1.0, p) == (0 if p == 0 else 1)
    check_grads(lambda p: stats.bernoulli.logpmf(np.array([0.0, 1.0]), p),
                (np.float64(0.3),), order=2, rtol=1e-6)


def test_dirichlet_matches_scipy(x64):
    alpha = np.array([1.5, 2.0, 3.0])
    x = np.array([[0.2, 0.3, 0.5], [0.1, 0.6, 0.3]]).T  # categories first, two points
    np.testing.assert_allclose(stats.dirichlet.logpdf(x, alpha), sst.dirichlet.logpdf(x, alpha),
                               rtol=1e-12)
    np.testing.assert_allclose(stats.dirichlet.pdf(x[:, 0], alpha),
                               sst.dirichlet.pdf(x[:, 0], alpha), rtol=1e-12)
    np.testing.assert_allclose(stats.dirichlet.logpdf(x[:2], alpha),  # the last is implied
                               sst.dirichlet.logpdf(x, alpha), rtol=1e-12)
    assert np.asarray(stats.dirichlet.logpdf(np.array([0.5, 0.6, 0.1]), alpha)) == -np.inf
    # In x through the K - 1 free entries, so that finite differences stay on the simplex.
    check_grads(stats.dirichlet.logpdf, (x[:2, 0], alpha), order=1, rtol=1e-6)
    with pytest.raises(ValueError, match="entries on its first axis"):
        stats.dirichlet.logpdf(np.ones(5) / 5, alpha)


def _spd(rng, n, batch=()):
    a = rng.normal(size=(*batch, n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def test_multivariate_normal_matches_scipy(x64):
    rng = np.random.default_rng(0)
    cov, mean, x = _spd(rng, 3), rng.normal(size=3), rng.normal(size=(4, 3))
    np.testing.assert_allclose(stats.multivariate_normal.logpdf(x, mean, cov),
                               sst.multivariate_normal.logpdf(x, mean, cov), rtol=1e-12)
    np.testing.assert_allclose(stats.multivariate_normal.pdf(x[0], mean, cov),
                               sst.multivariate_normal.pdf(x[0], mean, cov), rtol=1e-12)
    np.testing.assert_allclose(stats.multivariate_normal.logpdf(x, mean, 2.0),
                               sst.multivariate_normal.logpdf(x, mean, 2.0), rtol=1e-12)
    np.testing.assert_allclose(stats.multivariate_normal.logpdf(x[:, 0], 0.5, 2.0),
                               sst.norm.logpdf(x[:, 0], 0.5, np.sqrt(2.0)), rtol=1e-12)
    covs = _spd(rng, 3, (4,))  # one covariance per point
    np.testing.assert_allclose(
        stats.multivariate_normal.logpdf(x, mean, covs),
        [sst.multivariate_normal.logpdf(x[i], mean, covs[i]) for i in range(4)], rtol=1e-12)
    check_grads(stats.multivariate_normal.logpdf, (x, mean, cov), order=1, rtol=1e-5)


def test_jit(x64):
    x = REAL
    f = ember.jit(lambda x, loc, scale: stats.norm.logcdf(x, loc, scale)
                  + stats.t.logpdf(x, 4.0, loc, scale) + stats.cauchy.sf(x, loc, scale))
    expected = (sst.norm.logcdf(x, 0.3, 1.7) + sst.t.logpdf(x, 4.0, 0.3, 1.7)
                + sst.cauchy.sf(x, 0.3, 1.7))
    np.testing.assert_allclose(f(x, 0.3, 1.7), expected, rtol=1e-12)
    rng = np.random.default_rng(1)
    cov = _spd(rng, 3)
    mvn = ember.jit(stats.multivariate_normal.logpdf)
    np.testing.assert_allclose(mvn(x[:3], np.zeros(3), cov),
                               sst.multivariate_normal.logpdf(x[:3], np.zeros(3), cov))


def _gradient_in_first_parameter(grad, total, f, args):
    """d/d(first parameter) of sum(f(*args)), with ember's or JAX's grad and sum."""
    point, first, *rest = args
    return grad(lambda p: total(f(point, p, *rest)))(np.float64(first))


def test_matches_jax(x64):
    jax = pytest.importorskip("jax")
    jst = pytest.importorskip("jax.scipy.stats")
    with jax.enable_x64(True):
        for name, params, points in CONTINUOUS:
            ours, theirs = getattr(stats, name), getattr(jst, name)
            for fn in ours.__all__:
                args = (INTERIOR if fn in QUANTILES else points, *params)
                f_ours, f_jax = getattr(ours, fn), getattr(theirs, fn)
                np.testing.assert_allclose(f_ours(*args), f_jax(*args), rtol=1e-9, atol=1e-14,
                                           err_msg=f"{name}.{fn}")
                grad_ours = _gradient_in_first_parameter(ember.grad, ember.numpy.sum, f_ours,
                                                         args)
                try:
                    grad_jax = _gradient_in_first_parameter(jax.grad, jax.numpy.sum, f_jax, args)
                except ValueError:  # JAX's betainc has no derivative in a and b
                    assert name == "beta" and fn in ("cdf", "logcdf", "sf", "logsf")
                    continue
                if np.isfinite(grad_jax):
                    np.testing.assert_allclose(grad_ours, grad_jax, rtol=1e-8,
                                               err_msg=f"grad {name}.{fn}")
        mu = np.array([0.5, 3.0, 50.0, 1e3])  # JAX's entropy is approximate (to ~1e-7)
        np.testing.assert_allclose(stats.poisson.entropy(mu), jst.poisson.entropy(mu),
                                   rtol=1e-6)
        for name in ("poisson", "bernoulli"):
            np.testing.assert_allclose(getattr(stats, name).logpmf(K, 0.3),
                                       getattr(jst, name).logpmf(K, 0.3), rtol=1e-12)
