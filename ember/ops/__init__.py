"""Primitive definitions. Importing this package registers every primitive."""
from ember.ops import (  # noqa: F401
    bitcast,
    collectives,
    control_flow,
    callbacks,
    cumulative,
    decompositions,
    elementwise,
    fft,
    indexing,
    linalg,
    random_bits,
    reductions,
    sharding_constraint,
    sorting,
    structural,
)
