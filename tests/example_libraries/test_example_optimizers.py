"""example_libraries.optimizers: update rules against a NumPy transcription, against
JAX's own module where installed, schedules, pytrees, jit and state packing."""
import pickle

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.errors import EmberTypeError, EmberValueError
from ember.example_libraries import optimizers

RNG = np.random.default_rng(0)
PARAMS = {"w": RNG.standard_normal((3, 2)).astype(np.float32),
          "b": RNG.standard_normal(2).astype(np.float32),
          "s": np.float32(0.5)}
GRADS = [{k: RNG.standard_normal(np.shape(v)).astype(np.float32) for k, v in PARAMS.items()}
         for _ in range(4)]

MAKERS = {
    "sgd": lambda o: o.sgd(0.1),
    "momentum": lambda o: o.momentum(0.1, 0.9),
    "nesterov": lambda o: o.nesterov(0.1, 0.9),
    "adagrad": lambda o: o.adagrad(0.1),
    "rmsprop": lambda o: o.rmsprop(0.1),
    "rmsprop_momentum": lambda o: o.rmsprop_momentum(0.1),
    "adam": lambda o: o.adam(0.1),
    "adamax": lambda o: o.adamax(0.1),
    "sm3": lambda o: o.sm3(0.1),
    "adam_scheduled": lambda o: o.adam(o.exponential_decay(0.1, 2, 0.5)),
}


def run(module, name, grads=GRADS, jit=lambda f: f):
    opt_init, opt_update, get_params = MAKERS[name](module)
    update = jit(opt_update)
    state = opt_init(PARAMS)
    for i, g in enumerate(grads):
        state = update(i, g, state)
    return {k: np.asarray(v) for k, v in get_params(state).items()}


def numpy_adam(x, grads, lr=0.1, b1=0.9, b2=0.999, eps=1e-8):
    m = v = np.zeros_like(x, np.float64)
    for i, g in enumerate(grads):
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * g ** 2 + b2 * v
        x = x - lr * (m / (1 - b1 ** (i + 1))) / (np.sqrt(v / (1 - b2 ** (i + 1))) + eps)
    return x


def numpy_sm3(x, grads, lr=0.1, momentum=0.9):
    """SM3 for a matrix: one accumulator per row and per column."""
    rows, cols, m = np.zeros(x.shape[0]), np.zeros(x.shape[1]), np.zeros_like(x)
    for g in grads:
        acc = np.minimum(rows[:, None], cols[None, :]) + g ** 2
        m = (1 - momentum) * g / np.sqrt(acc) + momentum * m
        x = x - lr * m
        rows, cols = acc.max(1), acc.max(0)
    return x


def test_adam_and_sm3_match_their_definitions():
    # float32 bias corrections (1 - 0.999 ** k) carry ~1e-4 relative rounding: atol 1e-5
    np.testing.assert_allclose(run(optimizers, "adam")["w"],
                               numpy_adam(PARAMS["w"], [g["w"] for g in GRADS]), atol=1e-5)
    np.testing.assert_allclose(run(optimizers, "sm3")["w"],
                               numpy_sm3(PARAMS["w"], [g["w"] for g in GRADS]), rtol=1e-5)


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_matches_jax_example_libraries(name):
    pytest.importorskip("jax")
    from jax.example_libraries import optimizers as jax_optimizers

    ours, theirs = run(optimizers, name, jit=ember.jit), run(jax_optimizers, name)
    for key in PARAMS:
        assert ours[key].shape == theirs[key].shape
        np.testing.assert_allclose(ours[key], theirs[key], rtol=2e-5, atol=1e-6)


SCHEDULES = {
    "constant": lambda o: o.constant(0.3),
    "exponential_decay": lambda o: o.exponential_decay(0.3, 4, 0.5),
    "inverse_time_decay": lambda o: o.inverse_time_decay(0.3, 4, 0.5),
    "inverse_time_decay_staircase": lambda o: o.inverse_time_decay(0.3, 4, 0.5, True),
    "polynomial_decay": lambda o: o.polynomial_decay(0.3, 6, 0.01, power=2.0),
    "piecewise_constant": lambda o: o.piecewise_constant([2, 5], [0.3, 0.1, 0.01]),
}


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_schedules(name):
    expected = {
        "constant": lambda i: 0.3,
        "exponential_decay": lambda i: 0.3 * 0.5 ** (i / 4),
        "inverse_time_decay": lambda i: 0.3 / (1 + 0.5 * i / 4),
        "inverse_time_decay_staircase": lambda i: 0.3 / (1 + 0.5 * (i // 4)),
        "polynomial_decay": lambda i: (1 - min(i, 6) / 6) ** 2 * 0.29 + 0.01,
        "piecewise_constant": lambda i: 0.3 if i <= 2 else 0.1 if i <= 5 else 0.01,
    }[name]
    schedule = SCHEDULES[name](optimizers)
    steps = np.arange(9)
    np.testing.assert_allclose([float(schedule(jnp.asarray(i))) for i in steps],
                               [expected(i) for i in steps], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ember.jit(ember.vmap(schedule))(steps)),
                               [expected(i) for i in steps], rtol=1e-6)


def test_clip_grads_and_l2_norm():
    norm = float(optimizers.l2_norm(GRADS[0]))
    np.testing.assert_allclose(norm, np.sqrt(sum(np.sum(g ** 2) for g in GRADS[0].values())),
                               rtol=1e-6)
    clipped = optimizers.clip_grads(GRADS[0], norm / 2)
    np.testing.assert_allclose(float(optimizers.l2_norm(clipped)), norm / 2, rtol=1e-6)
    kept = optimizers.clip_grads(GRADS[0], norm * 2)
    np.testing.assert_allclose(np.asarray(kept["w"]), GRADS[0]["w"])


def test_state_is_a_pytree_that_packs_unpacks_and_pickles():
    opt_init, opt_update, get_params = optimizers.momentum(0.1, 0.9)
    state = opt_update(0, GRADS[0], opt_init(PARAMS))
    assert isinstance(state, optimizers.OptimizerState)
    leaves = ember.tree_util.tree_leaves(state)
    assert len(leaves) == 2 * len(PARAMS)  # parameter and velocity for each
    unpacked = pickle.loads(pickle.dumps(optimizers.unpack_optimizer_state(state)))
    restored = optimizers.pack_optimizer_state(unpacked)
    for key in PARAMS:
        np.testing.assert_array_equal(np.asarray(get_params(restored)[key]),
                                      np.asarray(get_params(state)[key]))
    again = opt_update(1, GRADS[1], restored)
    np.testing.assert_array_equal(np.asarray(get_params(again)["w"]),
                                  np.asarray(get_params(opt_update(1, GRADS[1], state))["w"]))


def test_errors():
    opt_init, opt_update, _ = optimizers.sgd(0.1)
    with pytest.raises(EmberTypeError, match="did not match the parameter tree"):
        opt_update(0, {"w": GRADS[0]["w"]}, opt_init(PARAMS))
    with pytest.raises(EmberTypeError, match="scalar or a schedule"):
        optimizers.sgd([0.1, 0.2])
    with pytest.raises(EmberValueError, match="one more element"):
        optimizers.piecewise_constant([1, 2], [0.1])
