"""Products (matmul, dot, tensordot, einsum, ...) and diagonals against NumPy."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ember
import ember.numpy as enp
from ember.errors import EmberValueError


def _rand(seed, shape, dtype=np.float32):
    return np.random.default_rng(seed).normal(size=shape).astype(dtype)


def _close(actual, expected, rtol=1e-4, atol=1e-4):
    actual = np.asarray(actual)
    assert actual.shape == np.shape(expected)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


@st.composite
def matmul_shapes(draw):
    batch = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=2, max_side=3))
    m, k, n = (draw(st.integers(1, 4)) for _ in range(3))
    a = (k,) if draw(st.booleans()) else (*batch.input_shapes[0], m, k)
    b = (k,) if draw(st.booleans()) else (*batch.input_shapes[1], k, n)
    return a, b


@given(shapes=matmul_shapes(), seed=st.integers(0, 99))
def test_matmul_matches_numpy(shapes, seed):
    a, b = _rand(seed, shapes[0]), _rand(seed + 1, shapes[1])
    _close(enp.matmul(a, b), np.matmul(a, b))
    _close(enp.asarray(a) @ b, a @ b)


def test_matmul_dtypes():
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    out = enp.matmul(a, a.T)
    assert out.dtype == np.int32
    _close(out, a @ a.T)
    bools = np.array([[True, False], [False, False]])
    np.testing.assert_array_equal(np.asarray(enp.matmul(bools, bools)), bools @ bools)
    assert enp.matmul(np.ones((2, 2), np.float16), np.ones(2, np.float32)).dtype == np.float32


@given(a_shape=hnp.array_shapes(min_dims=0, max_dims=3, max_side=3), seed=st.integers(0, 99))
def test_dot_inner_outer_vdot(a_shape, seed):
    a = _rand(seed, a_shape)
    b = _rand(seed + 1, (a_shape[-1], 2) if a_shape else (3,))
    _close(enp.dot(a, b), np.dot(a, b))
    c = _rand(seed + 2, (2, a_shape[-1]) if a_shape else ())
    _close(enp.inner(a, c), np.inner(a, c))
    _close(enp.outer(a, c), np.outer(a, c))
    _close(enp.vdot(a, a), np.vdot(a, a), rtol=1e-4, atol=1e-3)


TENSORDOT_CASES = [(0, (3, 2), (2,)), (1, (3, 4, 2), (2, 5)), (2, (3, 4, 2), (4, 2, 3)),
                   (([1, 0], [0, 1]), (3, 4, 2), (4, 3, 2)), (([2], [0]), (3, 4, 2), (2, 5)),
                   (((0, 2), (2, 1)), (3, 4, 2), (5, 2, 3))]


@pytest.mark.parametrize("axes,a_shape,b_shape", TENSORDOT_CASES)
def test_tensordot(axes, a_shape, b_shape):
    a, b = _rand(0, a_shape), _rand(1, b_shape)
    _close(enp.tensordot(a, b, axes), np.tensordot(a, b, axes))


@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=1, max_dims=3,
                                                max_side=3), seed=st.integers(0, 99))
def test_vecdot(shapes, seed):
    a, b = _rand(seed, shapes.input_shapes[0]), _rand(seed + 1, shapes.input_shapes[1])
    _close(enp.vecdot(a, b), np.sum(a * b, axis=-1))
    if len(shapes.result_shape) > 1:
        _close(enp.vecdot(a, b, axis=0), np.sum(np.broadcast_arrays(a, b)[0] * b, axis=0))
    z = (a + 1j * a).astype(np.complex64)
    _close(enp.vecdot(z, z), np.vecdot(z, z))


def test_matvec_vecmat_kron_cross():
    m, v = _rand(0, (2, 3, 4)), _rand(1, (4,))
    _close(enp.matvec(m, v), np.einsum("bij,j->bi", m, v))
    _close(enp.vecmat(_rand(2, (3,)), m), np.einsum("i,bij->bj", _rand(2, (3,)), m))
    a, b = _rand(3, (2, 3)), _rand(4, (3, 2))
    _close(enp.kron(a, b), np.kron(a, b))
    _close(enp.kron(a[0], b), np.kron(a[0], b))
    u, w = _rand(5, (4, 3)), _rand(6, (4, 3))
    _close(enp.cross(u, w), np.cross(u, w))
    _close(enp.cross(u[:, :2], w[:, :2]), u[:, 0] * w[:, 1] - u[:, 1] * w[:, 0])
    _close(enp.cross(u[:, :2], w), np.cross(np.pad(u[:, :2], ((0, 0), (0, 1))), w))
    _close(enp.cross(u.T, w.T, axis=0), np.cross(u.T, w.T, axis=0))


@given(shape=hnp.array_shapes(min_dims=2, max_dims=4, max_side=4), offset=st.integers(-4, 4),
       data=st.data())
def test_diagonal_trace(shape, offset, data):
    x = _rand(0, shape)
    a1, a2 = data.draw(st.lists(st.integers(-len(shape), len(shape) - 1), min_size=2,
                                max_size=2, unique_by=lambda a: a % len(shape)))
    _close(enp.diagonal(x, offset, a1, a2), np.diagonal(x, offset, a1, a2))
    _close(enp.trace(x, offset, a1, a2), np.trace(x, offset, a1, a2))
    _close(enp.linalg.diagonal(x, offset=offset), np.diagonal(x, offset, -2, -1))
    _close(enp.linalg.trace(x, offset=offset), np.trace(x, offset, -2, -1))


@pytest.mark.parametrize("k", [-2, 0, 1, 3])
def test_diag_diagflat(k):
    v = np.arange(1.0, 4.0)
    _close(enp.diag(v, k), np.diag(v, k))
    m = np.arange(12.0).reshape(3, 4)
    _close(enp.diag(m, k), np.diag(m, k))
    _close(enp.diagflat(m[:2, :2], k), np.diagflat(m[:2, :2], k))


EINSUM_CASES = [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("ij,jk", [(2, 3), (3, 4)]), ("bij,bjk->bik", [(2, 2, 3),
                                                                               (2, 3, 4)]),
    ("ii->i", [(3, 3)]), ("ii", [(3, 3)]), ("ij->ji", [(2, 3)]), ("ij->", [(2, 3)]),
    ("i,i->", [(4,), (4,)]), ("i,j->ij", [(2,), (3,)]), ("...ij,...jk->...ik", [(2, 1, 2, 3),
                                                                               (4, 3, 5)]),
    ("ij,ij->i", [(3, 4), (3, 4)]), ("ijk,jil->kl", [(2, 3, 4), (3, 2, 5)]),
    ("abc,cd,de->abe", [(2, 3, 4), (4, 5), (5, 2)]), ("i...->...", [(2, 3, 4)]),
    ("iij->j", [(3, 3, 2)]), ("ij,kj->ikj", [(2, 3), (4, 3)]), ("bi,bi,bi->b",
                                                                 [(2, 3), (2, 3), (2, 3)]),
    ("ij,j->i", [(1, 3), (3,)]), ("ik,jk->ijk", [(2, 1), (3, 4)]),
    ("ij,jk,k->i", [(5, 6), (6, 7), (7,)]), ("ab,bc,cd,de,ef->af", [(2, 3), (3, 4), (4, 5),
                                                                   (5, 6), (6, 2)]),
    ("ii,ij,j...->i...", [(3, 3), (3, 4), (4, 1, 2)]), ("a,b,c,ab,bc->", [(2,), (3,), (4,),
                                                                          (2, 3), (3, 4)]),
    ("ijk,kl,li,j->", [(2, 3, 4), (4, 5), (5, 2), (3,)]),
]


@pytest.mark.parametrize("optimize", ["optimal", "greedy", False])
@pytest.mark.parametrize("subscripts,shapes", EINSUM_CASES, ids=[c[0] for c in EINSUM_CASES])
def test_einsum_matches_numpy(subscripts, shapes, optimize):
    operands = [_rand(i, s) for i, s in enumerate(shapes)]
    _close(enp.einsum(subscripts, *operands, optimize=optimize), np.einsum(subscripts, *operands))


def test_einsum_contracts_in_the_cheapest_order():
    from ember.passes.analysis import cost_of_graph

    operands = [np.ones((300, 200), np.float32), np.ones((200, 100), np.float32),
                np.ones(100, np.float32)]

    def flops(optimize):
        graph = ember.make_graph(lambda *ops: enp.einsum("ij,jk,k->i", *ops,
                                                         optimize=optimize))(*operands)
        return cost_of_graph(graph)["flops"]

    # two matrix-vector products, not a matrix product first
    assert flops("optimal") <= 2 * (200 * 100 + 300 * 200) * 1.01
    assert flops(False) >= 2 * 300 * 200 * 100


def test_einsum_errors():
    with pytest.raises(EmberValueError, match="2 input terms in 'ij,jk' for 1 operands"):
        enp.einsum("ij,jk", np.ones((2, 2)))
    with pytest.raises(EmberValueError, match="subscript 'j' has sizes 3 and 4"):
        enp.einsum("ij,jk", np.ones((2, 3)), np.ones((4, 2)))
    with pytest.raises(EmberValueError, match="term 'ijk' does not match an operand of 2 "
                                              "dimensions"):
        enp.einsum("ijk", np.ones((2, 3)))
    with pytest.raises(EmberValueError, match="output subscript 'z'"):
        enp.einsum("ij->z", np.ones((2, 3)))


def test_product_errors():
    with pytest.raises(EmberValueError, match=r"matmul: the last axis of \(2, 3\) and the "
                                              r"second-to-last axis of \(2, 3\) differ"):
        enp.matmul(np.ones((2, 3)), np.ones((2, 3)))
    with pytest.raises(EmberValueError, match="operands must be at least 1-D"):
        enp.matmul(np.ones(3), 2.0)
    with pytest.raises(EmberValueError, match=r"shapes \(2, 3\) and \(2,\) are not aligned"):
        enp.dot(np.ones((2, 3)), np.ones(2))
    with pytest.raises(EmberValueError, match="diagonal: axis1 and axis2 must differ"):
        enp.diagonal(np.ones((2, 2)), 0, 1, 1)


def test_products_under_jit_match_eager():
    def f(a, b):
        return (a @ b, enp.einsum("ij,jk->ki", a, b), enp.tensordot(a, b, 1), enp.trace(a @ b),
                enp.diagonal(a, 1), enp.outer(a[0], b[:, 0]))

    a, b = _rand(0, (3, 4)), _rand(1, (4, 3))
    with ember.config.override(backend="reference"):
        for eager, jitted in zip(f(a, b), ember.jit(f)(a, b)):
            np.testing.assert_array_equal(np.asarray(eager), np.asarray(jitted))


def test_matmul_with_a_matrix_is_one_unbatched_gemm():
    """(..., m, k) @ (k, n) must not copy the right operand per batch (one plain GEMM)."""
    graph = ember.make_graph(enp.matmul)(np.ones((4, 3, 5), np.float32),
                                         np.ones((5, 2), np.float32))
    names = [e.prim.name for e in graph.eqns]
    assert names == ["dot_general"]
    assert graph.eqns[0].params["dimension_numbers"] == (((2,), (0,)), ((), ()))


@pytest.mark.parametrize("name", ["matmul", "dot", "inner", "tensordot", "vdot", "vecdot"])
def test_preferred_element_type_sets_the_result_dtype_as_jax(name):
    rng = np.random.default_rng(0)
    a = rng.normal(size=(3, 4)).astype(np.float32)
    b = rng.normal(size=(4, 4) if name in ("matmul", "dot", "tensordot") else (3, 4))
    b = b.astype(np.float32)
    low = [enp.asarray(v, enp.bfloat16) for v in (a, b)]
    extra = {"axes": 1} if name == "tensordot" else {}
    ours = getattr(enp, name)(*low, preferred_element_type=np.float32, precision="highest",
                              **extra)
    assert ours.dtype == np.float32
    exact = [np.asarray(v).astype(np.float64) for v in low]
    expected = np.vecdot(*exact) if name == "vecdot" else getattr(np, name)(*exact, **extra)
    np.testing.assert_allclose(np.asarray(ours), expected, rtol=1e-5, atol=1e-5)
    assert enp.dot(2, a, preferred_element_type=np.int32).dtype == np.int32
    jnp = pytest.importorskip("jax.numpy")
    theirs = getattr(jnp, name)(*[jnp.asarray(v, jnp.bfloat16) for v in (a, b)],
                                preferred_element_type=np.float32, precision="highest", **extra)
    assert theirs.dtype == ours.dtype
