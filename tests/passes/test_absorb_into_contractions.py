"""Golden IR for the contraction stage's scale rule: a scalar multiple of a GEMM operand
becomes a multiple of the product (the GEMM's alpha later), and only where that is safe."""
from __future__ import annotations

import textwrap

from ember.codegen.policy import gemm_eligible
from ember.ir.parser import parse_graph
from ember.ir.printer import print_graph
from ember.passes.fusion import FusionPolicy, absorb_into_contractions

POLICY = FusionPolicy(native=lambda eqn: True, library=gemm_eligible)
DOT = ("dot_general[dimension_numbers=(((1,), (0,)), ((), ())), precision=None, "
       "preferred_element_type=None]")


def test_a_scaled_operand_scales_the_product(rewrites):
    before = f"""
        graph(a:f32[64,96], b:f32[96,128]) {{
          c:f32[64,96] = broadcast_in_dim[broadcast_dimensions=(), shape=(64, 96)] 0.5:f32
          d:f32[64,96] = mul a c
          e:f32[64,128] = {DOT} d b
          return (e)
        }}"""
    # (d is left for dead: fusion computes nothing no one reads)
    after = f"""
        graph(a:f32[64,96], b:f32[96,128]) {{
          c:f32[64,96] = broadcast_in_dim[broadcast_dimensions=(), shape=(64, 96)] 0.5:f32
          d:f32[64,96] = mul a c
          f:f32[64,128] = {DOT} a b
          g:f32[64,128] = broadcast_in_dim[broadcast_dimensions=(), shape=(64, 128)] 0.5:f32
          e:f32[64,128] = mul f g
          return (e)
        }}"""
    rewrites(lambda graph: absorb_into_contractions(graph, POLICY), before, after, exact=False)


def test_a_scaled_operand_read_elsewhere_stays():
    text = f"""
        graph(a:f32[64,96], b:f32[96,128]) {{
          c:f32[64,96] = broadcast_in_dim[broadcast_dimensions=(), shape=(64, 96)] 0.5:f32
          d:f32[64,96] = mul a c
          e:f32[64,128] = {DOT} d b
          return (e, d)
        }}"""
    graph = parse_graph(textwrap.dedent(text))
    assert print_graph(absorb_into_contractions(graph, POLICY)) == print_graph(graph)


def test_a_product_its_consumer_transposes_keeps_its_scaled_operand(rewrites):
    """The transpose is absorbed (the operands swap) and the scale stays where it is: the
    rule would hide the product from the consumer that absorbs it."""
    before = f"""
        graph(a:f32[64,96], b:f32[96,128]) {{
          c:f32[64,96] = broadcast_in_dim[broadcast_dimensions=(), shape=(64, 96)] 0.5:f32
          d:f32[64,96] = mul a c
          e:f32[64,128] = {DOT} d b
          f:f32[128,64] = transpose[permutation=(1, 0)] e
          return (f)
        }}"""
    swapped = DOT.replace("(((1,), (0,))", "(((0,), (1,))")
    after = f"""
        graph(a:f32[64,96], b:f32[96,128]) {{
          c:f32[64,96] = broadcast_in_dim[broadcast_dimensions=(), shape=(64, 96)] 0.5:f32
          d:f32[64,96] = mul a c
          f:f32[128,64] = {swapped} b d
          return (f)
        }}"""
    rewrites(lambda graph: absorb_into_contractions(graph, POLICY), before, after, exact=False)
