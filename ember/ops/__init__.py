"""Primitive definitions. Importing this package registers every primitive."""
from ember.ops import elementwise, structural  # noqa: F401
