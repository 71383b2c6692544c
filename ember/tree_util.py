"""``ember.tree_util``: pytrees, as ``jax.tree_util``."""
from ember.core.pytree import (  # noqa: F401
    PyTreeDef,
    register_dataclass,
    register_pytree_node,
    register_pytree_node_class,
    tree_all,
    tree_flatten,
    tree_leaves,
    tree_map,
    tree_reduce,
    tree_structure,
    tree_transpose,
    tree_unflatten,
    treedef_children,
    treedef_is_leaf,
)
