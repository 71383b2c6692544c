"""Every public function of ember.scipy has the signature of its jax.scipy namesake:
the same parameter names, kinds and defaults (JAX 0.10, where installed)."""
from __future__ import annotations

import importlib
import inspect

import pytest

from ember.scipy import linalg, optimize, signal, special, stats

MODULES = [special, linalg, signal, optimize] + [
    getattr(stats, name) for name in ("norm", "multivariate_normal", "bernoulli", "beta",
                                      "gamma", "t", "poisson", "uniform", "laplace",
                                      "logistic", "cauchy", "dirichlet")]


def _parameters(fn):
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_signatures_match_jax(module):
    pytest.importorskip("jax")
    theirs = importlib.import_module(module.__name__.replace("ember.scipy", "jax.scipy"))
    for name in module.__all__:
        ours = getattr(module, name)
        if not callable(ours) or isinstance(ours, type):
            continue
        assert hasattr(theirs, name), f"{module.__name__}.{name} is not in JAX"
        assert _parameters(ours) == _parameters(getattr(theirs, name)), name
