"""Runtime: arrays, devices, eager dispatch, jit and the compile cache."""
from ember.runtime import dispatch  # noqa: F401  (gives the eager trace its apply function)
