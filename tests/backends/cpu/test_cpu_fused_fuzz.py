"""Random fused programs (elementwise chains with broadcasting, views, pads and
concatenations, reductions with their results broadcast back, contractions through BLAS
or generated loops, values with several consumers, several outputs) on 'cpu' vs the reference backend."""
from __future__ import annotations

import hypothesis
import hypothesis.strategies as st
import numpy as np
from cpu_testing import assert_matches_reference, requires_cpu

from ember import lax
from ember.codegen import policy

pytestmark = requires_cpu

UNARY = ["exp", "tanh", "sin", "neg", "abs", "logistic", "floor"]
BINARY = ["add", "sub", "mul", "max", "min", "div"]


@st.composite
def shapes(draw):
    return tuple(draw(st.lists(st.integers(0, 5), min_size=1, max_size=3)))


@st.composite
def programs(draw):
    """A list of steps, each applied to the current value (see ``run``)."""
    steps = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["unary", "binary", "transpose", "reduce", "slice",
                                     "rev", "flatten", "keep", "pad", "concatenate",
                                     "matmul", "reuse"]))
        steps.append((kind, draw(st.integers(0, 1000))))
    return steps


def run(program, x, y):
    """Apply ``program`` to ``x``; ``y`` (shape of x's last axis) is broadcast in."""
    outputs, seen = [], []
    for kind, seed in program:
        choice = np.random.default_rng(seed)
        seen.append(x)
        if kind == "unary":
            x = getattr(lax, str(choice.choice(UNARY)))(x)
        elif kind == "binary" and x.ndim and x.shape[-1] == y.shape[0]:
            other = lax.broadcast_in_dim(y, x.shape, (x.ndim - 1,))
            x = getattr(lax, str(choice.choice(BINARY)))(x, other)
        elif kind == "transpose" and x.ndim > 1:
            x = lax.transpose(x, tuple(choice.permutation(x.ndim)))
        elif kind == "reduce" and x.ndim:
            axis = int(choice.integers(x.ndim))
            reduce = lax.reduce_max if choice.random() < 0.5 else lax.reduce_sum
            r = reduce(x, (axis,))
            kept = tuple(d for d in range(x.ndim) if d != axis)
            x = x - lax.broadcast_in_dim(r, x.shape, kept) if choice.random() < 0.7 else r
        elif kind == "slice" and x.ndim and x.shape[0] > 1:
            x = lax.slice(x, (1,) + (0,) * (x.ndim - 1), x.shape, (2,) + (1,) * (x.ndim - 1))
        elif kind == "rev" and x.ndim:
            x = lax.rev(x, (x.ndim - 1,))
        elif kind == "flatten" and x.ndim > 1:
            x = lax.reshape(x, (int(np.prod(x.shape)),))
        elif kind == "pad":
            config = []
            for n in x.shape:  # every padded size must stay >= 0
                lo, interior = int(choice.integers(-1 if n else 0, 3)), int(choice.integers(2))
                dilated = n + max(n - 1, 0) * interior
                config.append((lo, int(choice.integers(max(-1, -dilated - lo), 3)), interior))
            x = lax.pad(x, np.float32(0.5), config)
        elif kind == "concatenate" and x.ndim:
            x = lax.concatenate([x, lax.neg(x)], int(choice.integers(x.ndim)))
        elif kind == "matmul" and x.ndim:
            axis = int(choice.integers(x.ndim))  # contract any axis with a matrix
            matrix = choice.standard_normal((x.shape[axis], 3)).astype(np.float32)
            x = lax.dot_general(x, matrix, (((axis,), (0,)), ((), ())))
        elif kind == "reuse":  # a value with several consumers
            earlier = [v for v in seen if v.shape == x.shape]
            x = x * 0.5 + earlier[int(choice.integers(len(earlier)))]
        elif kind == "keep":
            outputs.append(x)
    return [x, *outputs]


@hypothesis.settings(max_examples=30)
@hypothesis.given(shape=shapes(), program=programs(), seed=st.integers(0, 2 ** 16),
                  blas=st.booleans())
def test_random_fused_programs_match_the_reference(shape, program, seed, blas):
    values = np.random.default_rng(seed)
    x = values.standard_normal(shape).astype(np.float32)
    y = values.standard_normal(shape[-1:]).astype(np.float32)
    saved = policy.MIN_GEMM_FLOPS
    policy.MIN_GEMM_FLOPS = 0 if blas else saved  # every product through BLAS, or none
    try:
        assert_matches_reference(lambda x, y: run(program, x, y), x, y, tolerance=(1e-4, 1e-4))
    finally:
        policy.MIN_GEMM_FLOPS = saved
