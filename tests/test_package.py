"""The package's shape: the public namespace imports whole."""
from __future__ import annotations

def test_star_import_gives_every_public_name():
    import ember

    namespace: dict = {}
    exec("from ember import *", namespace)
    assert set(ember.__all__) <= set(namespace)
    assert namespace["jit"] is ember.jit and namespace["numpy"] is ember.numpy
