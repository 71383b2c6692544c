import numpy as np

import ember
import ember.lax as lax
from ember.passes.dce import dce
from ember.passes.licm import licm


def test_invariant_work_leaves_a_scan(rewrites):
    rewrites(licm, """
    graph(w:f32[3], c:f32[3], xs:f32[5,3]) {
      d:f32[3] e:f32[5,3] = scan[body=graph(k:f32[3], u:f32[3], x:f32[3]) {
        s:f32[3] = mul k k   # m.py:1
        t:f32[3] = sin s   # m.py:2
        b:f32[3] = broadcast_in_dim[broadcast_dimensions=(), shape=(3,)] 2.0:f32
        h:f32[3] = mul t b
        p:f32[3] = mul t x
        q:f32[3] = add u p
        return (q, h)
      }, length=5, num_carry=1, num_consts=1, reverse=False, unroll=1] w c xs
      return (d, e)
    }""", """
    graph(w:f32[3], c:f32[3], xs:f32[5,3]) {
      s:f32[3] = mul w w   # m.py:1
      t:f32[3] = sin s   # m.py:2
      d:f32[3] e:f32[5,3] = scan[body=graph(k:f32[3], t:f32[3], u:f32[3], x:f32[3]) {
        b:f32[3] = broadcast_in_dim[broadcast_dimensions=(), shape=(3,)] 2.0:f32
        h:f32[3] = mul t b
        p:f32[3] = mul t x
        q:f32[3] = add u p
        return (q, h)
      }, length=5, num_carry=1, num_consts=2, reverse=False, unroll=1] w t c xs
      return (d, e)
    }""")


def test_invariant_work_leaves_a_while_condition_and_body(rewrites):
    rewrites(licm, """
    graph(n:f32[], a:f32[3]) {
      i:f32[] b:f32[3] = while[body_graph=graph(k:f32[3], i:f32[], b:f32[3]) {
        e:f32[3] = exp k
        j:f32[] = add i 1.0:f32
        d:f32[3] = mul b e
        return (j, d)
      }, body_nconsts=1, cond_graph=graph(n:f32[], i:f32[], b:f32[3]) {
        m:f32[] = mul n n
        p:bool[] = lt i m
        return (p)
      }, cond_nconsts=1] n a 0.0:f32 a
      return (b)
    }""", """
    graph(n:f32[], a:f32[3]) {
      m:f32[] = mul n n
      e:f32[3] = exp a
      i:f32[] b:f32[3] = while[body_graph=graph(k:f32[3], e:f32[3], i:f32[], b:f32[3]) {
        j:f32[] = add i 1.0:f32
        d:f32[3] = mul b e
        return (j, d)
      }, body_nconsts=2, cond_graph=graph(n:f32[], m:f32[], i:f32[], b:f32[3]) {
        p:bool[] = lt i m
        return (p)
      }, cond_nconsts=2] n m a e 0.0:f32 a
      return (b)
    }""")


def test_work_leaves_nested_loops_in_one_pass(rewrites):
    rewrites(licm, """
    graph(w:f32[], c:f32[]) {
      d:f32[] = scan[body=graph(k:f32[], u:f32[]) {
        v:f32[] = scan[body=graph(k2:f32[], u2:f32[]) {
          s:f32[] = sin k2
          r:f32[] = add u2 s
          return (r)
        }, length=3, num_carry=1, num_consts=1, reverse=False, unroll=1] k u
        return (v)
      }, length=4, num_carry=1, num_consts=1, reverse=False, unroll=1] w c
      return (d)
    }""", """
    graph(w:f32[], c:f32[]) {
      s:f32[] = sin w
      d:f32[] = scan[body=graph(k:f32[], s:f32[], u:f32[]) {
        v:f32[] = scan[body=graph(k2:f32[], s:f32[], u2:f32[]) {
          r:f32[] = add u2 s
          return (r)
        }, length=3, num_carry=1, num_consts=2, reverse=False, unroll=1] k s u
        return (v)
      }, length=4, num_carry=1, num_consts=2, reverse=False, unroll=1] w s c
      return (d)
    }""")


def test_nothing_to_hoist_leaves_the_loop_alone(rewrites):
    text = """
    graph(w:f32[], c:f32[]) {
      d:f32[] = scan[body=graph(k:f32[], u:f32[]) {
        v:f32[] = mul k u
        return (v)
      }, length=4, num_carry=1, num_consts=1, reverse=False, unroll=1] w c
      return (d)
    }"""
    rewrites(licm, text, text)


def test_traced_loops_compute_the_same(same_values):
    w = np.linspace(-1, 1, 4, dtype=np.float32)

    def f(c0, xs):
        def step(c, x):
            scale = lax.exp(lax.sin(w))  # invariant: a captured constant
            return lax.add(lax.mul(c, scale), x), lax.tanh(c)

        carry, ys = lax.scan(step, c0, xs)
        n = lax.convert_element_type(lax.reduce_sum(c0, (0,)), np.int32)
        _, repeated = lax.while_loop(lambda s: lax.lt(s[0], n),
                                     lambda s: (lax.add(s[0], 1), lax.mul(s[1], lax.cos(w))),
                                     (np.int32(0), carry))
        return carry, ys, repeated

    graph = ember.make_graph(f)(np.ones(4, np.float32), np.ones((3, 4), np.float32))
    optimized = dce(licm(graph))
    loops = [e for e in optimized.eqns if e.prim.name in ("scan", "while")]
    assert [e.prim.name for e in optimized.eqns[:2]] == ["sin", "exp"]
    for loop in loops:
        bodies = [g for k, g in loop.params.items() if k in ("body", "body_graph")]
        assert all(e.prim.name not in ("sin", "exp", "cos") for b in bodies for e in b.eqns)
    same_values(graph, optimized)
