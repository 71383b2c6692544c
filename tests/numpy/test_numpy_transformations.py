"""ember.numpy functions under grad (against finite differences, float64) and vmap
(against a Python loop): they are compositions of primitives with rules, so both work."""
import numpy as np
import pytest

import ember.nn as nn
import ember.numpy as enp
from ember.test_util import check_grads, check_vmap

DIFFERENTIABLE = [
    ("indexing", lambda x: x[np.array([0, 0, 2]), 1:] * x[-1, :0:-1]),
    ("at_updates", lambda x: enp.asarray(x).at[0].mul(x[1]).at[1, 1:].add(x[2, :2] ** 2)),
    ("where_clip", lambda x: enp.where(x > 0, enp.clip(x, 0.1, 0.9), enp.exp(x))),
    ("statistics", lambda x: enp.stack([enp.var(x, 0), enp.std(x, 1), enp.mean(x, 1)])),
    ("linalg", lambda x: enp.linalg.solve(x + 4 * enp.eye(3), x[0]) * enp.linalg.det(
        x + 4 * enp.eye(3))),
    ("norms", lambda x: enp.stack([enp.linalg.norm(x), enp.linalg.norm(x, 1),
                                   enp.linalg.norm(x[0])])),
    ("sort_cumsum", lambda x: enp.cumsum(enp.sort(x, axis=1), axis=0)),
    ("einsum", lambda x: enp.einsum("ij,jk,ki->i", x, x, x)),
    ("softmax_family", lambda x: nn.log_softmax(x) + nn.softmax(x, 0) + nn.logsumexp(x, 1)),
    ("activations", lambda x: nn.gelu(x) + nn.elu(x) + nn.softplus(x) + nn.silu(x)),
    ("manipulation", lambda x: enp.roll(enp.pad(x, 1, mode="reflect"), 2, 0)[:3] @ enp.tile(
        x[:, :1], (1, 5)).T[:, :3]),
    ("fft", lambda x: enp.abs(enp.fft.rfft(x)) ** 2),
    ("hypot_logaddexp", lambda x: enp.hypot(x, 1.0) + enp.logaddexp(x, x.T)),
    ("convolution", lambda x: enp.convolve(x[0], x[1], "same") + enp.correlate(
        x[:, 0], x[:, 2], "full")[1:4]),
    ("covariance", lambda x: enp.cov(x, aweights=x[0] ** 2) + enp.corrcoef(x + 2 * enp.eye(3))),
    ("nan_quantiles", lambda x: enp.stack([enp.nanquantile(x, 0.3, axis=0),
                                           enp.nanmedian(x, axis=1)])),
    ("polynomials", lambda x: enp.polyval(x[0], x[1]) + enp.polyder(enp.polymul(x[0], x[1]))[:3]
     + enp.polyfit(x[0], x[2], 1)[0]),
    ("calculus", lambda x: enp.gradient(x, axis=1, edge_order=2) + enp.trapezoid(x, axis=0)
     + enp.unwrap(4 * x, axis=0)),
    ("float_parts", lambda x: enp.ldexp(x, 3) + enp.frexp(x)[0] + enp.modf(3 * x)[0]),
    ("i0_kaiser", lambda x: enp.i0(4 * x) * enp.kaiser(3, 2.0)),
    ("vectorize_piecewise", lambda x: enp.vectorize(lambda r: r @ r, signature="(n)->()")(x)
     + enp.piecewise(x, [x < 0, x > 0.5], [lambda v: v ** 2, lambda v: 3 * v, lambda v: v])),
    ("ufunc_methods", lambda x: enp.add.accumulate(x, 1) + enp.logaddexp.reduce(x, axis=0)
     + enp.maximum.accumulate(x, 0)),
    ("histogram_weights", lambda x: enp.histogram(x[0], bins=[-2, 0, 2], weights=x[1])[0]),
    ("lstsq_svd", lambda x: enp.linalg.lstsq(x + 3 * enp.eye(3), x[0])[0]
     + enp.linalg.svd(x + 3 * enp.eye(3), compute_uv=False)),
]


@pytest.mark.parametrize("name,f", DIFFERENTIABLE, ids=[d[0] for d in DIFFERENTIABLE])
def test_gradients_match_finite_differences(x64, name, f):
    x = np.random.default_rng(0).uniform(-1, 1, (3, 3)) + np.array([0.05, 0.1, 0.15])
    check_grads(f, (x,), order=1, atol=1e-5, rtol=1e-5)


BATCHABLE = [
    ("indexing", lambda x, i: (x[i], enp.asarray(x).at[i].add(1.0), x[::-1][i % 2])),
    ("searching", lambda x, i: (enp.argmax(x), enp.searchsorted(enp.sort(x), x[i]),
                                enp.nonzero(x > 0, size=2))),
    ("reductions", lambda x, i: (enp.sum(x), enp.cumsum(x), enp.max(x), enp.var(x))),
    ("products", lambda x, i: (enp.outer(x, x), enp.dot(x, x), enp.einsum("i,i->", x, x))),
    ("sets", lambda x, i: (enp.unique(enp.round(x), size=5, return_counts=True),
                           enp.setdiff1d(enp.round(x), enp.round(x[:2]), size=3))),
    ("histograms", lambda x, i: (enp.histogram(x, bins=3)[0], enp.digitize(x, [-1.0, 0.0, 1.0]),
                                 enp.bincount((x > 0).astype(enp.int32), length=2))),
    ("new_math", lambda x, i: (enp.convolve(x, x[:3]), enp.nanmedian(x), enp.polyval(x[:3], x),
                               enp.gcd(i, 6), enp.ldexp(x, i), enp.frexp(x))),
    ("editing", lambda x, i: (enp.delete(x, 1), enp.insert(x, 2, x[0]),
                              enp.put(x, i % 5, 0.0, inplace=False),
                              enp.compress(x > 0, x, size=3))),
    ("ufuncs", lambda x, i: (enp.add.accumulate(x), enp.maximum.reduce(x),
                             enp.frompyfunc(lambda a, b: a * b + 1, 2, 1).reduce(x))),
]


@pytest.mark.parametrize("name,f", BATCHABLE, ids=[b[0] for b in BATCHABLE])
def test_vmap_matches_a_loop(name, f):
    x = np.random.default_rng(1).normal(size=(4, 5)).astype(np.float32)
    i = np.array([0, 3, -1, 2], np.int32)
    check_vmap(f, (x, i), in_axes=(0, 0), rtol=1e-6)
