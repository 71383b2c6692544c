"""``ember demo --devices N``: the demo GPT trained data-parallel through shard_map with
``pmean`` in the loss gives the 1-device run's losses within float32 rounding."""
from __future__ import annotations

import re

import numpy as np
import pytest

import ember
from ember import demo, random
from ember.errors import EmberValueError
from ember.runtime.devices import default_backend

STEPS = 4
CFG = demo.GPTConfig(width=32, layers=1, batch=8)
DEMO_BACKENDS = sorted({"reference", default_backend().name})  # as tests/test_demo.py


@pytest.fixture(scope="module")
def corpus():
    return demo.load_corpus(200_000)


def _run(corpus, devices):
    data = demo.batches(corpus, CFG, seed=0)
    model = demo.GPT.init(random.PRNGKey(0), CFG)
    optimizer = demo.make_optimizer(STEPS)
    step = (demo.make_train_step(optimizer) if devices is None
            else demo.make_data_parallel_step(optimizer, demo.data_mesh(devices, CFG.batch)))
    step = ember.jit(step)
    state, losses = (model, optimizer.init(model)), []
    for _ in range(STEPS):
        *state, loss = step(*state, *next(data))
        losses.append(float(loss))
    return np.array(losses), state[0]


@pytest.mark.parametrize("backend", DEMO_BACKENDS)
def test_data_parallel_losses_equal_the_one_device_run(backend, corpus):
    with ember.config.override(backend=backend):
        want, model = _run(corpus, None)
        for devices in (2, 8):
            got, sharded_model = _run(corpus, devices)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
            assert sharded_model.blocks[0].attn.qkv.weight.sharding.is_fully_replicated
    assert want[-1] < want[0]  # the run trains


def test_demo_command_with_devices(tmp_path, capsys):
    with ember.config.override(backend=None, num_cpu_devices=8):  # restores the flags
        code = demo.main(["--steps", "3", "--layers", "1", "--width", "32", "--batch", "8",
                          "--sample", "4", "--devices", "2", "--out", str(tmp_path)])
        assert ember.config.num_cpu_devices == 2  # the host CPU split in two
    printed = capsys.readouterr().out
    assert code == 0
    assert "data-parallel over 2 devices" in printed
    assert re.search(r"loss: [\d.]+ -> [\d.]+ over 3 steps", printed), printed


def test_a_batch_that_does_not_split_is_a_clear_error():
    with pytest.raises(EmberValueError, match="--batch 6 does not split over --devices 4"):
        demo.data_mesh(4, 6)
    with pytest.raises(EmberValueError, match="has only 8 devices"):
        demo.data_mesh(16, 16)
