"""Smoke tests: every example runs in a reduced mode and learns something; the
per-example gradients also match a loop."""
from __future__ import annotations

import numpy as np

import ember
from ember import random


def test_digits_cnn(load_example):
    accuracy = load_example("digits_cnn").main(["--steps", "40", "--batch", "32"])
    assert accuracy > 0.6


def test_per_example_grads_match_a_loop(load_example):
    example = load_example("per_example_grads")
    images, labels = example.load_digits()
    params = example.init(random.PRNGKey(0))
    batched = example.per_example_grads(params, images[:4], labels[:4])
    for i in range(4):
        single = ember.grad(example.example_loss)(params, images[i], labels[i])
        for got, want in zip(ember.tree_util.tree_leaves(batched),
                             ember.tree_util.tree_leaves(single)):
            np.testing.assert_allclose(np.asarray(got)[i], np.asarray(want), rtol=1e-5, atol=1e-6)
    clipped = example.clip_each(batched, 0.1)
    norms = np.sqrt(sum(np.sum(np.square(np.asarray(g)).reshape(4, -1), axis=1)
                        for g in ember.tree_util.tree_leaves(clipped)))
    np.testing.assert_allclose(norms, 0.1, rtol=1e-4)


def test_per_example_grads_trains(load_example):
    result = load_example("per_example_grads").main(["--steps", "30"])
    assert result["last_loss"] < 0.5 * result["first_loss"]


def test_rnn_scan(load_example):
    result = load_example("rnn_scan").main(["--steps", "60", "--length", "16"])
    assert result["last_loss"] < 0.7 * result["first_loss"]
    assert result["last_loss"] < 0.5 * result["baseline"]


def test_mixed_precision_bfloat16_and_float16(load_example):
    example = load_example("mixed_precision")
    for dtype in ("bfloat16", "float16"):
        result = example.main(["--steps", "25", "--dtype", dtype])
        assert result["last_loss"] < 0.5 * result["first_loss"], dtype


def test_gpt_peers_compute_the_same_losses(load_example):
    """Ember, JAX and eager PyTorch (those installed) train the same GPT from the same
    parameters on the same batches: their losses agree step by step."""
    results = load_example("gpt_peers").main(
        ["--steps", "2", "--warmup", "1", "--layers", "1", "--width", "32", "--batch", "4",
         "--peers", "ember,jax,torch-eager"])
    assert results["ember"]["tokens_per_s"] > 0
    for peer in set(results) - {"ember"}:
        np.testing.assert_allclose(results[peer]["losses"], results["ember"]["losses"],
                                   rtol=2e-4, err_msg=peer)
