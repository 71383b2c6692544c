"""``ember.scipy.stats``: probability distributions as modules of functions (as
``jax.scipy.stats``): ``norm.logpdf(x, loc, scale)``, ``poisson.logpmf(k, mu)``, ..."""
from ember.scipy.stats import (  # noqa: F401
    bernoulli,
    beta,
    cauchy,
    dirichlet,
    gamma,
    laplace,
    logistic,
    multivariate_normal,
    norm,
    poisson,
    t,
    uniform,
)
