"""Property: the optimized graph computes what the traced one computes, bit for bit.

Programs are random compositions of ember.lax operations (elementwise with broadcasting
and scalar constants, reductions, reshapes, transposes, slices, dot_general, scan,
while_loop, cond, checkpoint calls) on inputs that may hold inf, NaN and -0.0. The only rewrites that are
not exact (exp/log pairs, see passes/simplify.py) are never generated back to back.
"""
from __future__ import annotations

import hypothesis.strategies as st
import numpy as np
from hypothesis import given

import ember
import ember.lax as lax
from ember.ir.interpreter import eval_graph
from ember.passes.pipeline import run_pipeline

SHAPES = [(), (3,), (2, 3), (4, 1, 3)]
SPECIAL = [np.inf, -np.inf, np.nan, -0.0, 0.0]
UNARY = ["sin", "cos", "tanh", "exp", "log", "neg", "abs", "sqrt", "logistic",
         "pow0", "pow1", "pow2", "pow3", "convert"]
BINARY = ["add", "sub", "mul", "div", "max", "min"]
CONSTANTS = [0.0, -0.0, 1.0, -1.0, 2.0, 0.25, 3.0]
REDUCTIONS = ["reduce_sum", "reduce_max", "reduce_min"]
INVERSES = {"exp": "log", "log": "exp"}  # exp(log x), log(exp x) rewrite inexactly

index = st.integers(0, 1000)
steps = st.one_of(
    st.tuples(st.just("unary"), st.sampled_from(UNARY), index),
    st.tuples(st.just("constant"), st.sampled_from(BINARY), index, st.sampled_from(CONSTANTS),
              st.booleans()),
    st.tuples(st.just("binary"), st.sampled_from(BINARY), index, index),
    st.tuples(st.just("splat"), st.sampled_from(BINARY), index, st.sampled_from(CONSTANTS),
              st.sampled_from(CONSTANTS)),
    st.tuples(st.just("reduce"), st.sampled_from(REDUCTIONS), index, index),
    st.tuples(st.just("reshape"), index),
    st.tuples(st.just("transpose"), index, index),
    st.tuples(st.just("slice"), index),
    st.tuples(st.just("dot"), index),
    st.tuples(st.just("scan"), index, index, st.sampled_from(UNARY)),
    st.tuples(st.just("while"), index, index),
    st.tuples(st.just("cond"), index),
    st.tuples(st.just("checkpoint"), index, st.sampled_from(UNARY)),
)


def _unary(name: str, x):
    if name.startswith("pow"):
        return lax.integer_pow(x, int(name[3:]))
    if name == "convert":
        return lax.convert_element_type(lax.convert_element_type(x, np.float32), np.float32)
    return getattr(lax, name)(x)


def _broadcast_pair(x, y):
    """Both operands at their NumPy broadcast shape, or None if they do not broadcast."""
    try:
        shape = np.broadcast_shapes(x.aval.shape, y.aval.shape)
    except ValueError:
        return None

    def to(v):
        offset = len(shape) - v.aval.ndim
        return lax.broadcast_in_dim(v, shape, tuple(range(offset, len(shape))))

    return to(x), to(y)


