"""Transformations of traced functions: vmap, jvp, partial evaluation, transposition
and the user-facing API built on them (``ember.transforms.api``).

Importing the package hands the transformations to the higher-order primitives in
``ember.ops``, which sit below this layer and so cannot import them."""
from ember.ops import transformations as _for_ops
from ember.transforms import jvp, partial_eval, transpose, vmap

_for_ops.install(vmap=vmap.vmap, batch_trace=vmap.BatchTrace, rule_axis=vmap.rule_axis, jvp_flat=jvp.jvp_flat,
                 partial_eval_graph=partial_eval.partial_eval_graph,
                 backward_pass=transpose.backward_pass)
