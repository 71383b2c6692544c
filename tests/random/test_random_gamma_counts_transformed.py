"""The gamma family, the count samplers and the transformed samplers: values recorded
from JAX 0.10 for the same keys (and compared with JAX live where it is installed),
distributions checked against scipy.stats on 10k samples with fixed seeds
(Kolmogorov-Smirnov for continuous ones, total variation of the mass function for
counts), jit / vmap consistency, dtypes and errors."""
import numpy as np
import pytest

import ember
import ember.numpy as enp
import ember.random as jr
from ember.errors import EmberTypeError, EmberValueError

stats = pytest.importorskip("scipy.stats")
f32 = np.float32
N = 10_000

# name -> (sampler written for a random module (ember.random or jax.random), JAX's values)
RECORDED = {
    "gamma": (lambda r: r.gamma(r.PRNGKey(0), np.array([0.3, 1.0, 2.5, 7.0], f32)),
              [0.6292697, 0.7262849, 1.5440423, 10.622705]),
    "loggamma": (lambda r: r.loggamma(r.PRNGKey(0), np.array([0.01, 0.3, 4.0], f32)),
                 [-11.478928, -0.28003234, 1.0423257]),
    "beta": (lambda r: r.beta(r.PRNGKey(0), f32(2.0), np.array([0.5, 3.0], f32)),
             [0.8554529, 0.49045956]),
    "dirichlet": (lambda r: r.dirichlet(r.PRNGKey(0), np.array([0.5, 1.0, 2.0], f32)),
                  [0.3228507, 0.26508135, 0.4120679]),
    "chisquare": (lambda r: r.chisquare(r.PRNGKey(0), np.array([1.0, 4.0], f32)),
                  [1.7691295, 3.5198827]),
    "t": (lambda r: r.t(r.PRNGKey(0), np.array([1.5, 4.0], f32)), [1.0553242, -2.417441]),
    "f": (lambda r: r.f(r.PRNGKey(0), f32(3.0), np.array([2.0, 7.0], f32)),
          [3.5078602, 0.15927961]),
    "poisson": (lambda r: r.poisson(r.PRNGKey(0), np.array([0, 0.5, 3, 9, 10, 50, 1000], f32)),
                [0, 0, 4, 9, 7, 53, 1034]),
    "binomial": (lambda r: r.binomial(r.PRNGKey(0), np.array([5, 20, 100, 1000, 7], f32),
                                      np.array([0.3, 0.5, 0.2, 0.9, 0.99], f32)),
                 [2.0, 10.0, 15.0, 890.0, 7.0]),
    "multinomial": (lambda r: r.multinomial(r.PRNGKey(0), np.array([20.0, 100.0], f32),
                                            np.array([[0.2, 0.5, 0.3], [0.1, 0.1, 0.8]], f32)),
                    [[1.0, 13.0, 6.0], [13.0, 10.0, 77.0]]),
    "geometric": (lambda r: r.geometric(r.PRNGKey(1), np.array([0.1, 0.5, 0.9], f32), (2, 3)),
                  [[8, 1, 1], [8, 1, 1]]),
    "orthogonal": (lambda r: r.orthogonal(r.PRNGKey(0), 3),
                   [[0.9554101, 0.29413575, 0.02599558], [-0.04628982, 0.23614088, -0.9706156],
                    [-0.29163137, 0.9261326, 0.23922686]]),
    "pareto": (lambda r: r.pareto(r.PRNGKey(0), np.array([1.0, 3.0], f32)),
               [19.1084, 3.6007476]),
    "weibull_min": (lambda r: r.weibull_min(r.PRNGKey(0), f32(2.0), f32(1.5), (3,)),
                    [4.1139336, 4.9072957, 1.0928195]),
    "rayleigh": (lambda r: r.rayleigh(r.PRNGKey(0), np.array([1.0, 3.0], f32)),
                 [0.32787833, 0.62430084]),
    "maxwell": (lambda r: r.maxwell(r.PRNGKey(0), (3,)), [2.6310966, 0.99103284, 0.964930594]),
    "double_sided_maxwell": (
        lambda r: r.double_sided_maxwell(r.PRNGKey(0), np.array([0.0, 1.0], f32), f32(2.0)),
        [[3.0914419, 4.1482553], [-4.165061, 5.5848346]]),
    "wald": (lambda r: r.wald(r.PRNGKey(0), np.array([1.0, 3.0], f32)),
             [0.3805977, 0.70958674]),
    "triangular": (lambda r: r.triangular(r.PRNGKey(0), f32(0), f32(0.3),
                                          np.array([1.0, 2.0], f32)),
                   [0.80860227, 1.7301326]),
    "lognormal": (lambda r: r.lognormal(r.PRNGKey(0), np.array([0.5, 2.0], f32)),
                  [2.2508795, 57.427856]),
    "generalized_normal": (lambda r: r.generalized_normal(r.PRNGKey(0), 1.5, (3,)),
                           [1.0603918, 0.08920828, -1.3751338]),
    "ball": (lambda r: r.ball(r.PRNGKey(0), 3, shape=(2,)),
             [[0.91715974, 0.39274216, 0.01165350], [-0.86136508, 0.31684825, -0.06285544]]),
}


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_samples_match_jax(name):
    sampler, expected = RECORDED[name]
    np.testing.assert_allclose(np.asarray(sampler(jr)), expected, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_samples_match_jax_live(name):
    jax = pytest.importorskip("jax")
    sampler, _ = RECORDED[name]
    ours, theirs = sampler(jr), sampler(jax.random)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=2e-5, atol=1e-6)


