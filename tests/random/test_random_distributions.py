"""Samplers: values recorded from JAX 0.10 for the same keys, distribution sanity on 10k
samples (deterministic seeds, loose bounds), ranges, jit / vmap consistency, errors."""
import math

import numpy as np
import pytest

import ember
import ember.numpy as enp
import ember.random as jr
from ember.errors import EmberTypeError, EmberValueError

KEY = jr.PRNGKey(0)
N = 10_000


def _close(actual, expected, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(actual), expected, rtol=rtol, atol=atol)


def test_samples_match_jax():
    _close(jr.uniform(KEY, (3,)), [0.947667, 0.9785799, 0.33229148])
    _close(jr.normal(KEY, (3,)), [1.6226422, 2.0252647, -0.43359444])
    _close(jr.uniform(KEY, (2,), minval=np.array([1.0, 2.0]), maxval=3.0), [2.895334, 2.97858])
    _close(jr.truncated_normal(KEY, -1.0, 1.0, (3,)), [0.8618594, 0.9412883, -0.2910484])
    _close(jr.gumbel(KEY, (3,)), [2.9233725, 3.8326178, -0.09689324])
    _close(jr.exponential(KEY, (3,)), [2.950128, 3.8434246, 0.40390354])
    _close(jr.laplace(KEY, (3,)), [-2.2569816, -3.1502788, 0.40859544])
    _close(jr.logistic(KEY, (3,)), [2.896376, 3.8217716, -0.6978392])
    half = jr.uniform(jr.PRNGKey(1), (2,), dtype=enp.float16)
    assert half.dtype == np.float16 and half.tolist() == [0.220703125, 0.03125]
    brain = jr.uniform(jr.PRNGKey(1), (2,), dtype=enp.bfloat16)
    _close(np.asarray(brain).astype(np.float32), [0.710938, 0.242188])


def test_discrete_samples_match_jax():
    assert jr.randint(KEY, (5,), 0, 10).tolist() == [9, 0, 2, 3, 1]
    assert jr.randint(KEY, (4,), -5, 5).tolist() == [4, -5, -3, -2]
    assert jr.randint(KEY, (4,), 0, 2**31 - 1).tolist() == [31327077, 89727312, 349724617,
                                                            1554082365]
    assert jr.bernoulli(KEY, 0.5, (5,)).tolist() == [False, False, True, True, False]
    assert jr.permutation(KEY, 6).tolist() == [0, 1, 5, 4, 3, 2]
    grid = enp.arange(12).reshape(3, 4)
    assert jr.permutation(KEY, grid, axis=1).tolist() == [[0, 1, 3, 2], [4, 5, 7, 6],
                                                          [8, 9, 11, 10]]
    assert jr.permutation(KEY, grid, axis=1, independent=True).tolist() == [
        [0, 1, 3, 2], [5, 6, 4, 7], [8, 10, 11, 9]]
    assert jr.categorical(KEY, enp.zeros(4), shape=(5,)).tolist() == [1, 3, 2, 3, 0]
    logits = enp.log(enp.asarray([[0.1, 0.9], [0.8, 0.2]]))
    assert jr.categorical(KEY, logits).tolist() == [1, 0]
    assert jr.choice(KEY, 10, (3,), replace=False).tolist() == [0, 1, 8]
    assert jr.choice(KEY, 10, (3,)).tolist() == [9, 0, 2]
    p = np.array([0.1, 0.2, 0.3, 0.2, 0.2])
    assert jr.choice(KEY, 5, (4,), p=p).tolist() == [0, 0, 3, 2]
    assert jr.choice(KEY, 5, (3,), replace=False, p=p).tolist() == [1, 0, 4]


@pytest.mark.parametrize("sampler,mean,var", [
    (lambda k: jr.uniform(k, (N,)), 0.5, 1 / 12),
    (lambda k: jr.uniform(k, (N,), minval=-2.0, maxval=4.0), 1.0, 3.0),
    (lambda k: jr.normal(k, (N,)), 0.0, 1.0),
    (lambda k: jr.exponential(k, (N,)), 1.0, 1.0),
    (lambda k: jr.gumbel(k, (N,)), 0.5772156649, math.pi ** 2 / 6),
    (lambda k: jr.laplace(k, (N,)), 0.0, 2.0),
    (lambda k: jr.logistic(k, (N,)), 0.0, math.pi ** 2 / 3),
    (lambda k: jr.bernoulli(k, 0.3, (N,)), 0.3, 0.21),
    (lambda k: jr.randint(k, (N,), 0, 10), 4.5, 8.25),
    (lambda k: jr.truncated_normal(k, -1.0, 2.0, (N,)), 0.229637, 0.519763),
    (lambda k: jr.rademacher(k, (N,)), 0.0, 1.0),
])
def test_moments_on_10k_samples(sampler, mean, var):
    x = np.asarray(sampler(jr.PRNGKey(7))).astype(np.float64)
    assert abs(x.mean() - mean) < 4 * math.sqrt(var / N) + 1e-3
    assert abs(x.var() / var - 1) < 0.08


