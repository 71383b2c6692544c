"""The reference backend: interprets the Graph with NumPy. The oracle for all others."""
from ember.backends.reference.backend import ReferenceBackend

__all__ = ["ReferenceBackend"]