class _Builder:
    """Applies the drawn steps to a pool of traced values."""

    def __init__(self, inputs: list) -> None:
        self.pool = list(inputs)
        self.last_op = [None] * len(inputs)

    def pick(self, i: int):
        k = i % len(self.pool)
        return self.pool[k], self.last_op[k]

    def add(self, value, op: str | None = None) -> None:
        self.pool.append(value)
        self.last_op.append(op)

    def step(self, kind: str, *args) -> None:
        getattr(self, f"_{kind}")(*args)

    def _unary(self, name, i):
        x, last = self.pick(i)
        if self._exact(name, last):
            self.add(_unary(name, x), name)

    @staticmethod
    def _exact(name, last):
        """Whether applying ``name`` to a value made by ``last`` rewrites exactly."""
        return last is None or INVERSES.get(name) != last

    def _constant(self, name, i, c, left):
        x, _ = self.pick(i)
        fn = getattr(lax, name)
        self.add(fn(c, x) if left else fn(x, c))

    def _binary(self, name, i, j):
        x, y = self.pick(i)[0], self.pick(j)[0]
        pair = _broadcast_pair(x, y) or (x, x)
        self.add(getattr(lax, name)(*pair))

    def _splat(self, name, i, a, b):
        x, _ = self.pick(i)
        shape = x.aval.shape
        splats = [lax.broadcast_in_dim(np.float32(v), shape, ()) for v in (a, b)]
        self.add(lax.mul(x, getattr(lax, name)(*splats)))

    def _reduce(self, name, i, mask):
        x, _ = self.pick(i)
        axes = tuple(d for d in range(x.aval.ndim) if mask >> d & 1)
        self.add(getattr(lax, name)(x, axes))

    def _reshape(self, i):
        x, _ = self.pick(i)
        self.add(lax.reshape(x, x.aval.shape[::-1]))

    def _transpose(self, i, seed):
        x, _ = self.pick(i)
        permutation = np.random.default_rng(seed).permutation(x.aval.ndim)
        self.add(lax.transpose(x, tuple(int(p) for p in permutation)))

    def _slice(self, i):
        x, _ = self.pick(i)
        if x.aval.ndim:
            limits = [max(1, d - 1) for d in x.aval.shape]
            self.add(lax.slice(x, [0] * x.aval.ndim, limits))

    def _dot(self, i):
        x, _ = self.pick(i)
        if x.aval.ndim:
            last = x.aval.ndim - 1
            self.add(lax.dot_general(x, x, (((last,), (last,)), ((), ()))))

    def _scan(self, i, j, name):
        xs, _ = self.pick(i)
        w, _ = self.pick(j)
        if not xs.aval.ndim:
            return
        row_shape = xs.aval.shape[1:]

        def body(carry, row):
            scale = _unary(name, lax.reduce_sum(w, tuple(range(w.aval.ndim))))  # invariant
            step = lax.mul(row, lax.broadcast_in_dim(scale, row_shape, ()))
            return lax.add(carry, step), lax.tanh(carry)

        carry, ys = lax.scan(body, lax.broadcast_in_dim(np.float32(0), row_shape, ()), xs)
        self.add(carry)
        self.add(ys)

    def _while(self, i, j):
        x, _ = self.pick(i)
        w, _ = self.pick(j)

        def body(state):
            k, v = state
            shift = lax.sin(lax.reduce_max(w, tuple(range(w.aval.ndim))))  # invariant
            return lax.add(k, 1), lax.add(lax.mul(v, 0.5), lax.broadcast_in_dim(
                shift, v.aval.shape, ()))

        _, out = lax.while_loop(lambda state: lax.lt(state[0], 3), body, (np.int32(0), x))
        self.add(out)

    def _cond(self, i):
        x, _ = self.pick(i)
        positive = lax.gt(lax.reduce_sum(x, tuple(range(x.aval.ndim))), 0.0)
        self.add(lax.cond(positive, lambda v: lax.sin(v), lambda v: lax.neg(v), x))

    def _checkpoint(self, i, name):
        x, last = self.pick(i)
        if self._exact(name, last):  # the call is inlined: its body meets x's producer
            self.add(ember.checkpoint(lambda v: lax.mul(_unary(name, v), 2.0))(x))


@st.composite
def programs(draw):
    shapes = draw(st.lists(st.sampled_from(SHAPES), min_size=1, max_size=3))
    program = draw(st.lists(steps, min_size=3, max_size=12))
    outputs = draw(st.one_of(st.just("all"), st.lists(index, min_size=1, max_size=3)))
    seed = draw(st.integers(0, 2**16))
    specials = draw(st.booleans())
    return shapes, program, outputs, seed, specials


def _inputs(shapes, seed, specials):
    rng = np.random.default_rng(seed)
    arrays = []
    for shape in shapes:
        values = rng.uniform(-3, 3, shape).astype(np.float32)
        if specials and values.size:
            flat = values.reshape(-1)
            count = max(1, flat.size // 3)
            flat[rng.integers(0, flat.size, count)] = rng.choice(SPECIAL, count)
        arrays.append(values)
    return arrays


def _assert_bitwise_equal(want, got):
    want, got = np.asarray(want), np.asarray(got)
    assert want.dtype == got.dtype and want.shape == got.shape
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    assert np.array_equal(want[~nan].view(np.uint32), got[~nan].view(np.uint32)), (want, got)


@given(programs())
def test_optimized_graph_equals_the_traced_graph(program):
    shapes, program_steps, outputs, seed, specials = program
    args = _inputs(shapes, seed, specials)

    def fun(*inputs):
        builder = _Builder(list(inputs))
        for step in program_steps:
            builder.step(*step)
        if outputs == "all":  # every value is observed
            return builder.pool
        return [builder.pick(i)[0] for i in outputs]  # the rest is dead code

    graph = ember.make_graph(fun)(*args)
    optimized = run_pipeline(graph, "cpu")
    with np.errstate(all="ignore"):
        for want, got in zip(eval_graph(graph, args), eval_graph(optimized, args)):
            _assert_bitwise_equal(want, got)
