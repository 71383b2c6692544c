"""Student's t distribution (as ``jax.scipy.stats.t``)."""
from __future__ import annotations

import math
from typing import Any

from ember import numpy as jnp
from ember.numpy._promotion import promote_args_inexact
from ember.scipy.special import gammaln

__all__ = ["logpdf", "pdf"]


def logpdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    x, df, loc, scale = promote_args_inexact(x, df, loc, scale)
    z = (x - loc) / scale
    normalizer = (gammaln(0.5 * (df + 1)) - gammaln(0.5 * df)
                  - 0.5 * jnp.log(df * math.pi) - jnp.log(scale))
    return normalizer - 0.5 * (df + 1) * jnp.log1p(z * z / df)


def pdf(x: Any, df: Any, loc: Any = 0, scale: Any = 1) -> Any:
    return jnp.exp(logpdf(x, df, loc, scale))
