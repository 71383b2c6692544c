"""``ember.sharding``: meshes, partition specs, shardings and placement (as
``jax.sharding``), and ``shard_map`` for per-device programs."""
from ember.sharding.mesh import AxisType, Mesh, get_mesh, make_mesh, set_mesh
from ember.sharding.partition_spec import P, PartitionSpec
from ember.sharding.placement import reshard
from ember.sharding.shardings import NamedSharding, Shard, Sharding, SingleDeviceSharding

__all__ = ["AxisType", "Mesh", "NamedSharding", "P", "PartitionSpec", "Shard", "Sharding",
           "SingleDeviceSharding", "get_mesh", "make_mesh", "reshard", "set_mesh"]
