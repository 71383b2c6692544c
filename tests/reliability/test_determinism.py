"""Random numbers are a pure function of the key: bit-identical on every backend,
eagerly and under jit, call after call (the guarantee the README states)."""
from __future__ import annotations

import numpy as np
import pytest

import ember

DRAWS = {
    "bits": lambda key: ember.random.bits(key, (257,)),
    "uniform": lambda key: ember.random.uniform(key, (3, 85)),
    "normal": lambda key: ember.random.normal(key, (256,)),
    "randint": lambda key: ember.random.randint(key, (100,), -7, 1000),
    "split-then-normal": lambda key: ember.random.normal(ember.random.split(key)[1], (17,)),
}


@pytest.mark.parametrize("draw", DRAWS)
def test_same_key_same_bits_everywhere(backend, draw):
    with ember.config.override(backend="reference"):
        expected = np.asarray(DRAWS[draw](ember.random.key(1234)))
    key = ember.random.key(1234)  # on the backend under test
    for result in (DRAWS[draw](key), ember.jit(DRAWS[draw])(key), ember.jit(DRAWS[draw])(key)):
        got = np.asarray(result)
        assert got.dtype == expected.dtype and got.tobytes() == expected.tobytes()


def test_different_keys_differ():
    first = np.asarray(ember.random.normal(ember.random.key(0), (64,)))
    second = np.asarray(ember.random.normal(ember.random.key(1), (64,)))
    assert not np.array_equal(first, second)
