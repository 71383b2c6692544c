import numpy as np

import ember
import ember.lax as lax
from ember.passes.cse import cse
from ember.passes.dce import dce


def test_repeated_equations_reuse_the_first(rewrites):
    rewrites(cse, """
    graph(a:f32[3], b:f32[3]) {
      c:f32[3] = sin a   # m.py:1
      d:f32[3] = sin a   # m.py:2
      e:f32[3] = add c b   # m.py:3
      f:f32[3] = add d b   # m.py:4
      g:f32[3] = mul e f   # m.py:5
      return (g, d)
    }""", """
    graph(a:f32[3], b:f32[3]) {
      c:f32[3] = sin a   # m.py:1
      e:f32[3] = add c b   # m.py:3
      g:f32[3] = mul e e   # m.py:5
      return (g, c)
    }""")


def test_commutative_operands_match_in_any_order(rewrites):
    rewrites(cse, """
    graph(a:f32[3], b:f32[3]) {
      c:f32[3] = mul a b
      d:f32[3] = mul b a
      e:f32[3] = sub a b
      f:f32[3] = sub b a
      return (c, d, e, f)
    }""", """
    graph(a:f32[3], b:f32[3]) {
      c:f32[3] = mul a b
      e:f32[3] = sub a b
      f:f32[3] = sub b a
      return (c, c, e, f)
    }""")


def test_params_and_literals_must_match(rewrites):
    rewrites(cse, """
    graph(a:f32[2,3]) {
      b:f32[3,2] = transpose[permutation=(1, 0)] a
      c:f32[3,2] = transpose[permutation=(1, 0)] a
      d:f32[6] = reshape[new_sizes=(6,)] a
      e:f32[3] = reduce_sum[axes=(0,)] a
      f:f32[2] = reduce_sum[axes=(1,)] a
      g:f32[] = add 0.0:f32 1.0:f32
      h:f32[] = add -0.0:f32 1.0:f32
      i:f32[] = add 0.0:f32 1.0:f32
      return (b, c, d, e, f, g, h, i)
    }""", """
    graph(a:f32[2,3]) {
      b:f32[3,2] = transpose[permutation=(1, 0)] a
      d:f32[6] = reshape[new_sizes=(6,)] a
      e:f32[3] = reduce_sum[axes=(0,)] a
      f:f32[2] = reduce_sum[axes=(1,)] a
      g:f32[] = add 0.0:f32 1.0:f32
      h:f32[] = add -0.0:f32 1.0:f32
      return (b, b, d, e, f, g, h, g)
    }""")


def test_multiple_results_and_random_bits_are_shared(rewrites):
    rewrites(cse, """
    graph(k:u32[2], c:u32[2]) {
      a:u32[2] b:u32[2] = threefry2x32 k k c c
      d:u32[2] e:u32[2] = threefry2x32 k k c c
      return (a, b, d, e)
    }""", """
    graph(k:u32[2], c:u32[2]) {
      a:u32[2] b:u32[2] = threefry2x32 k k c c
      return (a, b, a, b)
    }""")


def test_inside_nested_graphs_but_not_across(rewrites):
    rewrites(cse, """
    graph(a:i32[], b:f32[3]) {
      s:f32[3] = sin b
      c:f32[3] = cond[branches=(graph(x:f32[3]) {
        y:f32[3] = sin x
        z:f32[3] = sin x
        w:f32[3] = add y z
        return (w)
      }, graph(x:f32[3]) {
        return (x)
      })] a b
      return (s, c)
    }""", """
    graph(a:i32[], b:f32[3]) {
      s:f32[3] = sin b
      c:f32[3] = cond[branches=(graph(x:f32[3]) {
        y:f32[3] = sin x
        w:f32[3] = add y y
        return (w)
      }, graph(x:f32[3]) {
        return (x)
      })] a b
      return (s, c)
    }""")


def test_sin_plus_sin_computes_sin_once(same_values):
    graph = ember.make_graph(lambda x: lax.add(lax.sin(x), lax.sin(x)))(np.ones(4, np.float32))
    optimized = dce(cse(graph))
    assert [e.prim.name for e in optimized.eqns] == ["sin", "add"]
    same_values(graph, optimized)
