import numpy as np

import ember
import ember.numpy as jnp
from ember.passes.barriers import drop_barriers
from ember.transforms.calls import inline_calls


def test_barriers_are_dropped_and_values_flow_through():
    f = ember.grad(lambda x: jnp.sum(ember.checkpoint(lambda v: jnp.sin(v) * v)(x)))
    graph = inline_calls(ember.make_graph(f)(np.ones(3, np.float32)))
    assert any(e.prim.name == "optimization_barrier" for e in graph.eqns)
    dropped = drop_barriers(graph)
    assert not any(e.prim.name == "optimization_barrier" for e in dropped.eqns)
    from ember.ir.interpreter import eval_graph

    x = np.linspace(0, 1, 3).astype(np.float32)
    np.testing.assert_allclose(eval_graph(dropped, [x])[0], eval_graph(graph, [x])[0])
