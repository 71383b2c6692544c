import numpy as np, ember
from collections import Counter
from ember.sharding import NamedSharding
from tests.sharding.test_partition_programs import PROGRAMS, SPECS
from ember import P
with ember.config.override(num_cpu_devices=8):
    mesh = ember.make_mesh((4, 2), ("data", "model"), devices=ember.devices("reference"))
    total = Counter(); prims = Counter()
    x = np.ones((8, 16), np.float32)
    for name, fun in PROGRAMS.items():
        for k, (sx, sy) in enumerate(zip(SPECS, SPECS[3:] + SPECS[:3])):
            c = ember.jit(fun, in_shardings=(NamedSharding(mesh, sx), NamedSharding(mesh, sy)), backend="reference").lower(x, x).compile()
            total.update(c.kind for c in c.spmd_program.collectives)
            prims.update(e.prim.name for e in c.spmd_program.graph.eqns if e.prim.name in ("pmax","pmin","psum","axis_index"))
    print(total, prims)
