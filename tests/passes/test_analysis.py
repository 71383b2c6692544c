import numpy as np

import ember
import ember.lax as lax
from ember.ir.parser import parse_graph
from ember.passes.analysis import cost_of_graph, peak_memory


def test_peak_memory_of_a_chain_frees_dead_values():
    graph = parse_graph("""
    graph(a:f32[100]) {
      b:f32[100] = sin a
      c:f32[100] = cos b
      d:f32[100] = exp c
      return (d)
    }""")
    memory = peak_memory(graph)
    assert memory == {"peak_bytes": 1200, "argument_bytes": 400, "output_bytes": 400,
                      "temp_bytes": 800}


def test_peak_memory_keeps_values_live_until_their_last_use():
    graph = parse_graph("""
    graph(a:f32[100]) {
      b:f32[100] = sin a
      c:f32[100] = cos a
      d:f32[100] = exp c
      e:f32[100] = add b d
      return (e)
    }""")
    # At 'e': b, d and e are live next to the argument (c died at 'd').
    assert peak_memory(graph)["peak_bytes"] == 400 * 4
    assert peak_memory(graph)["temp_bytes"] == 400 * 3


def test_peak_memory_counts_unused_outputs_only_at_their_definition():
    graph = parse_graph("""
    graph(a:f32[10]) {
      b:f32[1000] = broadcast_in_dim[broadcast_dimensions=(), shape=(1000,)] 1.0:f32
      c:f32[10] = sin a
      return (c)
    }""")
    assert peak_memory(graph) == {"peak_bytes": 4040, "argument_bytes": 40,
                                  "output_bytes": 40, "temp_bytes": 4000}


def test_reference_backend_reports_memory_and_cost():
    def f(x):
        return lax.add(lax.exp(lax.sin(x)), 1.0)

    compiled = ember.jit(f, backend="reference").lower(np.ones((8, 8), np.float32)).compile()
    memory = compiled.memory_analysis()
    assert memory["argument_bytes"] == 256 and memory["output_bytes"] == 256
    assert memory["peak_bytes"] >= 512
    assert compiled.cost_analysis()["flops"] > 0


def test_cost_counts_every_equation():
    graph = parse_graph("""
    graph(a:f32[4]) {
      b:f32[4] = sin a
      c:f32[4] = add a b
      return (c)
    }""")
    assert cost_of_graph(graph) == {"flops": 8.0, "bytes accessed": 16.0 * 5}


def test_peak_memory_adds_what_a_loop_body_needs_while_it_runs():
    graph = parse_graph("""
    graph(a:f32[10], xs:f32[5,10]) {
      c:f32[10] = scan[body=graph(u:f32[10], x:f32[10]) {
        p:f32[10] = sin x
        q:f32[10] = cos p
        r:f32[10] = add u q
        return (r)
      }, length=5, num_carry=1, num_consts=0, reverse=False, unroll=1] a xs
      return (c)
    }""")
    body = peak_memory(graph.eqns[0].params["body"])
    assert body["temp_bytes"] == 80  # p and q live together; r is the body's output
    memory = peak_memory(graph)
    assert memory["argument_bytes"] == 240 and memory["output_bytes"] == 40
    assert memory["peak_bytes"] == 240 + 40 + 80 + 40


def test_checkpoint_lowers_the_peak_memory_of_a_gradient():
    import ember.numpy as jnp

    def loss(checkpointed):
        def layer(w, x):
            return jnp.tanh(x @ w)

        def f(ws, x):
            for w in ws:
                x = (ember.checkpoint(layer) if checkpointed else layer)(w, x)
            return jnp.sum(x)
        return f

    ws = [np.full((32, 32), 0.01, np.float32)] * 6
    x = np.ones((64, 32), np.float32)
    peaks = [ember.jit(ember.grad(loss(c)), backend="reference").lower(ws, x).compile()
             .memory_analysis()["peak_bytes"] for c in (False, True)]
    assert peaks[1] < peaks[0]
