"""DP-SGD (``dp_sgd.py``): a JAX program run on Ember with only its imports changed."""
from __future__ import annotations

import pathlib
import types

import numpy as np
import pytest

SOURCE = pathlib.Path(__file__).with_name("dp_sgd.py").read_text()
EMBER_IMPORTS = "import ember as jax\nimport ember.numpy as jnp\n"


def load(imports: str) -> types.ModuleType:
    """The program, with its two import lines replaced by ``imports``."""
    assert EMBER_IMPORTS in SOURCE
    module = types.ModuleType("dp_sgd")
    exec(compile(SOURCE.replace(EMBER_IMPORTS, imports), "dp_sgd.py", "exec"), module.__dict__)
    return module


@pytest.fixture(scope="module")
def program():
    return load(EMBER_IMPORTS)


def test_per_example_gradients_match_one_at_a_time(program):
    x, y = program.make_data(program.jax.random.PRNGKey(1), n=8)
    params = program.init_params(program.jax.random.PRNGKey(2), x.shape[1])
    batched = program.per_example_grads(params, x, y)
    for i in (0, 5):
        single = program.jax.grad(program.loss)(params, x[i], y[i])
        for ours, one in zip(program.jax.tree.leaves(batched), program.jax.tree.leaves(single)):
            np.testing.assert_allclose(np.asarray(ours)[i], np.asarray(one), rtol=1e-5,
                                       atol=1e-6)


def test_clipping_bounds_every_example(program):
    jax, jnp = program.jax, program.jnp
    x, y = program.make_data(jax.random.PRNGKey(1), n=64)
    params = program.init_params(jax.random.PRNGKey(2), x.shape[1])
    params = jax.tree.map(lambda p: p * 4.0, params)  # large gradients: clipping bites
    raw = jax.vmap(program.global_norm)(program.per_example_grads(params, x, y))
    clipped = jax.vmap(program.global_norm)(program.clipped_grads(params, x, y))
    raw, clipped = np.asarray(raw), np.asarray(clipped)
    assert (raw > program.L2_CLIP).sum() > 5  # some examples were clipped ...
    assert np.all(clipped <= program.L2_CLIP + 1e-5)  # ... to the bound
    small = raw < program.L2_CLIP  # and the others kept their gradient
    np.testing.assert_allclose(clipped[small], raw[small], rtol=1e-4)
    assert float(jnp.max(clipped)) == pytest.approx(program.L2_CLIP, rel=1e-4)


def test_private_training_learns(program):
    params, x, y = program.train()
    assert float(program.accuracy(params, x, y)) > 0.9


def test_same_program_on_jax():
    pytest.importorskip("jax")
    on_jax = load("import jax\nimport jax.numpy as jnp\n")
    on_ember = load(EMBER_IMPORTS)
    ours, x, y = on_ember.train()
    theirs, x_jax, y_jax = on_jax.train()
    np.testing.assert_allclose(np.asarray(x), np.asarray(x_jax), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(y), np.asarray(y_jax))
    for a, b in zip(on_ember.jax.tree.leaves(ours), on_jax.jax.tree.leaves(theirs)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)
    assert float(on_ember.accuracy(ours, x, y)) == pytest.approx(
        float(on_jax.accuracy(theirs, x_jax, y_jax)), abs=1 / 256 + 1e-6)
