"""ember.nn against jax.nn: every name and signature, the newer activations, attention
with all its options, and the initializers."""
import inspect
import math

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember import nn, random
from ember.errors import EmberValueError
from ember.test_util import check_grads

RNG = np.random.default_rng(0)


def _parameters(fn):
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()
            if p.name != "out_sharding"]


def _public_callables(module):
    return sorted(name for name in dir(module) if not name.startswith("_")
                  and callable(getattr(module, name)) and not inspect.isclass(getattr(module, name))
                  and not inspect.ismodule(getattr(module, name)))


@pytest.mark.parametrize("namespace", ["nn", "nn.initializers"])
def test_every_jax_name_with_its_signature(namespace):
    jax = pytest.importorskip("jax")
    ours = nn if namespace == "nn" else nn.initializers
    theirs = jax.nn if namespace == "nn" else jax.nn.initializers
    for name in _public_callables(theirs):
        assert hasattr(ours, name), f"ember.{namespace} lacks {name}"
        ours_fn, theirs_fn = getattr(ours, name), getattr(theirs, name)
        if name in ("relu", "tanh", "sigmoid", "silu", "swish", "one_hot") or not (
                inspect.isfunction(inspect.unwrap(theirs_fn))):
            continue  # custom_jvp / jit wrappers, or positional-only details of lax aliases
        assert _parameters(ours_fn) == _parameters(theirs_fn), name


ACTIVATIONS = ["log1mexp", "sparse_plus", "sparse_sigmoid", "standardize", "logmeanexp"]


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_new_activations_match_jax(name):
    jax = pytest.importorskip("jax")
    x = RNG.uniform(0.01, 4.0, (3, 7)) if name == "log1mexp" else RNG.uniform(-2, 2, (3, 7))
    x = x.astype(np.float32)
    np.testing.assert_allclose(np.asarray(getattr(nn, name)(x)),
                               np.asarray(getattr(jax.nn, name)(x)), rtol=2e-6, atol=1e-6)


def test_standardize_stable_and_logmeanexp_with_where():
    jax = pytest.importorskip("jax")
    x = (RNG.standard_normal((4, 6)) + 10.0).astype(np.float32)
    where = RNG.uniform(size=(4, 6)) > 0.3
    np.testing.assert_allclose(np.asarray(nn.standardize(x, algorithm="stable")),
                               np.asarray(jax.nn.standardize(x, algorithm="stable")),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(nn.logmeanexp(x, axis=1, where=where)),
                               np.asarray(jax.nn.logmeanexp(x, axis=1, where=where)),
                               rtol=1e-6)
    with pytest.raises(EmberValueError, match="'fast' or 'stable'"):
        nn.standardize(x, algorithm="exact")


def test_new_activations_numerically(x64):
    x = RNG.uniform(0.05, 3.0, (5,))
    np.testing.assert_allclose(np.asarray(nn.log1mexp(x)), np.log(-np.expm1(-x)), rtol=1e-13)
    np.testing.assert_allclose(np.asarray(nn.log1mexp(np.array([1e-10, 50.0]))),
                               [np.log(1e-10), -np.exp(-50.0)], rtol=1e-9)
    check_grads(nn.log1mexp, (x,), order=2)
    y = np.array([-1.7, -0.4, 0.3, 0.9, 1.6])
    check_grads(nn.sparse_plus, (y,), order=1)
    check_grads(nn.sparse_sigmoid, (y,), order=1)
    check_grads(lambda v: nn.logmeanexp(v, axis=0), (RNG.standard_normal((4, 3)),), order=2)
    check_grads(lambda v: nn.standardize(v, algorithm="stable"),
                (RNG.standard_normal((3, 5)),), order=1)


# --- attention ----------------------------------------------------------------------------

def _qkv(batch=(2,), t=5, s=6, heads=4, kv_heads=2, features=3, dtype=np.float32):
    q = RNG.standard_normal((*batch, t, heads, features)).astype(dtype)
    k = RNG.standard_normal((*batch, s, kv_heads, features)).astype(dtype)
    v = RNG.standard_normal((*batch, s, kv_heads, features)).astype(dtype)
    return q, k, v


