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
]


@pytest.mark.parametrize("name,f", BATCHABLE, ids=[b[0] for b in BATCHABLE])
def test_vmap_matches_a_loop(name, f):
    x = np.random.default_rng(1).normal(size=(4, 5)).astype(np.float32)
    i = np.array([0, 3, -1, 2], np.int32)
    check_vmap(f, (x, i), in_axes=(0, 0), rtol=1e-6)
