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