ATTENTION_CASES = {
    "plain": {},
    "bias_and_mask": {"bias": RNG.standard_normal((2, 4, 5, 6)).astype(np.float32),
                      "mask": RNG.uniform(size=(2, 1, 5, 6)) > 0.3},
    "causal_scaled": {"is_causal": True, "scale": 0.7},
    "lengths": {"query_seq_lengths": np.array([3, 5], np.int32),
                "key_value_seq_lengths": np.array([6, 2], np.int32)},
    "window": {"local_window_size": (1, 2)},
    "window_int_causal": {"local_window_size": 1, "is_causal": True},
}


@pytest.mark.parametrize("case", sorted(ATTENTION_CASES))
def test_dot_product_attention_matches_jax(case):
    jax = pytest.importorskip("jax")
    q, k, v = _qkv()
    kwargs = ATTENTION_CASES[case]
    out = nn.dot_product_attention(q, k, v, **kwargs)
    expected = jax.nn.dot_product_attention(q, k, v, **kwargs)
    np.testing.assert_allclose(np.asarray(out), np.asarray(expected), rtol=1e-5, atol=1e-6)
    out, residual = nn.dot_product_attention(q, k, v, **kwargs, return_residual=True)
    _, expected_residual = jax.nn.dot_product_attention(q, k, v, **kwargs,
                                                        return_residual=True)
    np.testing.assert_allclose(np.asarray(residual), np.asarray(expected_residual),
                               rtol=1e-5, atol=1e-5)


def test_dot_product_attention_without_batch_and_its_gradient(x64):
    q, k, v = (a[0].astype(np.float64) for a in _qkv(kv_heads=4))

    def numpy_attention(q, k, v):
        logits = np.einsum("tnh,snh->nts", q, k) / math.sqrt(q.shape[-1])
        weights = np.exp(logits - logits.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        return np.einsum("nts,snh->tnh", weights, v)

    np.testing.assert_allclose(np.asarray(nn.dot_product_attention(q, k, v)),
                               numpy_attention(q, k, v), rtol=1e-12)
    check_grads(lambda a, b, c: nn.dot_product_attention(a, b, c, is_causal=True), (q, k, v),
                order=1)


def test_dot_product_attention_errors():
    q, k, v = _qkv()
    with pytest.raises(EmberValueError, match="implementation='cudnn' is not available"):
        nn.dot_product_attention(q, k, v, implementation="cudnn")
    with pytest.raises(EmberValueError, match="K dividing N"):
        nn.dot_product_attention(q, k[..., :1, :].repeat(3, -2), v[..., :1, :].repeat(3, -2))


# --- block-scaled products -----------------------------------------------------------------

def test_scaled_matmul_is_its_defining_sum():
    lhs = RNG.standard_normal((2, 3, 64)).astype(np.float32)
    rhs = RNG.standard_normal((2, 5, 64)).astype(np.float32)
    lhs_scales = RNG.uniform(0.5, 2, (2, 3, 2)).astype(np.float32)
    rhs_scales = RNG.uniform(0.5, 2, (2, 5, 2)).astype(np.float32)
    out = nn.scaled_matmul(lhs, rhs, lhs_scales, rhs_scales)
    expected = np.einsum("bmk,bnk->bmn", lhs * lhs_scales.repeat(32, 2),
                         rhs * rhs_scales.repeat(32, 2))
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-5, atol=1e-5)
    half = nn.scaled_matmul(lhs, rhs, lhs_scales, rhs_scales, preferred_element_type=jnp.bfloat16)
    assert half.dtype == jnp.bfloat16
    with pytest.raises(EmberValueError, match="equal blocks"):
        nn.scaled_matmul(lhs, rhs, lhs_scales[..., :1].repeat(3, 2),
                         rhs_scales[..., :1].repeat(3, 2))  # 64 is not 3 blocks