# name -> (10k samples from Ember, the scipy.stats distribution they should follow)
CONTINUOUS = {
    "gamma a=0.4": (lambda k: jr.gamma(k, 0.4, (N,)), stats.gamma(0.4)),
    "gamma a=3": (lambda k: jr.gamma(k, 3.0, (N,)), stats.gamma(3.0)),
    "exp(loggamma) a=0.05": (lambda k: enp.exp(jr.loggamma(k, 0.05, (N,))), stats.gamma(0.05)),
    "beta 0.5, 2": (lambda k: jr.beta(k, 0.5, 2.0, (N,)), stats.beta(0.5, 2.0)),
    "dirichlet marginal": (lambda k: jr.dirichlet(k, np.array([1.0, 2.0, 3.0]), (N,))[:, 1],
                           stats.beta(2.0, 4.0)),
    "chisquare 3": (lambda k: jr.chisquare(k, 3.0, (N,)), stats.chi2(3.0)),
    "t 2.5": (lambda k: jr.t(k, 2.5, (N,)), stats.t(2.5)),
    "f 4, 9": (lambda k: jr.f(k, 4.0, 9.0, (N,)), stats.f(4.0, 9.0)),
    "pareto 2": (lambda k: jr.pareto(k, 2.0, (N,)), stats.pareto(2.0)),
    "weibull_min": (lambda k: jr.weibull_min(k, 2.0, 1.5, (N,)),
                    stats.weibull_min(1.5, scale=2.0)),
    "rayleigh": (lambda k: jr.rayleigh(k, 1.5, (N,)), stats.rayleigh(scale=1.5)),
    "maxwell": (lambda k: jr.maxwell(k, (N,)), stats.maxwell()),
    "wald": (lambda k: jr.wald(k, 1.5, (N,)), stats.invgauss(1.5)),
    "triangular": (lambda k: jr.triangular(k, 0.0, 0.3, 2.0, (N,)),
                   stats.triang(0.15, scale=2.0)),
    "lognormal": (lambda k: jr.lognormal(k, 0.7, (N,)), stats.lognorm(0.7)),
    "generalized_normal 1.5": (lambda k: jr.generalized_normal(k, 1.5, (N,)),
                               stats.gennorm(1.5)),
}


@pytest.mark.parametrize("name", sorted(CONTINUOUS))
def test_continuous_distributions_against_scipy(name):
    sampler, reference = CONTINUOUS[name]
    x = np.asarray(sampler(jr.PRNGKey(3)), np.float64)
    assert x.shape == (N,) and np.isfinite(x).all()
    # A wrong parameter (10% off) moves the statistic well past 0.02 at N = 10k.
    assert stats.kstest(x, reference.cdf).statistic < 0.02