def test_complex_normal_and_multivariate_normal():
    z = np.asarray(jr.normal(jr.PRNGKey(2), (N,), enp.complex64))
    assert z.dtype == np.complex64
    assert abs(np.mean(np.abs(z) ** 2) - 1) < 0.05 and abs(z.real.var() - 0.5) < 0.03
    cov = np.array([[2.0, 0.6], [0.6, 1.0]], np.float32)
    for method in ("cholesky", "eigh"):
        samples = np.asarray(jr.multivariate_normal(jr.PRNGKey(0), np.array([1.0, -1.0]), cov,
                                                    (N,), method=method))
        assert np.allclose(samples.mean(0), [1, -1], atol=0.05)
        assert np.allclose(np.cov(samples.T), cov, atol=0.1)


def test_ranges_and_supports():
    u = np.asarray(jr.uniform(jr.PRNGKey(1), (N,), minval=2.0, maxval=2.5))
    assert u.min() >= 2.0 and u.max() < 2.5
    ints = np.asarray(jr.randint(jr.PRNGKey(1), (N,), -3, 4, dtype="int8"))
    assert ints.dtype == np.int8 and set(ints.tolist()) == set(range(-3, 4))
    full_range = np.asarray(jr.randint(jr.PRNGKey(1), (N,), 0, 256, dtype="uint8"))
    assert full_range.max() > 250
    assert jr.randint(jr.PRNGKey(1), (3,), 5, 5).tolist() == [5, 5, 5]
    t = np.asarray(jr.truncated_normal(jr.PRNGKey(1), 0.5, 0.6, (N,)))
    assert t.min() > 0.5 and t.max() < 0.6
    counts = np.bincount(np.asarray(jr.categorical(jr.PRNGKey(4), np.log([0.2, 0.3, 0.5]),
                                                   shape=(N,))), minlength=3) / N
    assert np.allclose(counts, [0.2, 0.3, 0.5], atol=0.02)
    picks = np.asarray(jr.choice(jr.PRNGKey(5), 100, (N,), p=np.arange(100.0) / 4950))
    assert picks.min() >= 1 and abs(picks.mean() - 66.33) < 1.0


def test_permutations_and_choices_without_replacement():
    for seed in range(5):
        perm = np.asarray(jr.permutation(jr.PRNGKey(seed), 50))
        assert sorted(perm.tolist()) == list(range(50))
        picked = np.asarray(jr.choice(jr.PRNGKey(seed), np.arange(10.0) * 2, (2, 3),
                                      replace=False))
        assert picked.shape == (2, 3) and len(set(picked.ravel().tolist())) == 6
    rows = np.asarray(jr.shuffle(jr.PRNGKey(0), np.arange(20).reshape(10, 2)))
    assert sorted(rows[:, 0].tolist()) == list(range(0, 20, 2))


def test_same_key_same_values_different_keys_differ():
    a, b = jr.split(KEY)
    assert jr.normal(a, (4,)).tolist() == jr.normal(a, (4,)).tolist()
    assert jr.normal(a, (4,)).tolist() != jr.normal(b, (4,)).tolist()
    assert jr.uniform(jr.fold_in(KEY, 1)).tolist() != jr.uniform(jr.fold_in(KEY, 2)).tolist()


def test_jit_and_vmap_match_eager():
    def sample(key):
        return (jr.normal(key, (3,)), jr.randint(key, (2,), 0, 9), jr.permutation(key, 5),
                jr.categorical(key, enp.zeros((2, 3))), jr.bernoulli(key, 0.5, (4,)))

    with ember.config.override(backend="reference"):
        keys = jr.split(jr.PRNGKey(11), 3)
        jitted = ember.jit(sample)(keys[0])
        mapped = ember.vmap(sample)(keys)
        for eager, compiled in zip(sample(keys[0]), jitted):
            assert np.asarray(eager).tolist() == np.asarray(compiled).tolist()
        for i in range(3):
            for eager, batch in zip(sample(keys[i]), mapped):
                assert np.asarray(eager).tolist() == np.asarray(batch)[i].tolist()


def test_sampler_errors():
    with pytest.raises(EmberTypeError, match="uniform: dtype must be a floating dtype, got int32"):
        jr.uniform(KEY, (2,), dtype="int32")
    with pytest.raises(EmberTypeError, match="randint: dtype must be an integer dtype"):
        jr.randint(KEY, (2,), 0, 3, dtype="float32")
    with pytest.raises(EmberValueError, match=r"minval of shape \(3,\) does not broadcast to the "
                                              r"sample shape \(2,\)"):
        jr.uniform(KEY, (2,), minval=np.zeros(3))
    with pytest.raises(EmberValueError, match="cannot take a larger sample .size 5. than the "
                                              "population .size 3."):
        jr.choice(KEY, 3, (5,), replace=False)
    with pytest.raises(EmberValueError, match=r"p of shape \(2,\) must have shape \(3,\)"):
        jr.choice(KEY, 3, (2,), p=np.array([0.5, 0.5]))
    with pytest.raises(EmberValueError, match="shape .* must end with the batch shape"):
        jr.categorical(KEY, np.zeros((2, 3)), shape=(4,))
    with pytest.raises(EmberTypeError, match="shape must be a tuple of integers"):
        jr.normal(KEY, "big")
