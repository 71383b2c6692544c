import numpy as np

import ember
import ember.lax as lax
from ember.ir.parser import parse_graph
from ember.passes.constant_folding import FOLD_LIMIT, fold_constants
from ember.passes.dce import dce


def fold_and_clean(graph):
    return dce(fold_constants(graph))


def test_scalar_expressions_become_literals(rewrites):
    rewrites(fold_and_clean, """
    graph(a:f32[]) {
      b:f32[] = add 1.0:f32 2.0:f32
      c:f32[] = exp b
      d:f32[] = mul a c
      e:i32[] = convert_element_type[new_dtype=i32] c
      return (d, e)
    }""", """
    graph(a:f32[]) {
      d:f32[] = mul a 20.085537:f32
      return (d, 20:i32)
    }""")


def test_splats_stay_lazy_however_large(rewrites):
    rewrites(fold_and_clean, """
    graph(a:f32[4096,4096]) {
      b:f32[4096,4096] = broadcast_in_dim[broadcast_dimensions=(), shape=(4096, 4096)] 1.0:f32
      c:f32[4096,4096] = broadcast_in_dim[broadcast_dimensions=(), shape=(4096, 4096)] 2.0:f32
      d:f32[4096,4096] = mul b c
      e:f32[4096,4096] = add d b
      f:f32[4096,4096] = add a e
      return (f)
    }""", """
    graph(a:f32[4096,4096]) {
      e:f32[4096,4096] = broadcast_in_dim[broadcast_dimensions=(), shape=(4096, 4096)] 3.0:f32
      f:f32[4096,4096] = add a e
      return (f)
    }""")


def test_layout_ops_of_splats_are_splats(rewrites):
    rewrites(fold_and_clean, """
    graph(a:f32[3,2]) {
      b:f32[2,3] = broadcast_in_dim[broadcast_dimensions=(), shape=(2, 3)] 0.5:f32
      c:f32[3,2] = transpose[permutation=(1, 0)] b
      d:f32[6] = reshape[new_sizes=(6,)] c
      e:f32[6] = neg d
      f:f32[3,2] = reshape[new_sizes=(3, 2)] e
      g:f32[3,2] = add a f
      return (g)
    }""", """
    graph(a:f32[3,2]) {
      f:f32[3,2] = broadcast_in_dim[broadcast_dimensions=(), shape=(3, 2)] -0.5:f32
      g:f32[3,2] = add a f
      return (g)
    }""")


def test_small_constants_fold_into_constants(rewrites):
    rewrites(fold_and_clean, """
    graph(a:f32[3]) consts(w:f32[3]=[0.0, 1.0, 2.0]) {
      b:f32[3] = mul w w
      c:f32[3] = add b w
      d:f32[] = reduce_sum[axes=(0,)] c
      e:f32[3] = mul a c
      return (e, d)
    }""", """
    graph(a:f32[3]) consts(c:f32[3]=[0.0, 2.0, 6.0]) {
      e:f32[3] = mul a c
      return (e, 8.0:f32)
    }""")


def test_large_constants_are_neither_read_nor_made():
    big = np.ones(FOLD_LIMIT + 1, np.float32)
    graph = parse_graph(f"""graph() consts(w:f32[{FOLD_LIMIT + 1}]) {{
      b:f32[{FOLD_LIMIT + 1}] = sin w
      return (b)
    }}""", {"w": big})
    assert [e.prim.name for e in fold_constants(graph).eqns] == ["sin"]
    small = parse_graph(f"""graph() consts(w:f32[4]=[1.0, 2.0, 3.0, 4.0]) {{
      b:f32[{FOLD_LIMIT + 1}] = broadcast_in_dim[broadcast_dimensions=(), shape=({FOLD_LIMIT + 1},)] 1.0:f32
      c:f32[4,{FOLD_LIMIT + 1}] = broadcast_in_dim[broadcast_dimensions=(0,), shape=(4, {FOLD_LIMIT + 1})] w
      return (b, c)
    }}""")
    assert [e.prim.name for e in fold_constants(small).eqns] == ["broadcast_in_dim"] * 2


def test_generators_stay_lazy(rewrites):
    rewrites(fold_and_clean, """
    graph(a:i32[8]) {
      b:i32[8] = iota[dimension=0, dtype=i32, shape=(8,)]
      c:i32[8] = add a b
      return (c)
    }""", """
    graph(a:i32[8]) {
      b:i32[8] = iota[dimension=0, dtype=i32, shape=(8,)]
      c:i32[8] = add a b
      return (c)
    }""")


def test_nested_graphs_fold_to_literals_and_splats_only(rewrites):
    rewrites(fold_and_clean, """
    graph(i:i32[], a:f32[2]) {
      b:f32[2] = cond[branches=(graph(x:f32[2]) {
        s:f32[] = mul 2.0:f32 3.0:f32
        t:f32[2] = broadcast_in_dim[broadcast_dimensions=(), shape=(2,)] s
        u:f32[2] = exp t
        v:f32[2] = add x u
        return (v)
      }, graph(x:f32[2]) {
        return (x)
      })] i a
      return (b)
    }""", """
    graph(i:i32[], a:f32[2]) {
      b:f32[2] = cond[branches=(graph(x:f32[2]) {
        u:f32[2] = broadcast_in_dim[broadcast_dimensions=(), shape=(2,)] 403.42877:f32
        v:f32[2] = add x u
        return (v)
      }, graph(x:f32[2]) {
        return (x)
      })] i a
      return (b)
    }""")


def test_folded_values_match_the_reference_bit_for_bit(same_values):
    def f(x):
        c = lax.broadcast_in_dim(np.float32(0.1), (3,), ())
        k = lax.div(lax.sin(c), lax.sqrt(lax.add(c, c)))
        return lax.mul(x, lax.exp(k)), lax.convert_element_type(lax.gt(k, 0.2), np.int32)

    graph = ember.make_graph(f)(np.ones(3, np.float32))
    folded = fold_and_clean(graph)
    assert [e.prim.name for e in folded.eqns] == ["broadcast_in_dim", "mul",
                                                  "broadcast_in_dim"]
    same_values(graph, folded)