COUNTS = {
    "poisson 0.7": (lambda k: jr.poisson(k, 0.7, (N,)), stats.poisson(0.7)),
    "poisson 6": (lambda k: jr.poisson(k, 6.0, (N,)), stats.poisson(6.0)),
    "poisson 40 (rejection)": (lambda k: jr.poisson(k, 40.0, (N,)), stats.poisson(40.0)),
    "binomial 12, 0.3 (inversion)": (lambda k: jr.binomial(k, 12, 0.3, (N,)),
                                     stats.binom(12, 0.3)),
    "binomial 200, 0.4 (btrs)": (lambda k: jr.binomial(k, 200, 0.4, (N,)),
                                 stats.binom(200, 0.4)),
    "binomial 50, 0.9 (mirrored)": (lambda k: jr.binomial(k, 50, 0.9, (N,)),
                                    stats.binom(50, 0.9)),
    "geometric 0.3": (lambda k: jr.geometric(k, 0.3, (N,)), stats.geom(0.3)),
    "multinomial first count": (
        lambda k: jr.multinomial(k, 30, np.array([0.2, 0.5, 0.3]), shape=(N, 3))[:, 0],
        stats.binom(30, 0.2)),
}


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_count_distributions_against_scipy(name):
    sampler, reference = COUNTS[name]
    x = np.asarray(sampler(jr.PRNGKey(5)))
    assert x.shape == (N,) and (x == np.round(x)).all()
    support = np.arange(int(x.max()) + 1)
    empirical = np.bincount(x.astype(np.int64), minlength=support.size) / N
    total_variation = 0.5 * (np.abs(empirical - reference.pmf(support)).sum()
                             + reference.sf(support[-1]))
    assert total_variation < 0.03
    assert abs(x.mean() - reference.mean()) < 5 * reference.std() / np.sqrt(N)


def test_multinomial_counts_sum_to_n_and_orthogonal_is_haar():
    counts = np.asarray(jr.multinomial(jr.PRNGKey(0), np.array([7.0, 40.0]),
                                       np.array([[0.1, 0.6, 0.3], [0.25, 0.25, 0.5]])))
    assert counts.sum(-1).tolist() == [7.0, 40.0]
    q = np.asarray(jr.orthogonal(jr.PRNGKey(1), 4, (2000,)), np.float64)
    np.testing.assert_allclose(q @ np.swapaxes(q, -1, -2), np.broadcast_to(np.eye(4), q.shape),
                               atol=1e-5)
    # Haar: each entry has mean 0 and variance 1/n; a sign-biased Q (unsigned QR) fails.
    np.testing.assert_allclose(q.mean(0), 0, atol=0.05)
    np.testing.assert_allclose((q ** 2).mean(0), 0.25, atol=0.03)
    wide = np.asarray(jr.orthogonal(jr.PRNGKey(2), 2, m=5))
    np.testing.assert_allclose(wide @ wide.T, np.eye(2), atol=1e-5)
    unitary = np.asarray(jr.orthogonal(jr.PRNGKey(2), 3, dtype=enp.complex64))
    assert unitary.dtype == np.complex64
    np.testing.assert_allclose(unitary @ unitary.conj().T, np.eye(3), atol=1e-5)


def test_jit_and_vmap_match_eager():
    def sample(key):  # the three loops: gamma's, Poisson's, the binomial's
        return (jr.gamma(key, np.array([0.5, 2.0], f32)),
                jr.poisson(key, np.array([2.0, 30.0], f32)), jr.binomial(key, 40, 0.3, (2,)))

    keys = jr.split(jr.PRNGKey(11), 3)
    for eager, compiled in zip(sample(keys[0]), ember.jit(sample)(keys[0])):
        np.testing.assert_allclose(np.asarray(compiled), np.asarray(eager), rtol=1e-5)
    mapped = ember.vmap(sample)(keys)
    for i in range(3):
        for eager, batch in zip(sample(keys[i]), mapped):
            np.testing.assert_allclose(np.asarray(batch)[i], np.asarray(eager), rtol=1e-5)