def test_scaled_dot_general_and_its_configs():
    lhs = RNG.standard_normal((3, 4)).astype(np.float32)
    out = nn.scaled_dot_general(lhs, lhs, (((1,), (1,)), ((), ())))
    np.testing.assert_allclose(np.asarray(out), lhs @ lhs.T, rtol=1e-5)
    config = nn.get_scaled_dot_general_config("mxfp8")
    assert (config.block_size, config.global_scale) == (32, None)
    assert nn.get_scaled_dot_general_config("nvfp4").block_size == 16
    with pytest.raises(EmberValueError, match="not in Ember"):
        nn.scaled_dot_general(lhs, lhs, (((1,), (1,)), ((), ())), configs=[config] * 3)
    with pytest.raises(EmberValueError, match="'nvfp4' or 'mxfp8'"):
        nn.get_scaled_dot_general_config("int8")
    jax = pytest.importorskip("jax")
    theirs = jax.nn.get_scaled_dot_general_config("nvfp4")
    ours = nn.get_scaled_dot_general_config("nvfp4")
    assert (ours.block_size, ours.data_type, ours.scale_type) == (
        theirs.block_size, theirs.data_type, theirs.scale_type)


# --- initializers -------------------------------------------------------------------------

def test_variance_scaling_statistics_and_axes():
    key = random.PRNGKey(0)
    init = nn.initializers
    for make, std in [(init.glorot_normal(), math.sqrt(2 / 500)),
                      (init.he_uniform(), math.sqrt(2 / 300)),
                      (init.lecun_normal(in_axis=0, out_axis=1), math.sqrt(1 / 300)),
                      (init.variance_scaling(2.0, "fan_geo_avg", "normal"),
                       math.sqrt(2 / math.sqrt(300 * 200)))]:
        w = np.asarray(make(key, (300, 200)))
        assert w.dtype == np.float32 and abs(w.mean()) < 3e-3
        np.testing.assert_allclose(w.std(), std, rtol=0.03)
    batched = np.asarray(init.he_normal(batch_axis=0)(key, (4, 300, 50)))
    np.testing.assert_allclose(batched.std(), math.sqrt(2 / 300), rtol=0.03)
    kernel = np.asarray(init.glorot_uniform(in_axis=(0, 1), out_axis=2)(key, (3, 40, 60)))
    assert np.abs(kernel).max() <= math.sqrt(3 * 2 / (120 + 60)) * (1 + 1e-6)
    with pytest.raises(EmberValueError, match="pass in_axis explicitly"):
        init.lecun_normal()(key, (5,))


def test_orthogonal_and_delta_orthogonal():
    key = random.PRNGKey(1)
    w = np.asarray(nn.initializers.orthogonal(scale=2.0)(key, (3, 4, 5)))
    np.testing.assert_allclose(w.reshape(12, 5).T @ w.reshape(12, 5), 4 * np.eye(5), atol=1e-5)
    wide = np.asarray(nn.initializers.orthogonal(column_axis=0)(key, (3, 8)))
    np.testing.assert_allclose(wide @ wide.T, np.eye(3), atol=1e-5)
    kernel = np.asarray(nn.initializers.delta_orthogonal()(key, (3, 3, 4, 6)))
    centre = kernel[1, 1]
    np.testing.assert_allclose(centre @ centre.T, np.eye(4), atol=1e-5)
    assert np.abs(kernel).sum() == pytest.approx(np.abs(centre).sum())
    with pytest.raises(EmberValueError, match="fan_in"):
        nn.initializers.delta_orthogonal()(key, (3, 3, 6, 4))


def test_initializer_dtypes_follow_jax():
    key = random.PRNGKey(2)
    assert nn.initializers.normal()(key, (2,)).dtype == np.float32
    assert nn.initializers.normal(dtype=jnp.bfloat16)(key, (2,)).dtype == jnp.bfloat16
    assert nn.initializers.constant(2)(key, (2,), jnp.float16).dtype == np.float16
    with ember.config.override(enable_x64=True):
        assert nn.initializers.glorot_normal()(key, (3, 2)).dtype == np.float64
        assert nn.initializers.zeros(key, (2,)).dtype == np.float64
    tn = np.asarray(nn.initializers.truncated_normal(1.0, lower=-1.0, upper=0.5)(key, (2000,)))
    assert tn.min() >= -1.0 and tn.max() <= 0.5
