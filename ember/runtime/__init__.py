"""Runtime: arrays, devices, eager dispatch, jit and the compile cache."""
