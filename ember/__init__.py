"""Ember: NumPy-style array programs, captured as graphs, optimized whole and compiled
to native kernels for the hardware at hand."""
from ember import ops as _ops  # registers every primitive  # noqa: F401
from ember.config import config
from ember.core.pytree import register_pytree_node  # noqa: F401
from ember.runtime.array import Array
from ember.runtime.devices import default_backend, devices
from ember.runtime.dispatch import device_put
from ember.runtime.jit import jit
from ember import lax, numpy  # noqa: F401

__version__ = "0.1.0"

__all__ = ["Array", "config", "default_backend", "device_put", "devices", "jit", "lax", "numpy"]
