"""Child process of the compile_cold and compile_warm workloads.

``python -m ember.bench.compile_probe LOADER WORKLOAD [--quick]`` loads a framework's
namespace, builds the workload's inputs on the device, then times the first call of the
jitted workload: tracing, compiling (or loading from the persistent cache) and one run.
Imports and input transfers are not part of the time. It prints one JSON line,
``{"seconds": ..., "loss": ...}``; the parent checks the loss against the oracle.

A fresh process is the only honest way to measure this: in the parent, the in-memory
caches of every framework would already be warm.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

from ember.bench.peers import load_object
from ember.bench.trees import tree_map
from ember.bench.workloads import SUITE


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m ember.bench.compile_probe")
    parser.add_argument("loader", help="namespace loader, 'module:function'")
    parser.add_argument("workload", help="name of a workload that returns (..., loss)")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)

    workload = next(w for w in SUITE if w.name == args.workload)
    ns = load_object(args.loader)()
    inputs = tree_map(ns.numpy.asarray, workload.make_inputs(args.quick))
    ns.block_until_ready(inputs)
    step = ns.jit(workload.jax_style(ns))

    start = time.perf_counter()
    out = step(*inputs)
    ns.block_until_ready(out)
    seconds = time.perf_counter() - start

    print(json.dumps({"seconds": seconds, "loss": float(np.asarray(out[1]))}))


if __name__ == "__main__":
    main()
