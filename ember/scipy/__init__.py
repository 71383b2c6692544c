"""``ember.scipy``: SciPy's API on Ember arrays (as ``jax.scipy``): special functions,
probability distributions, dense linear algebra, minimization and signal filtering, all
traceable, differentiable and jit-compatible."""
from ember.scipy import linalg, optimize, signal, special, stats  # noqa: F401
