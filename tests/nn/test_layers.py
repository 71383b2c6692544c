"""Layers against NumPy reference formulas (jitted, on every backend present), gradients
through layers (check_grads, float64), BatchNorm running state, Dropout, pytree use with
jit / grad / vmap, and errors."""
from __future__ import annotations

import math

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import nn, random
from ember.errors import EmberValueError
from ember.test_util import check_grads

RNG = np.random.default_rng(0)


def _normal(*shape: int, dtype=np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def _host(tree):
    return ember.tree_util.tree_map(np.asarray, tree)


# --- NumPy references --------------------------------------------------------------------

def np_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def np_attention(q, k, v, mask=None, scale=None):
    """Loop over heads: softmax(q_n k_nᵀ * scale) v_n for (T, N, H) inputs."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    heads = []
    for n in range(q.shape[1]):
        scores = (q[:, n] @ k[:, n].T) * scale
        if mask is not None:
            scores = np.where(mask[n] if mask.ndim == 3 else mask, scores, -np.inf)
        heads.append(np_softmax(scores) @ v[:, n])
    return np.stack(heads, axis=1)


def np_causal_self_attention(layer, x):
    t, f = x.shape
    n = layer.num_heads
    qkv = x @ layer.qkv.weight + layer.qkv.bias
    q, k, v = (qkv[:, i * f:(i + 1) * f].reshape(t, n, f // n) for i in range(3))
    out = np_attention(q, k, v, mask=np.tril(np.ones((t, t), bool)))
    return out.reshape(t, f) @ layer.proj.weight + layer.proj.bias


def np_conv2d(x, w, b, stride, padding):
    """Direct loops: out[n, o, i, j] = b[o] + sum over c, di, dj of x_pad * w."""
    (sh, sw), (kh, kw) = stride, w.shape[2:]
    x = np.pad(x, ((0, 0), (0, 0), *padding))
    out_h, out_w = (x.shape[2] - kh) // sh + 1, (x.shape[3] - kw) // sw + 1
    out = np.zeros((x.shape[0], w.shape[0], out_h, out_w), np.float64)
    for i in range(out_h):
        for j in range(out_w):
            patch = x[:, :, i * sh:i * sh + kh, j * sw:j * sw + kw]
            out[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w)
    return out + b[:, None, None]


def np_pool(x, window, stride, reduce):
    out_h, out_w = (x.shape[-2] - window) // stride + 1, (x.shape[-1] - window) // stride + 1
    out = np.zeros(x.shape[:-2] + (out_h, out_w), x.dtype)
    for i in range(out_h):
        for j in range(out_w):
            patch = x[..., i * stride:i * stride + window, j * stride:j * stride + window]
            out[..., i, j] = reduce(patch, axis=(-2, -1))
    return out


def np_gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def np_layer_norm(x, scale, bias, eps):
    mean = x.mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(x.var(-1, keepdims=True) + eps) * scale + bias


def np_batch_norm(x, scale, bias, mean, var, eps):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return ((x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * scale.reshape(shape)
            + bias.reshape(shape))


# --- cases: (function, arguments, NumPy reference of the host arguments) ------------------

def _key(i: int):
    return random.PRNGKey(i)


def _with_random(layer, *fields):
    """Replace zero / one initial parameters (biases, norm scales) with random values so
    the reference formulas check every parameter."""
    import dataclasses

    updates = {name: jnp.asarray(_normal(*getattr(layer, name).shape), getattr(layer, name).dtype)
               for name in fields}
    return dataclasses.replace(layer, **updates)


def _call(layer, x):
    return layer(x)


def _cases():
    attn = nn.CausalSelfAttention.init(_key(3), 8, 2)
    attn = type(attn)(_with_random(attn.qkv, "bias"), _with_random(attn.proj, "bias"), 2)
    mask = RNG.random((2, 5, 6)) > 0.3
    mask[..., 0] = True  # every query sees at least one key
    causal = np.tril(np.ones((4, 4), bool))
    return {
        "linear": (_call, (_with_random(nn.Linear.init(_key(0), 5, 3), "bias"), _normal(4, 5)),
                   lambda m, x: x @ m.weight + m.bias),
        "linear_no_bias": (_call, (nn.Linear.init(_key(0), 5, 3, use_bias=False),
                                   _normal(2, 4, 5)),
                           lambda m, x: x @ m.weight),
        "embedding": (_call, (nn.Embedding.init(_key(1), 10, 4), RNG.integers(0, 10, (3, 7))),
                      lambda m, ids: m.table[ids]),
        "embedding_attend": (lambda m, x: m.attend(x),
                             (nn.Embedding.init(_key(1), 10, 4), _normal(3, 4)),
                             lambda m, x: x @ m.table.T),
        "layer_norm": (_call, (_with_random(nn.LayerNorm.init(6), "scale", "bias"),
                               _normal(3, 6) * 3 + 1),
                       lambda m, x: np_layer_norm(x, m.scale, m.bias, m.eps)),
        "rms_norm": (_call, (_with_random(nn.RMSNorm.init(6), "scale"), _normal(3, 6) + 2),
                     lambda m, x: x / np.sqrt(np.mean(x * x, -1, keepdims=True) + m.eps)
                     * m.scale),
        "mlp": (_call, (nn.MLP.init(_key(2), 4, 16), _normal(3, 4)),
                lambda m, x: np_gelu(x @ m.fc1.weight + m.fc1.bias) @ m.fc2.weight + m.fc2.bias),
        "sequential": (_call, (nn.Sequential((nn.Linear.init(_key(0), 4, 6), nn.Lambda(nn.relu),
                                              nn.Linear.init(_key(1), 6, 2))), _normal(3, 4)),
                       lambda m, x: np.maximum(x @ m.layers[0].weight, 0) @ m.layers[2].weight),
        "causal_self_attention": (_call, (attn, _normal(5, 8)), np_causal_self_attention),
        "causal_self_attention_batched": (
            _call, (attn, _normal(2, 5, 8)),
            lambda m, x: np.stack([np_causal_self_attention(m, row) for row in x])),
        "dot_product_attention_masked": (
            lambda q, k, v, mask: nn.dot_product_attention(q, k, v, mask=mask),
            (_normal(5, 2, 3), _normal(6, 2, 3), _normal(6, 2, 3), mask), np_attention),
        "dot_product_attention_causal_scaled": (
            lambda q, k, v: nn.dot_product_attention(q, k, v, scale=0.3, is_causal=True),
            (_normal(4, 3, 2), _normal(4, 3, 2), _normal(4, 3, 2)),
            lambda q, k, v: np_attention(q, k, v, mask=causal, scale=0.3)),
        "conv2d_same": (_call, (_with_random(nn.Conv2d.init(_key(4), 2, 3, 3), "bias"),
                                _normal(2, 2, 6, 5)),
                        lambda m, x: np_conv2d(x, m.weight, m.bias, (1, 1), ((1, 1), (1, 1)))),
        "conv2d_strided_valid": (
            _call, (_with_random(nn.Conv2d.init(_key(5), 3, 2, (3, 2), stride=2, padding="VALID"),
                                 "bias"), _normal(1, 3, 7, 6)),
            lambda m, x: np_conv2d(x, m.weight, m.bias, (2, 2), ((0, 0), (0, 0)))),
        "conv2d_explicit_padding": (
            _call, (nn.Conv2d.init(_key(6), 1, 2, 2, padding=((1, 0), (0, 2))),
                    _normal(2, 1, 4, 4)),
            lambda m, x: np_conv2d(x, m.weight, m.bias, (1, 1), ((1, 0), (0, 2)))),
        "max_pool_2x2": (_call, (nn.MaxPool2d(), _normal(2, 3, 6, 5)),
                         lambda m, x: np_pool(x, 2, 2, np.max)),
        "max_pool_3_stride_1": (_call, (nn.MaxPool2d(3, 1), _normal(1, 2, 5, 5)),
                                lambda m, x: np_pool(x, 3, 1, np.max)),
        "avg_pool_2x2": (_call, (nn.AvgPool2d(), _normal(2, 3, 4, 6)),
                         lambda m, x: np_pool(x, 2, 2, np.mean)),
        "avg_pool_3_stride_2": (_call, (nn.AvgPool2d(3, 2), _normal(1, 1, 7, 7)),
                                lambda m, x: np_pool(x, 3, 2, np.mean)),
    }


CASES = _cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_layer_matches_numpy(name, backend):
    fn, args, reference = CASES[name]
    got = ember.jit(fn)(*args)
    expected = reference(*_host(args))
    np.testing.assert_allclose(np.asarray(got), expected, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("name", ["linear", "layer_norm", "conv2d_same", "max_pool_2x2",
                                  "causal_self_attention"])
def test_eager_equals_jit(name):
    fn, args, _ = CASES[name]
    np.testing.assert_allclose(np.asarray(fn(*args)), np.asarray(ember.jit(fn)(*args)),
                               rtol=1e-6, atol=1e-6)


def test_norms_keep_a_bfloat16_input_dtype():
    x = jnp.asarray(_normal(2, 6), jnp.bfloat16)
    assert nn.LayerNorm.init(6)(x).dtype == jnp.bfloat16
    assert nn.RMSNorm.init(6)(x).dtype == jnp.bfloat16


# --- BatchNorm -----------------------------------------------------------------------------

def test_batch_norm_train_updates_running_stats_and_eval_uses_them(backend):
    bn = _with_random(nn.BatchNorm.init(3, momentum=0.8), "scale", "bias")
    x = _normal(4, 3, 2, 2) * 2 + 1
    step = ember.jit(lambda m, x, train: m(x, train=train), static_argnums=2)
    y, updated = step(bn, x, True)
    mean, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
    host = _host(bn)
    np.testing.assert_allclose(np.asarray(y), np_batch_norm(x, host.scale, host.bias, mean, var,
                                                            bn.eps), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(updated.running_mean), 0.2 * mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(updated.running_var), 0.8 + 0.2 * var, rtol=1e-5)

    y_eval, same = step(updated, x, False)
    running = _host(updated)
    np.testing.assert_allclose(
        np.asarray(y_eval), np_batch_norm(x, host.scale, host.bias, running.running_mean,
                                          running.running_var, bn.eps), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(np.asarray(same.running_var), running.running_var)


def test_batch_norm_channels_last():
    bn = nn.BatchNorm.init(3, axis=-1)
    x = _normal(5, 4, 3)
    y, updated = bn(x)
    np.testing.assert_allclose(np.asarray(y), (x - x.mean((0, 1))) / np.sqrt(x.var((0, 1)) + 1e-5),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(updated.running_mean), 0.1 * x.mean((0, 1)), rtol=1e-5)


# --- Dropout ---------------------------------------------------------------------------------

def test_dropout_scales_kept_values_and_drops_about_rate():
    x = jnp.ones((100, 100))
    y = np.asarray(nn.Dropout(0.25)(x, key=random.PRNGKey(7)))
    assert set(np.unique(y)) == {0.0, np.float32(1 / 0.75)}
    assert abs((y == 0).mean() - 0.25) < 0.02
    np.testing.assert_array_equal(np.asarray(nn.Dropout(0.25)(x, train=False)), np.asarray(x))


def test_dropout_errors():
    with pytest.raises(EmberValueError, match="needs a key"):
        nn.Dropout(0.5)(jnp.ones(3))
    with pytest.raises(EmberValueError, match=r"rate must be in \[0, 1\), got 1.5"):
        nn.Dropout(1.5)


# --- gradients through layers (float64) -----------------------------------------------------

def _grad_cases():
    f64 = jnp.float64
    attn = nn.CausalSelfAttention.init(_key(3), 4, 2, dtype=f64)
    return {
        "linear": (nn.Linear.init(_key(0), 3, 2, dtype=f64), _normal(2, 3, dtype=np.float64)),
        "layer_norm": (_with_random(nn.LayerNorm.init(4, dtype=f64), "scale", "bias"),
                       _normal(2, 4, dtype=np.float64)),
        "rms_norm": (nn.RMSNorm.init(4, dtype=f64), _normal(2, 4, dtype=np.float64)),
        "mlp": (nn.MLP.init(_key(2), 3, 5, dtype=f64), _normal(2, 3, dtype=np.float64)),
        "attention": (attn, _normal(3, 4, dtype=np.float64)),
        "conv2d": (nn.Conv2d.init(_key(4), 2, 2, 3, dtype=f64),
                   _normal(1, 2, 4, 4, dtype=np.float64)),
        "max_pool": (nn.MaxPool2d(), _normal(1, 2, 4, 4, dtype=np.float64)),
        "avg_pool": (nn.AvgPool2d(3, 1), _normal(1, 1, 4, 5, dtype=np.float64)),
        "batch_norm": (nn.BatchNorm.init(2, dtype=f64), _normal(3, 2, 2, dtype=np.float64)),
    }


@pytest.mark.parametrize("name", ["linear", "layer_norm", "rms_norm", "mlp", "attention",
                                  "conv2d", "max_pool", "avg_pool", "batch_norm"])
def test_gradients_through_layers(name, x64):
    layer, x = _grad_cases()[name]

    def f(layer, x):
        out = layer(x)
        return out[0] if isinstance(out, tuple) else out

    check_grads(f, (layer, x), order=1)


# --- layers are pytrees ---------------------------------------------------------------------

def test_grad_of_a_layer_is_a_layer_of_grads():
    layer = nn.Linear.init(_key(0), 3, 2)
    x = _normal(4, 3)
    grads = ember.grad(lambda m: jnp.sum(m(x)))(layer)
    assert isinstance(grads, nn.Linear)
    np.testing.assert_allclose(np.asarray(grads.weight), np.repeat(x.sum(0)[:, None], 2, 1),
                               rtol=1e-5)
    np.testing.assert_allclose(np.asarray(grads.bias), [4.0, 4.0])


def test_vmap_over_a_stack_of_layers():
    keys = random.split(_key(0), 3)
    stacked = ember.vmap(lambda k: nn.Linear.init(k, 4, 2))(keys)
    assert stacked.weight.shape == (3, 4, 2)
    x = _normal(4)
    got = ember.vmap(lambda m: m(x))(stacked)
    expected = np.einsum("i,bio->bo", x, np.asarray(stacked.weight)) + np.asarray(stacked.bias)
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-5, atol=1e-6)


# --- errors ---------------------------------------------------------------------------------

def test_layer_errors():
    with pytest.raises(EmberValueError, match=r"\(6\) must be divisible by num_heads \(4\)"):
        nn.CausalSelfAttention.init(_key(0), 6, 4)
    with pytest.raises(EmberValueError, match="unknown activation 'swoosh'"):
        nn.MLP.init(_key(0), 3, 4, activation="swoosh")
    with pytest.raises(EmberValueError, match=r"window \(3, 3\) is larger.*\(1, 1, 2, 2\)"):
        nn.max_pool(jnp.ones((1, 1, 2, 2)), 3)
    with pytest.raises(EmberValueError, match=r"query \(2, 1, 4\), key \(2, 1, 3\)"):
        nn.dot_product_attention(jnp.ones((2, 1, 4)), jnp.ones((2, 1, 3)), jnp.ones((2, 1, 3)))


# --- initializers ---------------------------------------------------------------------------

@pytest.mark.parametrize("make, shape, variance", [
    (nn.initializers.he_normal(), (400, 300), 2.0 / 400),
    (nn.initializers.lecun_uniform(), (400, 300), 1.0 / 400),
    (nn.initializers.glorot_normal(), (400, 300), 2.0 / 700),
    (nn.initializers.glorot_uniform(in_axis=1, out_axis=0), (50, 40, 3, 3), 2.0 / (90 * 9)),
    (nn.initializers.normal(0.5), (300, 300), 0.25),
])
def test_initializer_variance(make, shape, variance):
    values = np.asarray(make(_key(0), shape))
    assert values.shape == shape and values.dtype == np.float32
    assert abs(values.var() / variance - 1) < 0.05
    assert abs(values.mean()) < 0.05 * math.sqrt(variance)


def test_initializer_bounds_and_dtypes():
    limit = math.sqrt(3.0 / 100)
    uniform = np.asarray(nn.initializers.lecun_uniform()(_key(1), (100, 50)))
    assert uniform.min() >= -limit and uniform.max() <= limit
    cut = np.asarray(nn.initializers.truncated_normal(1.0)(_key(2), (1000,)))
    assert cut.min() >= -2.0 and cut.max() <= 2.0
    assert nn.initializers.he_normal(dtype=jnp.bfloat16)(_key(3), (3, 3)).dtype == jnp.bfloat16
    assert nn.initializers.zeros(_key(0), (2,), jnp.float16).dtype == jnp.float16
    np.testing.assert_array_equal(np.asarray(nn.initializers.constant(3.0)(_key(0), (2,))), [3, 3])
    with pytest.raises(EmberValueError, match="mode must be one of"):
        nn.initializers.variance_scaling(1.0, "fan_sideways", "normal")
