"""example_libraries.stax: output shapes and outputs against JAX's own stax (fed the
same parameters), against NumPy, numerical gradients, and jit."""
import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import random
from ember.errors import EmberValueError
from ember.example_libraries import stax
from ember.test_util import check_grads

RNG = np.random.default_rng(0)
IMAGES = RNG.standard_normal((2, 7, 6, 3)).astype(np.float32)


def _as_numpy(tree):
    return ember.tree_util.tree_map(np.asarray, tree)


LAYERS = {  # name -> (layer from a stax module, input)
    "dense": (lambda s: s.Dense(5), RNG.standard_normal((4, 3)).astype(np.float32)),
    "conv_same_strided": (lambda s: s.Conv(4, (3, 2), (2, 1), "SAME"), IMAGES),
    "conv_valid": (lambda s: s.Conv(2, (2, 2)), IMAGES),
    "general_conv_nchw": (lambda s: s.GeneralConv(("NCHW", "OIHW", "NCHW"), 3, (2, 3),
                                                  padding="SAME"),
                          IMAGES.transpose(0, 3, 1, 2)),
    "conv_transpose": (lambda s: s.ConvTranspose(4, (3, 3), (2, 2), "SAME"), IMAGES),
    "conv_transpose_valid": (lambda s: s.ConvTranspose(2, (2, 3), (1, 2)), IMAGES),
    "conv1d_transpose": (lambda s: s.Conv1DTranspose(3, (3,), (2,), "SAME"), IMAGES[:, 0]),
    "batch_norm": (lambda s: s.BatchNorm(), IMAGES),
    "batch_norm_axis": (lambda s: s.BatchNorm(axis=0, scale=False), IMAGES[:, :, 0]),
    "max_pool": (lambda s: s.MaxPool((2, 2), (2, 2)), IMAGES),
    "max_pool_same": (lambda s: s.MaxPool((3, 3), (2, 2), "SAME"), IMAGES),
    "avg_pool_same": (lambda s: s.AvgPool((3, 2), (2, 1), "SAME"), IMAGES),
    "avg_pool_spec": (lambda s: s.AvgPool((2, 2), padding="SAME", spec="NCHW"),
                      IMAGES.transpose(0, 3, 1, 2)),
    "sum_pool": (lambda s: s.SumPool((2, 3)), IMAGES),
    "flatten": (lambda s: s.Flatten, IMAGES),
    "elementwise": (lambda s: s.serial(s.Relu, s.Tanh, s.Exp, s.Softplus, s.Sigmoid, s.Elu,
                                       s.LeakyRelu, s.Selu, s.Gelu, s.LogSoftmax, s.Softmax,
                                       s.Identity), IMAGES),
    "fan_out_sum": (lambda s: s.serial(s.FanOut(2), s.parallel(s.Dense(3), s.Identity),
                                       s.FanInSum), RNG.standard_normal((4, 3))
                    .astype(np.float32)),
    "fan_out_concat": (lambda s: s.serial(s.FanOut(3), s.parallel(s.Dense(2), s.Dense(4),
                                                                  s.Tanh),
                                          s.FanInConcat()), RNG.standard_normal((4, 3))
                       .astype(np.float32)),
    "shape_dependent": (lambda s: s.shape_dependent(lambda shape: s.Dense(shape[-1] * 2)),
                        RNG.standard_normal((4, 3)).astype(np.float32)),
    "cnn": (lambda s: s.serial(s.Conv(4, (3, 3), padding="SAME"), s.Relu,
                               s.MaxPool((2, 2), (2, 2)), s.Flatten, s.Dense(3),
                               s.LogSoftmax), IMAGES),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_matches_jax_stax(name):
    jax = pytest.importorskip("jax")
    from jax.example_libraries import stax as jax_stax

    make, x = LAYERS[name]
    init, apply = make(stax)
    jax_init, jax_apply = make(jax_stax)
    shape, params = init(random.PRNGKey(0), x.shape)
    jax_shape, jax_params = jax_init(jax.random.PRNGKey(0), x.shape)
    assert tuple(shape) == tuple(jax_shape)
    assert (jax.tree.structure(jax.tree.map(np.shape, jax_params))
            == jax.tree.structure(_as_numpy(ember.tree_util.tree_map(np.shape, params))))
    params = _as_numpy(params)
    out = ember.jit(apply)(params, x)
    expected = jax_apply(params, x)
    assert out.shape == tuple(shape) and out.shape == expected.shape
    np.testing.assert_allclose(np.asarray(out), np.asarray(expected), rtol=2e-5, atol=2e-5)


def test_dense_and_max_pool_match_numpy():
    init, apply = stax.serial(stax.Dense(4), stax.Relu)
    x = RNG.standard_normal((5, 3)).astype(np.float32)
    _, ((W, b), ()) = init(random.PRNGKey(1), x.shape)
    np.testing.assert_allclose(np.asarray(apply([(W, b), ()], x)),
                               np.maximum(x @ np.asarray(W) + np.asarray(b), 0), rtol=1e-6)
    _, pool = stax.MaxPool((2, 2), (2, 2))
    out = pool((), IMAGES)
    expected = IMAGES[:, :6].reshape(2, 3, 2, 3, 2, 3).max((2, 4))
    np.testing.assert_array_equal(np.asarray(out), expected)


def test_output_shapes_with_an_unknown_batch():
    init, _ = stax.serial(stax.Dense(7), stax.Relu, stax.Dense(2))
    shape, _ = init(random.PRNGKey(0), (-1, 3))
    assert shape == (-1, 2)


def test_gradients_of_a_network_are_numerically_right(x64):
    init, apply = stax.serial(stax.Conv(2, (2, 2), padding="SAME"), stax.Tanh,
                              stax.AvgPool((2, 2), (2, 2)), stax.BatchNorm(), stax.Flatten,
                              stax.Dense(3), stax.LogSoftmax)
    x = IMAGES[:, :4, :4].astype(np.float64)
    _, params = init(random.PRNGKey(2), x.shape)
    params = ember.tree_util.tree_map(lambda p: jnp.asarray(p, jnp.float64), params)
    check_grads(lambda p: apply(p, x).sum(0), (params,), order=1)
    check_grads(lambda v: apply(params, v), (x,), order=1, modes=("rev",))


def test_dropout_keeps_with_probability_rate_and_needs_a_key():
    _, apply = stax.Dropout(0.75)
    x = np.ones((200, 50), np.float32)
    out = np.asarray(apply((), x, rng=random.PRNGKey(3)))
    kept = out != 0
    assert 0.72 < kept.mean() < 0.78
    np.testing.assert_allclose(out[kept], 1 / 0.75, rtol=1e-6)
    _, apply_eval = stax.Dropout(0.75, mode="test")
    np.testing.assert_array_equal(np.asarray(apply_eval((), x, rng=random.PRNGKey(3))), x)
    with pytest.raises(EmberValueError, match="rng=key"):
        apply((), x)


def test_serial_splits_the_key_among_layers():
    _, apply = stax.serial(stax.Dropout(0.5), stax.Dropout(0.5))
    x = np.ones((100, 100), np.float32)
    out = np.asarray(apply([(), ()], x, rng=random.PRNGKey(4)))
    assert 0.2 < (out != 0).mean() < 0.3  # two independent masks, not one twice
