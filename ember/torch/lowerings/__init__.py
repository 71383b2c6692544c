"""The ATen -> Ember table (``LOWERINGS``): one entry per core ATen overload (the opset
left after PyTorch's core decompositions), each written with ``ember.numpy`` and
``ember.lax`` and following ATen's dtype promotion and broadcasting. The table is
``table.py``'s; each module of this package fills in one family of ops.

An op missing here is not an error: the partitioner leaves it to PyTorch.
"""
# (each module registers its lowerings when imported)
from ember.torch.lowerings import (  # noqa: F401
    core, data_dependent, fft, linalg, pooling, selection, special)
from ember.torch.lowerings.table import EFFECTS, LOWERINGS

__all__ = ["EFFECTS", "LOWERINGS"]
