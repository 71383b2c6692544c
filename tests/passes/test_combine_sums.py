"""combine_sums: a sum of a per-shard sum (what psum of a reduction is inside shard_map)
is one reduction; values agree within float32 rounding (the sums reassociate)."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

import ember
import ember.numpy as jnp
from ember.core.abstract import ShapedArray
from ember.core.staging import trace_to_graph
from ember.ir.parser import parse_graph
from ember.ir.printer import print_graph
from ember.passes.combine_sums import combine_sums
from ember.passes.dce import dce


def combined(graph):
    return dce(combine_sums(graph))


def test_a_sum_of_sums_is_one_sum(rewrites):
    rewrites(combined, """
        graph(x:f32[2,8,10]) {
          a:f32[2,8] = reduce_sum[axes=(2,)] x
          r:f32[2] = reduce_sum[axes=(1,)] a
          return (r)
        }""", """
        graph(x:f32[2,8,10]) {
          a:f32[2] = reduce_sum[axes=(1, 2)] x
          return (a)
        }""", exact=False)


def test_the_sum_moves_past_negation_and_scaling_by_a_splat(rewrites):
    rewrites(combined, """
        graph(x:f32[2,8]) {
          a:f32[2] = reduce_sum[axes=(1,)] x
          c:f32[2] = broadcast_in_dim[broadcast_dimensions=(), shape=(2,)] 0.125:f32
          b:f32[2] = mul a c
          n:f32[2] = neg b
          d:f32[2] = div n c
          r:f32[] = reduce_sum[axes=(0,)] d
          return (r)
        }""", """
        graph(x:f32[2,8]) {
          a:f32[] = reduce_sum[axes=(0, 1)] x
          b:f32[] = mul a 0.125:f32
          c:f32[] = neg b
          d:f32[] = div c 0.125:f32
          return (d)
        }""", exact=False)


def test_a_batched_product_summed_over_its_batch_contracts_the_batch(rewrites):
    """The last layer's weight gradient: per shard (2, 10, 64), transposed, summed."""
    rewrites(combined, """
        graph(a:f32[2,8,10], b:f32[2,8,64]) {
          d:f32[2,10,64] = dot_general[dimension_numbers=(((1,), (1,)), ((0,), (0,))), precision=None, preferred_element_type=None] a b
          t:f32[2,64,10] = transpose[permutation=(0, 2, 1)] d
          r:f32[64,10] = reduce_sum[axes=(0,)] t
          return (r)
        }""", """
        graph(a:f32[2,8,10], b:f32[2,8,64]) {
          c:f32[10,64] = dot_general[dimension_numbers=(((0, 1), (0, 1)), ((), ())), precision=None, preferred_element_type=None] a b
          d:f32[64,10] = transpose[permutation=(1, 0)] c
          return (d)
        }""", exact=False)


def test_one_all_reduce_of_concatenated_partial_sums_is_a_sum_per_piece(rewrites):
    """The partitioner sends several partial sums through one concatenated all-reduce;
    over a vmapped shard axis each slice is its own piece's sum, no concatenate."""
    rewrites(combined, """
        graph(x:f32[2,3], y:f32[2,4,5]) {
          a:f32[2,20] = reshape[new_sizes=(2, 20)] y
          c:f32[2,23] = concatenate[dimension=1] x a
          s:f32[23] = reduce_sum[axes=(0,)] c
          p:f32[3] = slice[limit_indices=(3,), start_indices=(0,), strides=(1,)] s
          q:f32[20] = slice[limit_indices=(23,), start_indices=(3,), strides=(1,)] s
          r:f32[4,5] = reshape[new_sizes=(4, 5)] q
          return (p, r)
        }""", """
        graph(x:f32[2,3], y:f32[2,4,5]) {
          a:f32[3] = reduce_sum[axes=(0,)] x
          b:f32[4,5] = reduce_sum[axes=(0,)] y
          c:f32[20] = reshape[new_sizes=(20,)] b
          r:f32[4,5] = reshape[new_sizes=(4, 5)] c
          return (a, r)
        }""")


def test_a_sum_over_size_one_axes_is_a_reshape(rewrites):
    rewrites(combined, """
        graph(x:f32[2,1,5]) {
          r:f32[2,5] = reduce_sum[axes=(1,)] x
          return (r)
        }""", """
        graph(x:f32[2,1,5]) {
          a:f32[2,5] = reshape[new_sizes=(2, 5)] x
          return (a)
        }""")


KEPT = {
    "the inner sum is read elsewhere": """
        graph(x:f32[2,8]) {
          a:f32[2] = reduce_sum[axes=(1,)] x
          r:f32[] = reduce_sum[axes=(0,)] a
          return (r, a)
        }""",
    "the sum is over the concatenated axis": """
        graph(x:f32[2,3], y:f32[2,4]) {
          c:f32[2,7] = concatenate[dimension=1] x y
          s:f32[2] = reduce_sum[axes=(1,)] c
          return (s)
        }""",
    "a slice takes part of a piece": """
        graph(x:f32[2,3], y:f32[2,4]) {
          c:f32[2,7] = concatenate[dimension=1] x y
          s:f32[7] = reduce_sum[axes=(0,)] c
          p:f32[2] = slice[limit_indices=(2,), start_indices=(0,), strides=(1,)] s
          return (p)
        }""",
    "the sum is over free axes of a product": """
        graph(a:f32[2,8,10], b:f32[2,8,64]) {
          d:f32[2,10,64] = dot_general[dimension_numbers=(((1,), (1,)), ((0,), (0,))), precision=None, preferred_element_type=None] a b
          r:f32[2,64] = reduce_sum[axes=(1,)] d
          return (r)
        }""",
    "integer quotients floor": """
        graph(x:i32[2,8]) {
          a:i32[2] = reduce_sum[axes=(1,)] x
          c:i32[2] = broadcast_in_dim[broadcast_dimensions=(), shape=(2,)] 2:i32
          b:i32[2] = div a c
          r:i32[] = reduce_sum[axes=(0,)] b
          return (r)
        }""",
    "the scale is not a splat": """
        graph(x:f32[2,8], w:f32[2]) {
          a:f32[2] = reduce_sum[axes=(1,)] x
          b:f32[2] = mul a w
          r:f32[] = reduce_sum[axes=(0,)] b
          return (r)
        }""",
}


@pytest.mark.parametrize("why", sorted(KEPT))
def test_sums_stay_where_merging_would_be_wrong_or_cost_more(why):
    graph = parse_graph(textwrap.dedent(KEPT[why]))
    assert print_graph(combined(graph)) == print_graph(graph)


@pytest.mark.parametrize("effect", [False, True])
def test_a_program_with_effects_keeps_its_sums(effect):
    """Across processes, shards are summed in their global order so that the split among
    processes changes no bit; those collectives are effectful, and so are callbacks."""
    def per_shard_then_shards(x):
        if effect:
            ember.debug.callback(lambda: None)
        return [jnp.sum(jnp.sum(x, axis=1), axis=0)]

    graph = trace_to_graph(per_shard_then_shards, [ShapedArray((2, 8), np.float32)])
    sums = [e for e in combined(graph).eqns if e.prim.name == "reduce_sum"]
    assert len(sums) == (2 if effect else 1)