def test_dtypes_as_jax():
    assert jr.gamma(jr.PRNGKey(0), 2.0, (3,), dtype=enp.float16).dtype == np.float16
    assert jr.beta(jr.PRNGKey(0), 2, 3).dtype == np.float32
    assert jr.poisson(jr.PRNGKey(0), 3.0, (2,)).dtype == np.int32
    assert jr.poisson(jr.PRNGKey(0), 3.0, (2,), dtype="int16").dtype == np.int16
    assert jr.binomial(jr.PRNGKey(0), 5, 0.5).dtype == np.float32
    assert jr.geometric(jr.PRNGKey(0), 0.5).dtype == np.int32
    assert jr.dirichlet(jr.PRNGKey(0), np.ones(4), (5, 2)).shape == (5, 2, 4)
    nan_inf = np.asarray(jr.binomial(jr.PRNGKey(0), np.array([-1.0, np.inf, 5.0]),
                                     np.array([0.5, 0.5, np.nan])))
    assert np.isnan(nan_inf[0]) and np.isinf(nan_inf[1]) and np.isnan(nan_inf[2])


def test_errors():
    with pytest.raises(EmberTypeError, match="gamma: dtype must be a floating dtype"):
        jr.gamma(jr.PRNGKey(0), 2.0, dtype="int32")
    with pytest.raises(EmberTypeError, match="poisson: dtype must be an integer dtype"):
        jr.poisson(jr.PRNGKey(0), 2.0, dtype="float32")
    with pytest.raises(EmberValueError, match="must broadcast to the shape argument"):
        jr.gamma(jr.PRNGKey(0), np.ones(3), (2,))
    with pytest.raises(EmberValueError, match="dirichlet requires alpha.ndim >= 1"):
        jr.dirichlet(jr.PRNGKey(0), 1.0)


@pytest.mark.parametrize("a", [0.3, 1.0, 2.5, 7.0])
def test_gamma_samples_are_reparameterized_implicitly(a):
    """dx/da keeps the sample's CDF value: -(dP/da) / p(x), against SciPy's P."""
    sps = pytest.importorskip("scipy.special")
    key = jr.PRNGKey(0)
    x, h = float(jr.gamma(key, a)), 1e-5
    expected = -(sps.gammainc(a + h, x) - sps.gammainc(a - h, x)) / (2 * h) / np.exp(
        (a - 1) * np.log(x) - x - sps.gammaln(a))
    np.testing.assert_allclose(ember.grad(lambda s: jr.gamma(key, s))(a), expected, rtol=1e-4)
    np.testing.assert_allclose(ember.grad(lambda s: jr.loggamma(key, s))(a), expected / x,
                               rtol=1e-4)


def test_derivatives_of_means_through_the_samples():
    """E[dx/da] = dE[x]/da on 10k samples: 1 for gamma(a), b / (a + b)^2 for beta(a, b),
    (s - a) / s^2 for a Dirichlet marginal (s: the sum of alpha)."""
    gamma_mean = ember.grad(lambda a: jr.gamma(jr.PRNGKey(1), a, (N,)).mean())(2.5)
    np.testing.assert_allclose(gamma_mean, 1.0, atol=0.03)
    beta_mean = ember.grad(lambda a: jr.beta(jr.PRNGKey(1), a, 3.0, (N,)).mean())(2.0)
    np.testing.assert_allclose(beta_mean, 3 / 25, atol=0.005)
    dirichlet_mean = ember.grad(lambda a: jr.dirichlet(
        jr.PRNGKey(2), enp.stack([a, 2.0, 3.0]), (N,))[:, 0].mean())(1.0)
    np.testing.assert_allclose(dirichlet_mean, 5 / 36, atol=0.005)


def test_gamma_derivatives_as_jax():
    jax = pytest.importorskip("jax")
    a = np.array([0.3, 1.0, 4.0], f32)
    for ours, theirs in ((jr.gamma, jax.random.gamma), (jr.loggamma, jax.random.loggamma)):
        got = ember.grad(lambda s: ours(jr.PRNGKey(0), s).sum())(a)
        want = jax.grad(lambda s: theirs(jax.random.PRNGKey(0), s).sum())(a)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4)
    got = ember.grad(lambda s: jr.beta(jr.PRNGKey(3), s, 2.0, (4,)).sum())(f32(1.5))
    want = jax.grad(lambda s: jax.random.beta(jax.random.PRNGKey(3), s, 2.0, (4,)).sum())(
        f32(1.5))
    np.testing.assert_allclose(got, want, rtol=1e-4)
