"""Clipping by global norm and learning-rate schedules against their formulas."""
from __future__ import annotations

import math

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import optim


def test_global_norm():
    tree = {"a": jnp.asarray([3.0, 0.0]), "b": [jnp.asarray([[4.0]])]}
    assert float(optim.global_norm(tree)) == pytest.approx(5.0)


@pytest.mark.parametrize("max_norm, expected_scale", [(1.0, 0.2), (10.0, 1.0)])
def test_clip_by_global_norm(max_norm, expected_scale):
    grads = {"a": jnp.asarray([3.0, 0.0]), "b": jnp.asarray([[4.0]])}
    clip = optim.clip_by_global_norm(max_norm)
    clipped, _ = clip.update(grads, clip.init(grads))
    np.testing.assert_allclose(np.asarray(clipped["a"]), [3.0 * expected_scale, 0.0], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(clipped["b"]), [[4.0 * expected_scale]], rtol=1e-6)


def _warmup_cosine(step, init, peak, warmup, decay, end):
    if step < warmup:
        return init + (peak - init) * step / warmup
    fraction = min((step - warmup) / (decay - warmup), 1.0)
    return end + (peak - end) * 0.5 * (1 + math.cos(math.pi * fraction))


SCHEDULES = {
    "constant": (optim.constant_schedule(0.3), lambda s: 0.3),
    "cosine": (optim.cosine_decay_schedule(1.0, 10, alpha=0.1),
               lambda s: 0.9 * 0.5 * (1 + math.cos(math.pi * min(s, 10) / 10)) + 0.1),
    "warmup_cosine": (optim.warmup_cosine_decay_schedule(0.0, 1.0, 4, 12, 0.1),
                      lambda s: _warmup_cosine(s, 0.0, 1.0, 4, 12, 0.1)),
    "exponential": (optim.exponential_decay(1.0, 4, 0.5), lambda s: 0.5 ** (s / 4)),
    "step": (optim.step_schedule(1.0, 5, 0.1), lambda s: 0.1 ** (s // 5)),
    "piecewise": (optim.piecewise_constant_schedule(1.0, {3: 0.5, 8: 0.1}),
                  lambda s: 1.0 * (0.5 if s >= 3 else 1.0) * (0.1 if s >= 8 else 1.0)),
}


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_schedule_values(name):
    schedule, formula = SCHEDULES[name]
    jitted = ember.jit(schedule)
    for step in range(0, 16):
        expected = formula(step)
        assert float(schedule(step)) == pytest.approx(expected, rel=1e-5, abs=1e-7), step
        assert float(jitted(jnp.asarray(step, jnp.int32))) == pytest.approx(
            expected, rel=1e-5, abs=1e-7), step


def test_schedule_drives_sgd_step_size():
    optimizer = optim.sgd(optim.step_schedule(1.0, 2, 0.1))
    params = {"w": jnp.zeros(())}
    grads = {"w": jnp.ones(())}
    state = optimizer.init(params)
    sizes = []
    for _ in range(4):
        updates, state = optimizer.update(grads, state, params)
        sizes.append(-float(updates["w"]))
    np.testing.assert_allclose(sizes, [1.0, 1.0, 0.1, 0.1], rtol=1e-6)
