"""The fixed suite of ``ember bench``.

Each workload is written once, in JAX style, as a function of a namespace ``ns`` that
provides ``ns.numpy``, ``ns.nn``, ``ns.jit``, ``ns.grad`` and ``ns.value_and_grad``: the
identical code runs under ``ember`` and under ``jax``, so a difference in time is a
difference between the frameworks, not between two programs. NumPy runs the oracle's code
(reference.py) in float32 and PyTorch runs its own idiomatic version (torch_impls.py);
all of them compute the same function of the same inputs.

Sizes are fixed, in one table per workload with a row per ``target.SIZES``: "cpu" is the
sizes the project's CPU targets are stated for; "gpu" scales them up so that one call on
an H200 is bound by its memory or its float32 rate, not by launch overhead (the CPU's
16M-element GELU takes ~30 us there), while the host's share of a run (the float64
oracle, the check of every answer) keeps ``ember bench --backend cuda`` within the 240 s
that .ci/gpu-check gives it; "quick" shrinks every one for smoke tests. The GPU sizes
were chosen without a GPU and have not run on one yet.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ember.bench import reference, torch_impls
from ember.bench.reference import HEADS, LAYERNORM_EPS, LEARNING_RATE, MASKED_SCORE

SEED = 0


@dataclass(frozen=True)
class Workload:
    """A timed computation: one call of a jitted function on fixed float32 inputs."""

    name: str
    description: str                              # a template over the keywords of a size
    sizes: dict[str, dict[str, Any]]              # SIZES key -> keywords of make_inputs
    make_inputs: Callable[..., tuple]             # size keywords -> positional arguments (NumPy)
    jax_style: Callable[[Any], Callable]          # namespace -> function of the arguments
    reference: Callable[..., Any]                 # NumPy, dtype-generic (see reference.py)
    torch_impl: Callable[[Any], Callable]         # torch module -> function of tensors
    tolerance: float = 1e-4                       # max |got - ref| / max |ref|, per array
    unit: str = "ms"                              # how the table shows the time per call
    calls_per_sample: Callable[[str], int] = lambda sizes: 1
    floor: str | None = None                      # "copy" or "sgemm": what bounds it
    floor_work: Callable[[tuple], float] | None = None  # bytes moved or flops, per call

    def inputs(self, sizes: str) -> tuple:
        return self.make_inputs(**self.sizes[sizes])

    def describe(self, sizes: str) -> str:
        return self.description.format(**{key: _readable(value)
                                          for key, value in self.sizes[sizes].items()})


@dataclass(frozen=True)
class CompileWorkload:
    """The first-call time of ``source`` in a fresh process: trace, compile, run once.

    ``warm`` means the framework's persistent compile cache has been populated by an
    earlier process; the answer checked is the loss (element 1 of the source's result).
    """

    name: str
    description: str
    source: Workload
    warm: bool
    tolerance: float = 1e-4
    unit: str = "ms"
    floor: str | None = None

    def inputs(self, sizes: str) -> tuple:
        return self.source.inputs(sizes)

    def describe(self, sizes: str) -> str:
        return self.description

    def reference(self, *args):
        return self.source.reference(*args)[1]


def _readable(value: Any) -> str:
    """A size as the descriptions show it: 16777216 -> "16M", (784, 10) -> "784-10"."""
    if isinstance(value, (tuple, list)):
        return "-".join(str(v) for v in value)
    if value >= 2**20 and value % 2**20 == 0:
        return f"{value // 2**20}M"
    return str(value)


def _normal(rng: np.random.Generator, shape, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _bytes_moved(args: tuple, outputs: int = 1) -> float:
    """Minimum memory traffic of a one-pass elementwise or row-wise workload: read every
    input once, write ``outputs`` arrays the size of the first input."""
    read = sum(a.nbytes for a in args)
    return float(read + outputs * args[0].nbytes)


# --- gelu --------------------------------------------------------------------------------

def _gelu_inputs(n: int) -> tuple:
    return (_normal(np.random.default_rng(SEED), n),)


def _gelu(ns):
    def gelu(x):
        return ns.nn.gelu(x, approximate=True)
    return gelu


GELU = Workload(
    "gelu", "tanh-GELU on {n} float32",
    {"quick": dict(n=4096), "cpu": dict(n=16 * 2**20), "gpu": dict(n=128 * 2**20)},
    _gelu_inputs, _gelu, reference.gelu, torch_impls.gelu,
    floor="copy", floor_work=_bytes_moved,
)


# --- softmax and layernorm ---------------------------------------------------------------

ROWS = {"quick": dict(rows=64, cols=128), "cpu": dict(rows=8192, cols=1024),
        "gpu": dict(rows=65536, cols=1024)}


def _rows_inputs(rows: int, cols: int) -> tuple:
    return (_normal(np.random.default_rng(SEED), (rows, cols)),)


def _softmax(ns):
    def softmax(x):
        return ns.nn.softmax(x, axis=-1)
    return softmax


SOFTMAX = Workload(
    "softmax", "softmax over rows of {rows}x{cols} float32", ROWS,
    _rows_inputs, _softmax, reference.softmax, torch_impls.softmax,
    floor="copy", floor_work=_bytes_moved,
)


def _layernorm_inputs(rows: int, cols: int) -> tuple:
    (x,) = _rows_inputs(rows, cols)
    rng = np.random.default_rng(SEED + 1)
    d = x.shape[-1]
    return x, 1.0 + _normal(rng, d, 0.1), _normal(rng, d, 0.1)


def _layernorm_expr(ns, x, gamma, beta):
    jnp = ns.numpy
    centered = x - jnp.mean(x, axis=-1, keepdims=True)
    variance = jnp.mean(centered * centered, axis=-1, keepdims=True)
    return centered * (1.0 / jnp.sqrt(variance + LAYERNORM_EPS)) * gamma + beta


def _layernorm(ns):
    def layernorm(x, gamma, beta):
        return _layernorm_expr(ns, x, gamma, beta)
    return layernorm


LAYERNORM = Workload(
    "layernorm", "layernorm over rows of {rows}x{cols} float32", ROWS,
    _layernorm_inputs, _layernorm, reference.layernorm, torch_impls.layernorm,
    floor="copy", floor_work=_bytes_moved,
)


# --- mlp_step ----------------------------------------------------------------------------

def _mlp_inputs(widths: tuple[int, ...], batch: int) -> tuple:
    rng = np.random.default_rng(SEED)
    params = {}
    for i, (fan_in, fan_out) in enumerate(zip(widths, widths[1:]), start=1):
        params[f"w{i}"] = _normal(rng, (fan_in, fan_out), math.sqrt(2.0 / fan_in))
        params[f"b{i}"] = _normal(rng, fan_out, 0.01)
    x = _normal(rng, (batch, widths[0]))
    labels = rng.integers(0, widths[-1], batch)
    y = np.eye(widths[-1], dtype=np.float32)[labels]
    return params, x, y


def mlp_loss(ns):
    jnp = ns.numpy

    def loss(params, x, y):
        h = ns.nn.relu(x @ params["w1"] + params["b1"])
        h = ns.nn.relu(h @ params["w2"] + params["b2"])
        logits = h @ params["w3"] + params["b3"]
        return -jnp.mean(jnp.sum(y * ns.nn.log_softmax(logits, axis=-1), axis=-1))

    return loss


def _mlp_step(ns):
    value_and_grad = ns.value_and_grad(mlp_loss(ns))

    def mlp_step(params, x, y):
        loss, grads = value_and_grad(params, x, y)
        new_params = {k: params[k] - LEARNING_RATE * grads[k] for k in params}
        return new_params, loss

    return mlp_step


def _mlp_flops(args: tuple) -> float:
    """Matmul flops of one step: forward, weight gradients, and input gradients of every
    layer but the first (the data needs no gradient)."""
    params, x, _ = args
    batch = x.shape[0]
    weights = [params[f"w{i}"].size for i in (1, 2, 3)]
    return 2.0 * batch * (3 * sum(weights) - weights[0])


MLP_STEP = Workload(
    "mlp_step", "MLP {widths} SGD train step, batch {batch}",
    {"quick": dict(widths=(32, 64, 64, 10), batch=16),
     "cpu": dict(widths=(784, 1024, 1024, 10), batch=256),
     "gpu": dict(widths=(784, 1024, 1024, 10), batch=32768)},
    _mlp_inputs, _mlp_step, reference.mlp_step, torch_impls.mlp_step,
    floor="sgemm", floor_work=_mlp_flops,
)


# --- transformer -------------------------------------------------------------------------

def _transformer_inputs(d: int, seq: int, batch: int) -> tuple:
    rng = np.random.default_rng(SEED)
    params = {}
    for name, fan_in, fan_out in [("qkv", d, 3 * d), ("o", d, d), ("1", d, 4 * d), ("2", 4 * d, d)]:
        params[f"w_{name}"] = _normal(rng, (fan_in, fan_out), 1.0 / math.sqrt(fan_in))
        params[f"b_{name}"] = _normal(rng, fan_out, 0.01)
    for ln in ("ln1", "ln2"):
        params[f"{ln}_g"] = 1.0 + _normal(rng, d, 0.1)
        params[f"{ln}_b"] = _normal(rng, d, 0.1)
    return params, _normal(rng, (batch, seq, d))


def transformer_loss(ns):
    """mean(block(x)**2) for a pre-LN transformer block: causal multi-head attention and
    a tanh-GELU MLP, each behind a layernorm and added to the residual stream."""
    jnp = ns.numpy

    def split_heads(t, b, s, d):
        return jnp.transpose(jnp.reshape(t, (b, s, HEADS, d // HEADS)), (0, 2, 1, 3))

    def block(p, x):
        b, s, d = x.shape
        h = _layernorm_expr(ns, x, p["ln1_g"], p["ln1_b"])
        qkv = h @ p["w_qkv"] + p["b_qkv"]
        q, k, v = (split_heads(qkv[:, :, i * d:(i + 1) * d], b, s, d) for i in range(3))
        scores = (q @ jnp.transpose(k, (0, 1, 3, 2))) * (1.0 / math.sqrt(d // HEADS))
        causal = jnp.arange(s)[:, None] >= jnp.arange(s)[None, :]
        probs = ns.nn.softmax(jnp.where(causal, scores, MASKED_SCORE), axis=-1)
        context = jnp.reshape(jnp.transpose(probs @ v, (0, 2, 1, 3)), (b, s, d))
        x = x + context @ p["w_o"] + p["b_o"]
        h = _layernorm_expr(ns, x, p["ln2_g"], p["ln2_b"])
        h = ns.nn.gelu(h @ p["w_1"] + p["b_1"], approximate=True)
        return x + h @ p["w_2"] + p["b_2"]

    def loss(params, x):
        out = block(params, x)
        return jnp.mean(out * out)

    return loss


def _transformer(ns):
    return ns.grad(transformer_loss(ns))


TRANSFORMER = Workload(
    "transformer",
    "transformer block fwd+bwd: d_model {d}, 8 heads, seq {seq}, batch {batch}, causal",
    {"quick": dict(d=64, seq=16, batch=2), "cpu": dict(d=512, seq=256, batch=8),
     "gpu": dict(d=512, seq=256, batch=64)},
    _transformer_inputs, _transformer, reference.transformer_grads, torch_impls.transformer,
)


# --- dispatch ----------------------------------------------------------------------------

def _dispatch_inputs() -> tuple:
    return (_normal(np.random.default_rng(SEED), 8),)


def _dispatch(ns):
    def five_ops(x):
        return (x * 2.0 + 1.0) * x - ns.numpy.exp(x)
    return five_ops


DISPATCH = Workload(
    "dispatch", "per-call overhead: jitted 5-op elementwise function on 8 float32",
    {"quick": {}, "cpu": {}, "gpu": {}},
    _dispatch_inputs, _dispatch, reference.dispatch_fn, torch_impls.dispatch,
    unit="us", calls_per_sample=lambda sizes: 20 if sizes == "quick" else 2000,
)


# --- compile time ------------------------------------------------------------------------

COMPILE_COLD = CompileWorkload(
    "compile_cold", "first call of mlp_step in a fresh process, no program in the compile "
    "cache (Ember's per-host libraries are there)",
    MLP_STEP, warm=False,
)
COMPILE_WARM = CompileWorkload(
    "compile_warm", "first call of mlp_step in a fresh process, disk cache populated",
    MLP_STEP, warm=True,
)

SUITE: list[Workload | CompileWorkload] = [
    GELU, SOFTMAX, LAYERNORM, MLP_STEP, TRANSFORMER, DISPATCH, COMPILE_COLD, COMPILE_WARM,
]
