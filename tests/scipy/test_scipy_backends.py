"""ember.scipy compiled on every backend present, against the reference backend: the
special functions' kernels, expm's scan over a cond, signal's convolution, the
incomplete gamma function's fixed-length loop, and minimize's nested while_loops."""
from __future__ import annotations

import numpy as np

import ember
import ember.numpy as jnp
from ember.scipy import linalg, optimize, signal, special, stats

RNG = np.random.default_rng(0)
X = np.linspace(-3, 3, 13, dtype=np.float32)
A = RNG.normal(size=(4, 4)).astype(np.float32)


def _program(x, a):
    return {
        "special": special.log_ndtr(x) + special.ndtri(special.expit(x))
        + special.xlogy(x * x, special.ndtr(x)) + special.gammaln(x * x + 0.5),
        "stats": stats.t.logpdf(x, 3.0) + stats.cauchy.ppf(special.expit(x)),
        "gammainc": special.gammainc(2.5, x * x),
        "expm": linalg.expm(a),
        "cho_solve": linalg.cho_solve(linalg.cho_factor(a @ a.T + 4 * jnp.eye(4)), a),
        "convolve": signal.convolve(x, x[:4], mode="same"),
        "minimize": optimize.minimize(lambda v: jnp.sum((v - a[0]) ** 2 * (1 + v**2)),
                                      jnp.zeros(4), method="BFGS").x,
    }


def _run(backend):
    with ember.config.override(backend=backend):
        return ember.jit(_program)(X, A)


def test_every_backend_matches_the_reference(backend):
    expected, got = _run("reference"), _run(backend)
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], rtol=2e-5, atol=2e-5,
                                   err_msg=name)
