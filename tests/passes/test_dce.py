import numpy as np

import ember
import ember.lax as lax
from ember.ir.parser import parse_graph
from ember.passes.dce import dce, needed_inputs


def test_drops_unused_equations_and_constants(rewrites):
    rewrites(dce, """
    graph(a:f32[3]) consts(w:f32[3]=[1.0, 2.0, 3.0], v:f32[3]=[4.0, 5.0, 6.0]) {
      b:f32[3] = sin a   # m.py:1
      c:f32[3] = mul b w   # m.py:2
      d:f32[3] = cos v   # m.py:3
      e:f32[3] = exp d   # m.py:4
      return (c)
    }""", """
    graph(a:f32[3]) consts(w:f32[3]=[1.0, 2.0, 3.0]) {
      b:f32[3] = sin a   # m.py:1
      c:f32[3] = mul b w   # m.py:2
      return (c)
    }""")


def test_keeps_inputs_and_literal_outputs(rewrites):
    rewrites(dce, """
    graph(a:f32[3], b:i32[]) {
      c:f32[3] = sin a
      return (1.0:f32, b)
    }""", """
    graph(a:f32[3], b:i32[]) {
      return (1.0:f32, b)
    }""")


def test_cleans_inside_nested_graphs(rewrites):
    rewrites(dce, """
    graph(a:i32[], b:f32[3]) {
      c:f32[3] = cond[branches=(graph(x:f32[3]) {
        y:f32[3] = sin x
        z:f32[3] = cos x
        return (z)
      }, graph(x:f32[3]) {
        return (x)
      })] a b
      return (c)
    }""", """
    graph(a:i32[], b:f32[3]) {
      c:f32[3] = cond[branches=(graph(x:f32[3]) {
        z:f32[3] = cos x
        return (z)
      }, graph(x:f32[3]) {
        return (x)
      })] a b
      return (c)
    }""")


def test_cond_loses_unused_outputs_and_unread_operands(rewrites):
    rewrites(dce, """
    graph(a:i32[], b:f32[3], c:f32[3]) {
      d:f32[3] e:f32[3] = cond[branches=(graph(x:f32[3], y:f32[3]) {
        z:f32[3] = sin x
        w:f32[3] = cos y
        return (z, w)
      }, graph(x:f32[3], y:f32[3]) {
        return (x, y)
      })] a b c
      return (d)
    }""", """
    graph(a:i32[], b:f32[3], c:f32[3]) {
      d:f32[3] = cond[branches=(graph(x:f32[3]) {
        z:f32[3] = sin x
        return (z)
      }, graph(x:f32[3]) {
        return (x)
      })] a b
      return (d)
    }""")


SCAN = """
graph(a:f32[3], b:f32[5,3]) {
  c:f32[3] d:f32[3] e:f32[5,3] f:f32[5,3] = scan[body=graph(k:f32[3], u:f32[3], v:f32[3], x:f32[3]) {
    p:f32[3] = add u x
    q:f32[3] = mul v u
    r:f32[3] = sin u
    s:f32[3] = cos v
    return (p, q, r, s)
  }, length=5, num_carry=2, num_consts=1, reverse=False, unroll=1] a a a b
  return (%s)
}"""


def test_scan_keeps_only_live_carries_ys_and_operands(rewrites):
    rewrites(dce, SCAN % "c, e", """
    graph(a:f32[3], b:f32[5,3]) {
      c:f32[3] e:f32[5,3] = scan[body=graph(u:f32[3], x:f32[3]) {
        p:f32[3] = add u x
        r:f32[3] = sin u
        return (p, r)
      }, length=5, num_carry=1, num_consts=0, reverse=False, unroll=1] a b
      return (c, e)
    }""")


def test_scan_keeps_carries_that_live_values_read(rewrites):
    # ys 'f' reads carry v, whose update reads carry u, whose update reads x: all three
    # stay although the final carries 'c' and 'd' are unused; 'r' and the const go.
    rewrites(dce, SCAN % "f", """
    graph(a:f32[3], b:f32[5,3]) {
      c:f32[3] d:f32[3] f:f32[5,3] = scan[body=graph(u:f32[3], v:f32[3], x:f32[3]) {
        p:f32[3] = add u x
        q:f32[3] = mul v u
        s:f32[3] = cos v
        return (p, q, s)
      }, length=5, num_carry=2, num_consts=0, reverse=False, unroll=1] a a b
      return (f)
    }""")


def test_while_drops_carries_nothing_live_reads(rewrites):
    rewrites(dce, """
    graph(a:f32[3], n:i32[]) {
      i:i32[] b:f32[3] c:f32[3] = while[body_graph=graph(k:f32[3], i:i32[], b:f32[3], c:f32[3]) {
        j:i32[] = add i 1:i32
        d:f32[3] = mul b k
        e:f32[3] = sin c
        return (j, d, e)
      }, body_nconsts=1, cond_graph=graph(n:i32[], i:i32[], b:f32[3], c:f32[3]) {
        p:bool[] = lt i n
        return (p)
      }, cond_nconsts=1] n a 0:i32 a a
      return (b)
    }""", """
    graph(a:f32[3], n:i32[]) {
      i:i32[] b:f32[3] = while[body_graph=graph(k:f32[3], i:i32[], b:f32[3]) {
        j:i32[] = add i 1:i32
        d:f32[3] = mul b k
        return (j, d)
      }, body_nconsts=1, cond_graph=graph(n:i32[], i:i32[], b:f32[3]) {
        p:bool[] = lt i n
        return (p)
      }, cond_nconsts=1] n a 0:i32 a
      return (b)
    }""")


def test_whole_dead_loop_goes():
    graph = parse_graph(SCAN % "a")
    assert dce(graph).eqns == []


def test_needed_inputs():
    graph = parse_graph("graph(a:f32[], b:f32[], c:f32[]) {\n  d:f32[] = add a b\n"
                        "  return (d, c)\n}")
    assert needed_inputs(graph, [True, False]) == [True, True, False]
    assert needed_inputs(graph, [False, True]) == [False, False, True]


def test_traced_loops_keep_their_values(same_values):
    def f(x, xs):
        def body(carry, x_t):
            a, b = carry
            return (lax.add(a, x_t), lax.mul(b, x_t)), lax.sin(x_t)

        (a, _), _ = lax.scan(body, (x, x), xs)
        return a

    graph = ember.make_graph(f)(np.ones(3, np.float32), np.ones((4, 3), np.float32))
    pruned = dce(graph)
    body = pruned.eqns[0].params["body"]
    assert len(pruned.eqns[0].outputs) == 1 and [e.prim.name for e in body.eqns] == ["add"]
    same_values(graph, pruned)
