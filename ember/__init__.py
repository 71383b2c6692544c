"""Ember: NumPy-style array programs, captured as graphs, optimized whole and compiled
to native kernels for the hardware at hand.

The public names below are resolved lazily from the module that defines each, so that
``import ember`` stays fast and each subsystem loads when first used.
"""
from __future__ import annotations

import importlib
from typing import Any

from ember import ops as _ops  # registers every primitive  # noqa: F401
from ember import transforms as _transforms  # gives the ops their transformations  # noqa: F401
from ember.config import config
from ember.runtime.array import Array
from ember.runtime.jit import jit

__version__ = "0.1.0"

# public name -> module that defines it
_LAZY = {
    # placement and devices
    "devices": "ember.runtime.devices",
    "device_count": "ember.runtime.devices",
    "local_device_count": "ember.runtime.devices",
    "local_devices": "ember.runtime.devices",
    # several processes (ember.distributed)
    "process_index": "ember.distributed.state",
    "process_count": "ember.distributed.state",
    "make_array_from_process_local_data": "ember.distributed.global_array",
    "make_array_from_callback": "ember.distributed.global_array",
    "device_put": "ember.runtime.dispatch",
    "device_get": "ember.runtime.dispatch",
    "block_until_ready": "ember.runtime.sync",
    "effects_barrier": "ember.runtime.sync",
    "make_graph": "ember.runtime.inspect",
    "make_jaxpr": "ember.runtime.inspect",
    "eval_shape": "ember.runtime.inspect",
    "ShapeDtypeStruct": "ember.runtime.shape_dtype",
    "named_scope": "ember.core.source_info",
    "named_call": "ember.transforms.naming",
    "ensure_compile_time_eval": "ember.core.trace",
    "pure_callback": "ember.ops.callbacks",
    "clear_caches": "ember.runtime.caches",
    "live_arrays": "ember.runtime.caches",
    "print_environment_info": "ember.runtime.environment",
    "disable_jit": "ember.config",
    "enable_x64": "ember.config",
    "debug_nans": "ember.config",
    "log_compiles": "ember.config",
    "Device": "ember.backends.base",
    "float0": "ember.dtypes",
    "checkpoint_policies": "ember.ad_checkpoint",
    # distribution on one host (ember.sharding)
    "make_mesh": "ember.sharding.mesh",
    "set_mesh": "ember.sharding.mesh",
    "P": "ember.sharding.partition_spec",
    "NamedSharding": "ember.sharding.shardings",
    "reshard": "ember.sharding.placement",
    "typeof": "ember.sharding.typeof",
    "shard_map": "ember.sharding.shard_map",
    "pmap": "ember.sharding.pmap",
    # transformations
    "grad": "ember.transforms.api",
    "value_and_grad": "ember.transforms.api",
    "vjp": "ember.transforms.api",
    "jvp": "ember.transforms.api",
    "linearize": "ember.transforms.api",
    "jacfwd": "ember.transforms.api",
    "jacrev": "ember.transforms.api",
    "jacobian": "ember.transforms.api",
    "hessian": "ember.transforms.api",
    "linear_transpose": "ember.transforms.linear_transpose",
    "vmap": "ember.transforms.api",
    "stop_gradient": "ember.transforms.api",
    "custom_jvp": "ember.transforms.custom",
    "custom_vjp": "ember.transforms.custom",
    "closure_convert": "ember.transforms.closure_convert",
    "checkpoint": "ember.transforms.remat",
    "remat": "ember.transforms.remat",
}
_SUBMODULES = {"lax", "numpy", "random", "nn", "optim", "tree", "tree_util", "flatten_util",
               "ad_checkpoint", "custom_batching", "debug", "dtypes", "experimental", "errors",
               "sharding", "test_util", "bench", "scipy", "distributed", "image", "typing",
               "dlpack"}

__all__ = ["Array", "config", "default_backend", "jit", *_LAZY, *sorted(_SUBMODULES)]


def default_backend() -> str:
    """The name of the backend arrays go to by default ('cpu', 'opencl', 'reference'), as
    ``jax.default_backend()``; ``ember.runtime.devices.default_backend`` gives the object."""
    from ember.runtime.devices import default_backend as backend

    return backend().name


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        module = importlib.import_module(f"ember.{name}")
        globals()[name] = module
        return module
    raise AttributeError(f"module 'ember' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
