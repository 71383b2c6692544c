"""The cyclic collector is paused while a program is traced and compiled, and on again
after, as it was before."""
from __future__ import annotations

import gc

import numpy as np
import pytest

import ember
from ember.runtime.collection_pause import collection_paused


@pytest.fixture(autouse=True)
def _collector_restored():
    was_enabled = gc.isenabled()
    yield
    (gc.enable if was_enabled else gc.disable)()


def test_a_pause_restores_the_collector_as_it_was():
    gc.enable()
    with collection_paused():
        assert not gc.isenabled()
        with collection_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # (the outer pause goes on)
    assert gc.isenabled()
    gc.disable()
    with collection_paused():
        pass
    assert not gc.isenabled()


def test_an_error_inside_restores_the_collector():
    gc.enable()
    with pytest.raises(ValueError), collection_paused():
        raise ValueError("failed compile")
    assert gc.isenabled()


def test_jit_traces_and_compiles_with_the_collector_paused(monkeypatch):
    from ember.backends.cpu import backend

    gc.enable()
    seen = []

    def f(x):
        seen.append(("trace", gc.isenabled()))
        return x * 2

    compile_program = backend.compile_program

    def compiling(*args, **kwargs):
        seen.append(("compile", gc.isenabled()))
        return compile_program(*args, **kwargs)

    monkeypatch.setattr(backend, "compile_program", compiling)
    np.testing.assert_array_equal(ember.jit(f, backend="cpu")(np.arange(3.0)),
                                  np.arange(3.0) * 2)
    assert seen == [("trace", False), ("compile", False)]
    assert gc.isenabled()
